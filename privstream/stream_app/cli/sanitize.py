"""``privstream sanitize``: a private synthetic distribution for a class, from a data file.

Prints exactly what the service publishes on the ``sanitized`` topic for a window: a
:class:`~privstream.schemas.sanitized.SanitizedRelease` with its certificate (window kind "file").
The data file is a CSV with a header naming ``x`` and optionally ``y`` (a ``y`` column makes the
release labelled: answers are ``Pr[h(x) = y]``). ``privstream evaluate --release FILE --data FILE``
(in :mod:`.private`) calls :func:`run_evaluate_sanitized` to score a sanitized release over every
query of its class (trusted zone: computed from raw data, not private).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from privstream.stream_app.cli.common import CLASS_HELP, file_window_id, format_size, offline_release

DATA_HELP = "CSV with a header naming x and optionally y (y makes the release labelled)"
SANITIZER_CHOICES = ("hierarchical", "mwem", "fooling")


def default_sanitizer(hclass: object) -> str:
    """``hierarchical`` for the 1-D integer classes, ``mwem`` for class files (hierarchical refuses them)."""
    from privstream.learning.hypothesis_classes import Intervals, Points, Thresholds

    return "hierarchical" if isinstance(hclass, Thresholds | Intervals | Points) else "mwem"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sanitize", help="private query release: a synthetic distribution for a class")
    p.add_argument("hclass", metavar="CLASS", help=CLASS_HELP)
    p.add_argument("--data", required=True, metavar="FILE", help=DATA_HELP)
    p.add_argument(
        "--sanitizer",
        default="auto",
        choices=("auto", *SANITIZER_CHOICES),
        help="default auto: hierarchical for thresholds, intervals and points (the most accurate "
        "on the benchmark), mwem for class files",
    )
    p.add_argument("--epsilon", type=float, required=True, help="total privacy parameter ε of the release")
    p.add_argument(
        "--delta",
        type=float,
        default=0.0,
        help="total δ (default 0; mwem uses zCDP composition when δ > 0; fooling needs δ > 0)",
    )
    p.add_argument("--alpha", type=float, default=0.1, help="target accuracy α (default 0.1)")
    p.add_argument("--beta", type=float, default=0.1, help="target confidence β (default 0.1)")
    p.add_argument(
        "--rounds",
        type=int,
        default=20,
        help="rounds T of mwem and fooling (default 20; the budget is split over T)",
    )
    p.add_argument(
        "--seed", type=int, help="seeded randomness: reproducible and NOT private (experiments only)"
    )
    p.add_argument("--json", action="store_true", help="print the release as one JSON line")
    p.set_defaults(handler=run_sanitize)


def run_sanitize(args: argparse.Namespace) -> int:
    import numpy as np

    from privstream.agents.windows import learner_input
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.randomness import secure, seeded
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.schemas import WindowInfo
    from privstream.stream_app.sources.files import read_query_data

    hclass = parse_class_spec(args.hclass)
    path = Path(args.data)
    xs, ys = read_query_data(path)
    # the examples as the service's release agent gives them to the sanitizer (a node's histogram,
    # in a random order from its own source): the same release for the same seed
    order = seeded(args.seed) if args.seed is not None else secure()
    if ys is None:
        xs, _ = learner_input(xs, np.zeros(len(xs), np.uint8), order)
    else:
        xs, ys = learner_input(xs, ys, order)
    name = default_sanitizer(hclass) if args.sanitizer == "auto" else args.sanitizer
    sanitizer = make_sanitizer(name, **({"rounds": args.rounds} if name in ("mwem", "fooling") else {}))
    if args.seed is not None:
        print(
            "privstream sanitize: note: --seed makes the release reproducible and NOT private; "
            "use it only for experiments",
            file=sys.stderr,
        )
    result = sanitizer.fit(
        hclass,
        xs,
        ys,
        epsilon=args.epsilon,
        delta=args.delta,
        alpha=args.alpha,
        beta=args.beta,
        rng=seeded(args.seed) if args.seed is not None else None,
    )
    window = WindowInfo(window_id=file_window_id(path), kind="file", start=0, end=int(xs.shape[0]))
    release = offline_release(
        result,
        args,
        stream_id=path.stem,
        hypothesis_class=hclass.spec,
        algorithm=sanitizer.name,
        window=window,
    )
    certificate = release.certificate
    if args.json:
        print(release.model_dump_json())
        return 0
    guarantee = "holds" if result.accuracy_guarantee_holds else "does not hold"
    print(
        f"release:     {result.distribution.num_blocks} blocks over {hclass.spec}"
        f"{' (labelled)' if release.labelled else ''}"
    )
    print(
        f"privacy:     ({result.epsilon:g}, {result.delta:g})-DP, replace-one, {result.mechanism}, "
        f"{certificate.randomness} randomness"
    )
    theorem_n = format_size(result.theorem_sample_size, result.parameters.get("theorem_sample_size_log10"))
    print(
        f"accuracy:    theorem needs n = {theorem_n}, have n = {format_size(result.sample_size)}: "
        f"guarantee {guarantee}"
    )
    return 0
