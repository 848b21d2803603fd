"""``privstream plan``: how many examples each learner and sanitizer needs on a class.

Calls :func:`privstream.learning.planning.plan`: for every registered learner and sanitizer that
applies to the class, the sample size its theorem needs (a float with its log10) and the size it
needs in practice on realizable synthetic data of the class (seeded simulation within ``--budget``
seconds, a progress bar on stderr), and a recommendation. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

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
    print(f"{'':10s} {'name':18s} {'theorem n':>14s} {'practical n':>12s}  status")
    for c in result.candidates:
        d = c.to_dict()
        practical = format_size(c.practical_size)
        status = c.status if c.applies else f"not applicable: {c.reason}"
        theorem = format_size(d["theorem_sample_size"], d["theorem_sample_size_log10"])
        print(f"{c.kind:10s} {c.name:18s} {theorem:>14s} {practical:>12s}  {status}")
    print(f"recommendation: {result.recommendation['text']}")
    return 0
