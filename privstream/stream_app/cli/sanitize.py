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
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

from privstream import __version__

CLASS_HELP = "thresholds:N, points:N, intervals:N (N like 1024, 2^32) or a .npy/.csv class file"
SANITIZER_CHOICES = ("hierarchical", "mwem", "fooling")


def default_sanitizer(hclass: Any) -> str:
    """``hierarchical`` for the 1-D integer classes, ``mwem`` for class files (hierarchical refuses them)."""
    from privstream.learning.hypothesis_classes import Intervals, Points, Thresholds

    return "hierarchical" if isinstance(hclass, Thresholds | Intervals | Points) else "mwem"
DATA_HELP = "CSV with a header naming x and optionally y (y makes the release labelled)"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sanitize", help="private query release: a synthetic distribution for a class")
    p.add_argument("hclass", metavar="CLASS", help=CLASS_HELP)
    p.add_argument("--data", required=True, metavar="FILE", help=DATA_HELP)
    p.add_argument("--sanitizer", default="auto", choices=("auto", *SANITIZER_CHOICES),
                   help="default auto: hierarchical for thresholds, intervals and points (the most accurate "
                        "on the benchmark), mwem for class files")
    p.add_argument("--epsilon", type=float, required=True, help="total privacy parameter ε of the release")
    p.add_argument("--delta", type=float, default=0.0,
                   help="total δ (default 0; mwem uses zCDP composition when δ > 0; fooling needs δ > 0)")
    p.add_argument("--alpha", type=float, default=0.1, help="target accuracy α (default 0.1)")
    p.add_argument("--beta", type=float, default=0.1, help="target confidence β (default 0.1)")
    p.add_argument("--rounds", type=int, default=20,
                   help="rounds T of mwem and fooling (default 20; the budget is split over T)")
    p.add_argument("--seed", type=int,
                   help="seeded randomness: reproducible and NOT private (experiments only)")
    p.add_argument("--json", action="store_true", help="print the release as one JSON line")
    p.set_defaults(handler=run_sanitize)


def read_data(path: str | Path) -> tuple[Any, Any]:
    """``(xs, ys or None)`` from a CSV with header ``x`` (and optionally ``y``)."""
    import numpy as np

    from privstream.stream_app.example_files import ExampleFileError, _label, _point

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ExampleFileError(f"{p}: empty data file (need a header naming x, then one point per line)")
    header = [h.strip().lower() for h in next(csv.reader([lines[0][1]]))]
    if "x" not in header:
        raise ExampleFileError(f"{p}: line {lines[0][0]}: the CSV needs a header row naming column x")
    ix, iy = header.index("x"), (header.index("y") if "y" in header else None)
    xs: list[int] = []
    ys: list[int] = []
    for lineno, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ExampleFileError(f"{p}: line {lineno}: {len(cells)} fields, the header has {len(header)}")
        xs.append(_point(p, f"line {lineno}", cells[ix].strip()))
        if iy is not None:
            ys.append(_label(p, f"line {lineno}", cells[iy].strip())[0])
    if not xs:
        raise ExampleFileError(f"{p}: no data points after the header")
    if max(xs) > 2**63 - 1:
        raise ExampleFileError(f"{p}: point {max(xs)} is beyond the sanitizers' limit of 2^63 - 1")
    return np.array(xs, dtype=np.int64), (np.array(ys, dtype=np.uint8) if iy is not None else None)


def run_sanitize(args: argparse.Namespace) -> int:
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.randomness import seeded
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.schemas import Certificate, SanitizedRelease, WindowInfo
    from privstream.stream_app.cli.private import _file_window_id

    hclass = parse_class_spec(args.hclass)
    path = Path(args.data)
    xs, ys = read_data(path)
    name = default_sanitizer(hclass) if args.sanitizer == "auto" else args.sanitizer
    sanitizer = make_sanitizer(name, **({"rounds": args.rounds} if name in ("mwem", "fooling") else {}))
    if args.seed is not None:
        print("privstream sanitize: note: --seed makes the release reproducible and NOT private; "
              "use it only for experiments", file=sys.stderr)
    result = sanitizer.fit(hclass, xs, ys, epsilon=args.epsilon, delta=args.delta, alpha=args.alpha,
                           beta=args.beta, rng=seeded(args.seed) if args.seed is not None else None)
    window = WindowInfo(window_id=_file_window_id(path), kind="file", start=0, end=int(xs.shape[0]))
    certificate = Certificate(
        mechanism=result.mechanism, epsilon=result.epsilon, delta=result.delta,
        neighbouring_relation="replace-one", privacy_unit="example", window=window,
        sample_size=result.sample_size, parameters={**result.parameters, "sanitizer": sanitizer.name},
        proper=False, accuracy_guarantee_holds=result.accuracy_guarantee_holds,
        theorem_sample_size=result.theorem_sample_size,
        randomness="seeded" if args.seed is not None else "secure", library_version=__version__,
    )
    release = SanitizedRelease(stream_id=path.stem, hypothesis_class=hclass.spec,
                               distribution=result.distribution.to_dict(),
                               labelled=result.distribution.labelled, certificate=certificate)
    if args.json:
        print(release.model_dump_json())
        return 0
    guarantee = "holds" if result.accuracy_guarantee_holds else "does not hold"
    print(f"release:     {result.distribution.num_blocks} blocks over {hclass.spec}"
          f"{' (labelled)' if release.labelled else ''}")
    print(f"privacy:     ({result.epsilon:g}, {result.delta:g})-DP, replace-one, {result.mechanism}, "
          f"{certificate.randomness} randomness")
    print(f"accuracy:    theorem needs n = {result.theorem_sample_size}, have n = {result.sample_size}: "
          f"guarantee {guarantee}")
    return 0


def _read_sanitized(path: Path) -> Any:
    from pydantic import ValidationError

    from privstream.schemas import SanitizedRelease

    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(f"{path}: expected one sanitized release (one JSON line), found {len(lines)} lines")
    try:
        obj = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg})") from None
    if isinstance(obj, dict) and "hypothesis" in obj and "distribution" not in obj:
        raise ValueError(f"{path}: a hypothesis release; evaluate it with --examples, not --data")
    try:
        return SanitizedRelease.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "release"
        raise ValueError(f"{path}: not a sanitized release ({where}: {first['msg']})") from None


def run_evaluate_sanitized(args: argparse.Namespace) -> int:
    """``evaluate --release FILE --data FILE``: max and mean error over all queries of the class."""
    from privstream.stream_app.sdk import SanitizedView

    view = SanitizedView(_read_sanitized(Path(args.release)))
    xs, ys = read_data(args.data)
    if view.labelled and ys is None:
        raise ValueError(f"{args.data}: the release is labelled; the data needs a y column")
    if not view.labelled and ys is not None:
        raise ValueError(f"{args.data}: the release is unlabelled; the data must not have a y column")
    max_error, mean_error = view.errors_on(xs, ys)
    out = {"max_error": max_error, "mean_error": mean_error if math.isfinite(mean_error) else None,
           "n": int(xs.shape[0])}
    if args.json:
        print(json.dumps(out))
    else:
        mean = "n/a (intervals over 2^24)" if out["mean_error"] is None else f"{mean_error:.6g}"
        print(f"{view.stream_id}: max error {max_error:.6g}, mean error {mean} over the class "
              f"(n = {out['n']})")
    return 0
