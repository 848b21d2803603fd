"""Private-learning commands: ``learn`` (a private release from a file), ``evaluate``, ``audit``.

``privstream learn`` prints exactly what the service publishes for a window: a
:class:`~privstream.schemas.releases.HypothesisRelease` with its certificate (window kind "file").
``privstream evaluate`` scores releases on labelled examples (trusted zone: the error is computed
from raw data and is not private). ``privstream audit`` runs the empirical privacy audit of
:mod:`privstream.learning.audit` on a registered mechanism or on a private learner.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from pathlib import Path
from typing import Any

from privstream.stream_app.cli.common import (
    CLASS_HELP,
    EXAMPLES_HELP,
    ProgressBar,
    UserError,
    file_window_id,
    format_size,
    offline_release,
)

VECTOR_EXAMPLES_HELP = "CSV with a header, label column y (empty = unlabelled) and feature columns"
BOUNDS_HELP = (
    "public feature bounds of the vector learners (required by them, never derived from the "
    "data): 'lo:hi' for every feature or a JSON list [[lo, hi], ...]; write --bounds=-1:1"
)
#: Most runs per dataset ``audit --runs`` takes: the audit keeps every run's output in memory (to
#: choose its event on one half and bound it on the other), and a learner's run takes milliseconds.
MAX_AUDIT_RUNS = 1_000_000
#: α and β of the class learners when not given (the service's default too: agents.releases.ReleasePolicy)
CLASS_LEARNER_ACCURACY = 0.25


def register(subparsers: argparse._SubParsersAction) -> None:
    learn = subparsers.add_parser("learn", help="run a private learner over a file; print the release")
    learn.add_argument(
        "hclass", metavar="CLASS", nargs="?", help=CLASS_HELP + " (omit it for the vector learners)"
    )
    learn.add_argument("--examples", required=True, metavar="FILE", help=EXAMPLES_HELP)
    learn.add_argument(
        "--learner",
        default="generic",
        help="private learner (default: generic); bayes-consistent, semi-supervised and "
        "halfspaces read feature vectors: " + VECTOR_EXAMPLES_HELP,
    )
    learn.add_argument("--bounds", metavar="BOUNDS", help=BOUNDS_HELP)
    learn.add_argument("--epsilon", type=float, required=True, help="privacy parameter ε of each run")
    learn.add_argument("--delta", type=float, default=0.0, help="allowed δ (default 0; generic is pure DP)")
    learn.add_argument(
        "--alpha", type=float, help="target accuracy α (default 0.25; semi-supervised, halfspaces: their own)"
    )
    learn.add_argument(
        "--beta",
        type=float,
        help="target confidence β (default 0.25; semi-supervised, halfspaces: their own)",
    )
    learn.add_argument(
        "--seed", type=int, help="seeded randomness: reproducible and NOT private (experiments only)"
    )
    learn.add_argument(
        "--runs",
        type=int,
        default=1,
        metavar="K",
        help="independent runs on the same data (experiments: total cost K·ε)",
    )
    learn.add_argument("--json", action="store_true", help="one release JSON object per line")
    learn.set_defaults(handler=run_learn)

    audit = subparsers.add_parser(
        "audit", help="empirical privacy audit: a lower confidence bound on ε (exit 1 if above the claim)"
    )
    audit.add_argument(
        "mechanism",
        metavar="MECHANISM",
        help="a registered mechanism (e.g. exponential, laplace) or a learner (generic)",
    )
    audit.add_argument("--variant", help="audit a deliberately broken variant instead (positive control)")
    audit.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help=f"runs per dataset, 4 to {MAX_AUDIT_RUNS:,} (default: the mechanism's; "
        "a progress bar on stderr when it is a terminal)",
    )
    audit.add_argument("--epsilon", type=float, help="claimed ε to audit at (mechanisms that take one)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the audit's randomness (default 0)")
    audit.add_argument(
        "--confidence",
        type=float,
        default=0.999,
        help="probability that the reported lower bound is valid (default 0.999)",
    )
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(handler=run_audit_command)


# -- learn ------------------------------------------------------------------------------------


def _randomness_notes(args: argparse.Namespace) -> Any:
    """The run's random source (None: a fresh secure source per run), with the usual notes."""
    from privstream.learning.randomness import seeded

    if args.seed is not None:
        print(
            "privstream learn: note: --seed makes the release reproducible and NOT private; "
            "use it only for experiments",
            file=sys.stderr,
        )
    if args.runs > 1:
        print(
            f"privstream learn: note: {args.runs} runs on the same examples cost "
            f"{args.runs} x epsilon = {args.runs * args.epsilon:g} in total (sequential composition)",
            file=sys.stderr,
        )
    return seeded(args.seed) if args.seed is not None else None


