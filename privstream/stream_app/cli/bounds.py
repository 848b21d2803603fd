"""``privstream bounds FILE --epsilon E``: private per-feature bounds of a CSV's columns.

Each feature's bounds are its ``q``- and ``(1 - q)``-quantiles released by the exponential
mechanism on a public grid over a public range (:mod:`privstream.learning.mechanisms.quantile`),
``2d`` releases at ``ε/(2d)`` each: ε-DP in all (basic composition). The output is JSON: the
bounds (``feature_bounds`` of a stream's configuration, in column order; for a tabular stream,
``--columns`` picks its numeric columns and each pair is a column's ``bounds``), the feature names
and what the release cost. Nothing else of the data is printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from privstream.stream_app.cli.common import UserError

DATA_HELP = "CSV with a header row; every column but the label's is a numeric feature"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bounds", help="private per-feature bounds (DP quantiles) of a CSV's columns")
    p.add_argument("data", metavar="FILE", help=DATA_HELP)
    p.add_argument(
        "--epsilon", type=float, required=True, help="total ε of the release (ε/(2d) per quantile)"
    )
    p.add_argument(
        "--range",
        type=float,
        nargs=2,
        metavar=("LO", "HI"),
        required=True,
        help="a public range holding every feature's bounds (never taken from the data); a value "
        "outside it counts as its nearest end",
    )
    p.add_argument(
        "--cells",
        type=int,
        default=1024,
        help="grid cells over the range (default 1024): the bounds are grid points; a finer grid "
        "needs more rows for the same accuracy, never more ε",
    )
    p.add_argument(
        "--quantile",
        type=float,
        default=0.01,
        help="q: the bounds are the q- and (1 - q)-quantiles (default 0.01)",
    )
    p.add_argument("--label", default="y", help="the label's column, left out (default y; absent: none)")
    p.add_argument(
        "--columns",
        metavar="NAMES",
        help="comma-separated: only these columns, in this order (a tabular file's numeric columns; "
        "the others, categorical ones included, are left out); default: every column but the label",
    )
    p.add_argument(
        "--seed", type=int, help="seeded randomness: reproducible and NOT private (experiments only)"
    )
    p.set_defaults(handler=run_bounds)


def read_features(
    path: Path, label: str, columns: list[str] | None = None
) -> tuple[list[str], list[list[float]]]:
    """The feature names and rows of ``path``: ``columns`` in their order, or every column but
    ``label``'s; a user error if a cell is not a number (choosing columns is public: the data
    decides nothing here)."""
    try:
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if not header:
                raise UserError(f"{path}: empty file (a header row is needed)")
            names = [name.strip() for name in header]
            if columns is not None:
                unknown = [c for c in columns if c not in names]
                if unknown or len(set(columns)) != len(columns) or not columns:
                    why = f"no column {unknown[0]!r} in its header" if unknown else "name each column once"
                    raise UserError(f"{path}: --columns: {why}")
                keep = [names.index(c) for c in columns]
            else:
                keep = [i for i, name in enumerate(names) if name != label]
            if not keep:
                raise UserError(f"{path}: no feature column (only the label {label!r})")
            rows = []
            for line, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise UserError(f"{path} line {line}: {len(row)} cells, the header has {len(header)}")
                values = []
                for i in keep:
                    try:
                        value = float(row[i])
                    except ValueError:
                        raise UserError(
                            f"{path} line {line}: {header[i]} = {row[i]!r} is not a number"
                        ) from None
                    if not math.isfinite(value):
                        raise UserError(
                            f"{path} line {line}: {header[i]} = {row[i]!r} is not a finite number"
                        )
                    values.append(value)
                rows.append(values)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise UserError(f"{path}: no data rows")
    return [header[i].strip() for i in keep], rows


def run_bounds(args: argparse.Namespace) -> int:
    from privstream.learning.mechanisms import private_bounds
    from privstream.learning.randomness import secure, seeded

    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        raise UserError(f"--epsilon must be a positive number, got {args.epsilon}")
    lo, hi = args.range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UserError(f"--range must be finite with LO < HI, got {lo} {hi}")
    if args.cells < 1:
        raise UserError(f"--cells must be at least 1, got {args.cells}")
    if not 0 < args.quantile < 0.5:
        raise UserError(f"--quantile must be in (0, 0.5), got {args.quantile}")
    columns = None if args.columns is None else [c.strip() for c in args.columns.split(",")]
    names, rows = read_features(Path(args.data), args.label, columns)
    rng = seeded(args.seed) if args.seed is not None else secure()
    released = private_bounds(
        rows, epsilon=args.epsilon, lo=lo, hi=hi, cells=args.cells, quantile=args.quantile, rng=rng
    )
    out = {"features": names, **released.as_dict(), "private": args.seed is None}
    print(json.dumps(out, ensure_ascii=False))
    return 0
