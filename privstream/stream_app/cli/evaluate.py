"""``privstream evaluate``: the error of released hypotheses or of a sanitized release on raw data.

Trusted zone: it reads raw examples, so its figures are not private. A hypothesis release
(``privstream learn --json``, a subscriber's copy of the ``hypotheses`` topic) is scored on
labelled examples (``--examples``); a sanitized release over every query of its class on a data
file (``--data``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from privstream.stream_app.cli.common import EXAMPLES_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    evaluate = subparsers.add_parser(
        "evaluate", help="error of released hypotheses on labelled examples (not a private output)"
    )
    evaluate.add_argument(
        "--release",
        required=True,
        metavar="FILE",
        help="file of release JSON lines (as printed by privstream learn --json)",
    )
    evaluate.add_argument("--examples", metavar="FILE", help=EXAMPLES_HELP)
    evaluate.add_argument("--data", metavar="FILE", help="for a sanitized release: CSV with header x[,y]")
    evaluate.add_argument("--json", action="store_true", help="one JSON object per release")
    evaluate.set_defaults(handler=run_evaluate)


# -- hypothesis releases ---------------------------------------------------------------------------------


def _read_releases(path: Path) -> list[Any]:
    from pydantic import ValidationError

    from privstream.schemas import HypothesisRelease

    releases = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            releases.append(HypothesisRelease.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "release"
            raise ValueError(f"{path}: line {lineno}: not a release ({where}: {first['msg']})") from None
    if not releases:
        raise ValueError(f"{path}: no release in the file")
    return releases


def run_evaluate(args: argparse.Namespace) -> int:
    import numpy as np

    from privstream.learning.hypotheses import hypothesis_from_dict
    from privstream.stream_app.sources.files import read_examples

    if args.data is not None:  # a sanitized release: errors over all queries of its class
        return run_evaluate_sanitized(args)
    if args.examples is None:
        raise ValueError("evaluate needs --examples (hypothesis releases) or --data (a sanitized release)")
    vector_releases = _vector_releases(Path(args.release))
    if vector_releases is not None:
        return _evaluate_vectors(args, vector_releases)
    xs, ys = read_examples(args.examples)
    for release in _read_releases(Path(args.release)):
        h = hypothesis_from_dict(release.hypothesis)
        n = int(xs.shape[0])
        mistakes = int(np.count_nonzero(h.predict(xs) != ys)) if n else 0
        error = mistakes / n if n else None
        if args.json:
            print(json.dumps({"error": error, "n": n, "mistakes": mistakes}))
        else:
            shown = "undefined (no examples)" if error is None else f"{error:.6g}"
            print(f"{release.stream_id}: error {shown} ({mistakes} of {n})")
    return 0


def _vector_releases(path: Path) -> list[Any] | None:
    """The releases in ``path`` if they all hold vector models; None otherwise (or if unreadable)."""
    from privstream.learning.private_learners.vector_base import is_vector_model_dict

    try:
        releases = _read_releases(path)
    except (ValueError, OSError):
        return None  # the hypothesis path reports it, as before
    return releases if all(is_vector_model_dict(r.hypothesis) for r in releases) else None


def _evaluate_vectors(args: argparse.Namespace, releases: list[Any]) -> int:
    import numpy as np

    from privstream.learning.private_learners.vector_base import vector_model_from_dict
    from privstream.stream_app.sources.files import read_vector_examples

    X, y, _ = read_vector_examples(args.examples)
    labelled = ~np.isnan(y)  # unlabelled rows cannot be scored
    X, ys = X[labelled], y[labelled].astype(np.uint8)
    n = int(X.shape[0])
    for release in releases:
        model = vector_model_from_dict(release.hypothesis)
        mistakes = int(np.count_nonzero(model.predict(X) != ys)) if n else 0
        error = mistakes / n if n else None
        if args.json:
            print(json.dumps({"error": error, "n": n, "mistakes": mistakes}))
        else:
            shown = "undefined (no labelled examples)" if error is None else f"{error:.6g}"
            print(f"{release.stream_id}: error {shown} ({mistakes} of {n})")
    return 0


# -- sanitized releases -------------------------------------------------------------------------


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
    from privstream.stream_app.sources.files import read_query_data

    xs, ys = read_query_data(args.data)
    if view.labelled and ys is None:
        raise ValueError(f"{args.data}: the release is labelled; the data needs a y column")
    if not view.labelled and ys is not None:
        raise ValueError(f"{args.data}: the release is unlabelled; the data must not have a y column")
    max_error, mean_error = view.errors_on(xs, ys)
    out = {
        "max_error": max_error,
        "mean_error": mean_error if math.isfinite(mean_error) else None,
        "n": int(xs.shape[0]),
    }
    if args.json:
        print(json.dumps(out))
    else:
        mean = "n/a (intervals over 2^24)" if out["mean_error"] is None else f"{mean_error:.6g}"
        print(
            f"{view.stream_id}: max error {max_error:.6g}, mean error {mean} over the class (n = {out['n']})"
        )
    return 0
