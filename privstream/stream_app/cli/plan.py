"""``privstream plan``: how many examples each learner and sanitizer needs on a class.

Calls :func:`privstream.learning.planning.plan`: for every registered learner and sanitizer that
applies to the class, the sample size its theorem needs (a float with its log10) and the size it
needs in practice on realizable synthetic data of the class (seeded simulation within ``--budget``
seconds, a progress bar on stderr), and a recommendation. ``--json`` prints one JSON object.

``--node-size N`` (default 100000, the service's default input cap ``max_node_examples``) also
prints the publication slot (``publish_delay_seconds``) a stream with the candidate gets for nodes
of N examples, measured as the worker measures it at start-up
(:func:`privstream.stream_app.publication.measure_slot`: the node's load and shipping, with
``--quality-epsilon`` the scoring of the release before on the node's examples, the default, the
fit's preparation and the slowest fit in a learner process, a learner process's start-up), part by
part in ``--json``; a count window of N examples, or with ``--window-seconds`` a time window capped
at N; a stream with a learner and a sanitizer needs the sum.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from privstream.stream_app.cli.common import CLASS_HELP, ProgressBar, UserError, format_size


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("plan", help="sample sizes each learner and sanitizer needs on a class")
    p.add_argument("hclass", metavar="CLASS", help=CLASS_HELP)
    p.add_argument("--epsilon", type=float, required=True, help="privacy parameter ε of one release")
    p.add_argument(
        "--alpha",
        type=float,
        required=True,
        help="target error α (learners: population error; sanitizers: largest query error)",
    )
    p.add_argument("--beta", type=float, default=0.1, help="failure probability β (default 0.1)")
    p.add_argument("--delta", type=float, default=1e-6, help="δ (default 1e-6; some algorithms need δ > 0)")
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time budget of the simulation, shared by the candidates (default 60)",
    )
    p.add_argument("--runs", type=int, default=10, help="fits per sample size (default 10)")
    p.add_argument(
        "--node-size",
        type=int,
        default=100_000,
        metavar="N",
        help="time each candidate on public inputs of N examples (the input cap max_node_examples, or a "
        "count node's n) and advise publish_delay_seconds (default 100000; 0: skip)",
    )
    p.add_argument(
        "--window-seconds",
        type=float,
        default=None,
        metavar="S",
        help="the slot of time windows of S seconds capped at --node-size (default: count windows of "
        "--node-size examples)",
    )
    p.add_argument(
        "--quality-epsilon",
        type=float,
        default=None,
        metavar="EPS",
        help="the stream's quality_epsilon: the slot also covers scoring the release before on the "
        "node's examples (a learner's, at level 0; default: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and of the fits")
    p.add_argument(
        "--only", action="append", metavar="NAME", help="plan for this learner or sanitizer only (repeatable)"
    )
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.planning import plan

    if args.budget <= 0:
        raise UserError(f"--budget must be > 0 seconds, got {args.budget}")
    if args.node_size < 0:
        raise UserError(f"--node-size must be >= 0, got {args.node_size}")
    if args.window_seconds is not None and not args.window_seconds > 0:
        raise UserError(f"--window-seconds must be > 0, got {args.window_seconds}")
    if args.quality_epsilon is not None and not args.quality_epsilon > 0:
        raise UserError(f"--quality-epsilon must be > 0, got {args.quality_epsilon}")
    hclass = parse_class_spec(args.hclass)
    bar = None if args.no_progress else ProgressBar()
    try:
        result = plan(
            hclass,
            epsilon=args.epsilon,
            alpha=args.alpha,
            beta=args.beta,
            delta=args.delta,
            seed=args.seed,
            runs=args.runs,
            time_budget=args.budget,
            names=args.only,
            progress=bar,
        )
        if args.node_size:
            result = with_service_slots(
                result, hclass, args.node_size, args.window_seconds, bar, quality_epsilon=args.quality_epsilon
            )
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    print(
        f"class {result.hypothesis_class}, eps={result.epsilon:g}, delta={result.delta:g}, "
        f"alpha={result.alpha:g}, beta={result.beta:g} ({result.runs} runs per size, seed {result.seed})"
    )
    print(f"{'':10s} {'name':18s} {'theorem n':>14s} {'practical n':>12s} {'slot (s)':>9s}  status")
    for c in result.candidates:
        d = c.to_dict()
        practical = format_size(c.practical_size)
        status = c.status if c.applies else f"not applicable: {c.reason}"
        theorem = format_size(d["theorem_sample_size"], d["theorem_sample_size_log10"])
        slot = f"{c.publish_delay_seconds:g}" if c.publish_delay_seconds is not None else "-"
        print(f"{c.kind:10s} {c.name:18s} {theorem:>14s} {practical:>12s} {slot:>9s}  {status}")
    print(f"recommendation: {result.recommendation['text']}")
    if result.node_size is not None:
        cut = (
            f"count windows of {result.node_size:,} examples"
            if args.window_seconds is None
            else f"time windows of {args.window_seconds:g} s capped at {result.node_size:,} examples"
        )
        print(
            f"slot: publish_delay_seconds the worker derives for {cut}: a margin, the timer's period, and 3x "
            "the node's load, shipping, scoring (--quality-epsilon), default and slowest fit on public "
            "inputs, never shorter than a learner process's start-up (--json: part by part); sum a "
            "learner's and a sanitizer's"
        )
    return 0


def with_service_slots(
    result: Any,
    hclass: Any,
    node_size: int,
    window_seconds: float | None,
    progress: Any,
    *,
    quality_epsilon: float | None = None,
) -> Any:
    """The plan with each applicable candidate's slot measured as the worker measures it at
    start-up (:func:`~privstream.stream_app.publication.measure_slot`), for a stream of that
    candidate alone whose level-0 nodes read ``node_size`` examples (``quality_epsilon``: and
    score the release before them, as a stream with it does)."""
    import dataclasses

    from privstream.agents.releases import Product, ReleasePolicy
    from privstream.learning.private_learners import make_learner
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.stream_app.learner_process import LearnerProcesses
    from privstream.stream_app.publication import learner_startup, measure_slot
    from privstream.stream_app.release_policies import time_window_tick

    shape: dict[str, Any] = (
        {"window_kind": "count", "window_size": node_size}
        if window_seconds is None
        else {"window_kind": "time", "window_seconds": window_seconds, "expected_size": node_size}
    )
    processes = LearnerProcesses(["plan"])
    candidates, path = [], None
    applicable = [c for c in result.candidates if c.applies]
    try:
        respawn = learner_startup(processes, "plan")
        for c in result.candidates:
            if not c.applies:
                candidates.append(c)
                continue
            if progress is not None:
                progress(applicable.index(c) / len(applicable), f"{c.name}: its slot on {node_size} examples")
            algorithm = make_learner(c.name) if c.kind == "learner" else make_sanitizer(c.name)
            product = Product(
                "hypotheses" if c.kind == "learner" else "sanitized", algorithm, result.epsilon, result.delta
            )
            policy = ReleasePolicy(
                "plan",
                hclass,
                (product,),
                alpha=result.alpha,
                beta=result.beta,
                max_node_examples=node_size,
                quality_epsilon=quality_epsilon,
                **shape,
            )
            timer = time_window_tick({"plan": policy}) if window_seconds is not None else 0.0
            measured = measure_slot(policy, processes, 0, respawn, path)
            path = (measured.load, measured.ship)
            candidates.append(
                dataclasses.replace(
                    c,
                    node_fit_seconds=measured.fit,
                    publish_delay_seconds=measured.slot(timer),
                    slot_parts=measured.to_dict(timer),
                )
            )
    finally:
        processes.shutdown()
    return dataclasses.replace(result, candidates=tuple(candidates), node_size=node_size)
