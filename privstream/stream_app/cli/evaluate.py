"""``privstream evaluate``: the error of released hypotheses or of a sanitized release on raw data.

Trusted zone: it reads raw examples, so its figures are not private, unless ``--epsilon`` is
given: then each hypothesis release's error is a private estimate with a confidence interval
(:mod:`privstream.learning.quality`; each release scored spends ε on the examples). A hypothesis
release (``privstream learn --json``, a subscriber's copy of the ``hypotheses`` topic) is scored
on labelled examples (``--examples``); a sanitized release over every query of its class on a
data file (``--data``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
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
    evaluate.add_argument(
        "--epsilon",
        type=float,
        help="a private estimate instead: each release's error at this ε (ε-DP on the examples per "
        "release scored; k releases spend k·ε), with a confidence interval for its true error",
    )
    evaluate.add_argument(
        "--confidence", type=float, default=0.95, help="--epsilon: the interval's confidence (0.95)"
    )
    evaluate.add_argument(
        "--size-public",
        action="store_true",
        help="--epsilon: the number of examples is public (else it is released noisily too)",
    )
    evaluate.add_argument(
        "--seed", type=int, help="--epsilon: seeded noise, reproducible and NOT private (experiments only)"
    )
    evaluate.add_argument("--json", action="store_true", help="one JSON object per release")
    evaluate.set_defaults(handler=run_evaluate)


def _report(args: argparse.Namespace, stream_id: str, predictions: Any, labels: Any, index: int) -> None:
    """One release's line: its exact error, or with ``--epsilon`` its private estimate."""
    import numpy as np

    n = int(labels.shape[0])
    if args.epsilon is not None:
        from privstream.learning.quality import estimate_error
        from privstream.learning.randomness import seeded

        rng = None if args.seed is None else seeded(args.seed + index)
        q = estimate_error(
            predictions,
            labels,
            epsilon=args.epsilon,
            size_public=args.size_public,
            confidence=args.confidence,
            rng=rng,
        )
        if args.json:
            print(json.dumps({"private": True, **q.to_dict()}))
        else:
            print(
                f"{stream_id}: private error estimate {q.error:.4g}, {q.confidence:.0%} interval "
                f"[{q.low:.4g}, {q.high:.4g}] (ε = {q.epsilon:g} spent on the examples)"
            )
        return
    mistakes = int(np.count_nonzero(predictions != labels)) if n else 0
    error = mistakes / n if n else None
    if args.json:
        print(json.dumps({"error": error, "n": n, "mistakes": mistakes}))
    else:
        shown = "undefined (no examples)" if error is None else f"{error:.6g}"
        print(f"{stream_id}: error {shown} ({mistakes} of {n})")


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
    releases = _read_releases(Path(args.release))
    _note_spend(args, len(releases))
    for index, release in enumerate(releases):
        h = hypothesis_from_dict(release.hypothesis)
        predictions = h.predict(xs) if xs.shape[0] else np.zeros(0, dtype=ys.dtype)
        _report(args, release.stream_id, predictions, ys, index)
    return 0


def _note_spend(args: argparse.Namespace, releases: int) -> None:
    """Check ``--epsilon`` and ``--confidence`` before anything is printed, then say what is spent."""
    if args.epsilon is None:
        return
    from privstream.learning.errors import PrivacyParameterError
    from privstream.learning.quality import quality_guarantee

    quality_guarantee(args.epsilon)  # refuses a bad ε
    if not 0 < args.confidence < 1:
        raise PrivacyParameterError(f"--confidence must be in (0, 1), got {args.confidence}")
    if args.seed is not None:
        print(
            "privstream evaluate: note: --seed makes the estimates reproducible and NOT private",
            file=sys.stderr,
        )
    if releases > 1:
        print(
            f"privstream evaluate: note: {releases} releases scored on the same examples spend "
            f"{releases} x {args.epsilon:g} = {releases * args.epsilon:g} of their privacy budget",
            file=sys.stderr,
        )


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
    _note_spend(args, len(releases))
    for index, release in enumerate(releases):
        model = vector_model_from_dict(release.hypothesis)
        predictions = model.predict(X) if X.shape[0] else np.zeros(0, dtype=ys.dtype)
        _report(args, release.stream_id, predictions, ys, index)
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