def run_learn(args: argparse.Namespace) -> int:
    from privstream.agents.windows import learner_input
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.private_learners import LEARNERS, make_learner
    from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS
    from privstream.learning.randomness import secure, seeded
    from privstream.schemas import WindowInfo
    from privstream.stream_app.sources.files import read_examples
    from privstream.stream_app.suggestions import unknown_name

    if args.runs < 1:
        raise ValueError(f"--runs must be at least 1, got {args.runs}")
    if args.learner not in LEARNERS and args.learner not in VECTOR_LEARNERS:
        raise UserError(unknown_name("learner", args.learner, [*LEARNERS, *VECTOR_LEARNERS]))
    if args.learner in VECTOR_LEARNERS:
        return _learn_vectors(args)
    if args.hclass is None:
        raise ValueError(f"learner {args.learner!r} needs a CLASS ({CLASS_HELP})")
    hclass = parse_class_spec(args.hclass)
    path = Path(args.examples)
    xs, ys = read_examples(path)
    learner = make_learner(args.learner)
    rng = _randomness_notes(args)
    # the examples as the service's release agent gives them to the learner (a node's histogram,
    # in a random order from its own source): the same release for the same seed
    xs, ys = learner_input(xs, ys, seeded(args.seed) if args.seed is not None else secure())
    window = WindowInfo(window_id=file_window_id(path), kind="file", start=0, end=int(xs.shape[0]))
    for run in range(args.runs):
        result = learner.fit(
            hclass,
            xs,
            ys,
            epsilon=args.epsilon,
            delta=args.delta,
            alpha=CLASS_LEARNER_ACCURACY if args.alpha is None else args.alpha,
            beta=CLASS_LEARNER_ACCURACY if args.beta is None else args.beta,
            rng=rng,
        )
        release = offline_release(
            result,
            args,
            stream_id=path.stem,
            hypothesis_class=hclass.spec,
            algorithm=learner.name,
            window=window,
            run=run,
        )
        certificate = release.certificate
        if args.json:
            print(release.model_dump_json())
            continue
        guarantee = "holds" if result.accuracy_guarantee_holds else "does not hold"
        print(f"hypothesis:  {json.dumps(release.hypothesis)}")
        print(
            f"privacy:     ({result.epsilon:g}, {result.delta:g})-DP, replace-one, {result.mechanism}, "
            f"{certificate.randomness} randomness"
        )
        log10 = result.parameters.get("theorem_sample_size_log10")
        theorem_n = format_size(result.theorem_sample_size, log10)
        print(
            f"accuracy:    theorem needs n = {theorem_n}, have n = {format_size(result.sample_size)}: "
            f"guarantee {guarantee}"
        )
    return 0


def _parse_bounds(text: str | None, d: int) -> Any:
    from privstream.learning.private_learners.vector_base import check_bounds

    if text is None:
        raise ValueError(
            "--bounds is required for the vector learners: public feature bounds, never "
            "derived from the data ('lo:hi' for every feature or a JSON list [[lo, hi], ...])"
        )
    if text.lstrip().startswith("["):
        try:
            return check_bounds(json.loads(text), d)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--bounds: not a JSON list ({exc.msg})") from None
    lo, sep, hi = text.partition(":")
    try:
        pair = [float(lo), float(hi)]
    except ValueError:
        pair = []
    if not sep or len(pair) != 2:
        raise ValueError(f"--bounds: expected 'lo:hi' or a JSON list [[lo, hi], ...], got {text!r}")
    return check_bounds([pair] * d, d)


def _learn_vectors(args: argparse.Namespace) -> int:
    """``learn`` for the vector learners: one HypothesisRelease per run (hypothesis = model.to_dict())."""
    from privstream.learning.private_learners.vector_base import make_vector_learner, split_labels
    from privstream.schemas import WindowInfo
    from privstream.stream_app.sources.files import read_vector_examples

    if args.hclass is not None:
        raise ValueError(f"learner {args.learner!r} takes no CLASS argument (got {args.hclass!r})")
    path = Path(args.examples)
    X, y, _ = read_vector_examples(path)
    if args.learner == "bayes-consistent" and not split_labels(y, X.shape[0])[1].all():
        # validated here, before the learner (which never refuses data: unlabelled rows cast no vote)
        raise ValueError(
            "the bayes-consistent learner needs every row labelled (0/1); use the "
            "semi-supervised learner for unlabelled rows"
        )
    bounds = _parse_bounds(args.bounds, X.shape[1])
    # only what was given: the service runs the learner with its own defaults too
    given = {"alpha": args.alpha, "beta": args.beta}.items()
    params = (
        {k: v for k, v in given if v is not None} if args.learner in ("semi-supervised", "halfspaces") else {}
    )
    learner = make_vector_learner(args.learner, **params)
    rng = _randomness_notes(args)
    window = WindowInfo(window_id=file_window_id(path), kind="file", start=0, end=int(X.shape[0]))
    for run in range(args.runs):
        result = learner.fit(X, y, epsilon=args.epsilon, delta=args.delta, bounds=bounds, rng=rng)
        hclass = result.hypothesis_class
        release = offline_release(
            result,
            args,
            stream_id=path.stem,
            hypothesis_class=hclass,
            algorithm=learner.name,
            window=window,
            run=run,
        )
        certificate = release.certificate
        if args.json:
            print(release.model_dump_json())
            continue
        print(f"hypothesis:  {release.hypothesis['kind']} on {X.shape[1]} features ({hclass})")
        print(
            f"privacy:     ({result.epsilon:g}, {result.delta:g})-DP, replace-one, {result.mechanism}, "
            f"{certificate.randomness} randomness"
        )
        print(f"accuracy:    {result.guarantee}")
    return 0


# -- audit ------------------------------------------------------------------------------------


def _audit_spec(name: str, epsilon: float | None) -> Any:
    from privstream.learning.audit import AUDITS, audit_spec_factory
    from privstream.stream_app.suggestions import unknown_name

    if name not in AUDITS:
        raise UserError(unknown_name("audit", name, AUDITS))
    factory = audit_spec_factory(name)
    if epsilon is None:
        return factory()
    if "epsilon" not in inspect.signature(factory).parameters:
        raise ValueError(f"{name} is audited at its fixed epsilon; --epsilon is not supported for it")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"--epsilon must be a finite number > 0, got {epsilon}")
    return factory(epsilon=epsilon)


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def run_audit_command(args: argparse.Namespace) -> int:
    from privstream.learning.audit import privacy_loss, run_audit

    spec = _audit_spec(args.mechanism, args.epsilon)
    if args.variant is not None and args.variant not in spec.broken:
        known = ", ".join(sorted(spec.broken))
        raise ValueError(f"{spec.name} has no variant {args.variant!r}; known: {known}")
    if args.runs is not None and not 4 <= args.runs <= MAX_AUDIT_RUNS:
        raise UserError(
            f"--runs must be between 4 and {MAX_AUDIT_RUNS:,} (the audit keeps every run's output "
            f"in memory), got {args.runs:,}"
        )
    bar = ProgressBar() if sys.stderr.isatty() else None
    try:
        result = run_audit(
            spec,
            variant=args.variant,
            samples=args.runs,
            seed=args.seed,
            confidence=args.confidence,
            progress=None if bar is None else lambda done: bar(done, f"{spec.name}: runs"),
        )
    finally:
        if bar is not None:
            bar.close()
    exact = None
    if spec.exact is not None and args.variant is None:
        exact = _finite_or_none(privacy_loss(*spec.exact()))
    if args.json:
        print(
            json.dumps(
                {
                    "mechanism": spec.name,
                    "variant": args.variant,
                    "description": spec.description,
                    "claimed_epsilon": result.claimed_epsilon,
                    "claimed_delta": result.claimed_delta,
                    "epsilon_lower_bound": result.epsilon_lower_bound,
                    # null: infinite (an output seen under one dataset is impossible under the other)
                    "epsilon_estimate": _finite_or_none(result.epsilon_estimate),
                    "exceeds_claim": not result.passed,
                    "passed": result.passed,
                    "exact_privacy_loss": exact,
                    "runs_per_dataset": result.samples,
                    "confidence": result.confidence,
                    "direction": result.direction,
                    "event_counts": list(result.counts),
                    "seed": args.seed,
                }
            )
        )
    else:
        print(result.summary())
        if exact is not None:
            print(f"exact privacy loss on this pair: {exact:.4f}")
    return 0 if result.passed else 1
