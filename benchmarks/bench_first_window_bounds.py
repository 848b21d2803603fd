"""Private releases clipped at bounds learned privately from a stream's first window, beside the
same releases at public bounds: what the bounds cost in accuracy.

Run:  .venv/bin/pip install -e '.[bench]'
      .venv/bin/python benchmarks/bench_first_window_bounds.py [--runs 3] [--datasets all]

Prints one JSON object on stdout (progress on stderr).

**Stream.** Each data set of ``bench_real_data.py`` in one shuffled order (seed = run): its first
20% are the first window, the next 60% the windows the releases learn on, the last 20% the test
set. Every release is ``halfspaces`` at ε = 1 on the 60%.

**Bounds**, side by side in one run:

* ``data``: each feature's min and max over the whole data set (the stand-in for a schema's
  documented ranges that ``bench_real_data.py`` uses; not private: the reference);
* ``range``: the one public range the quantiles search, ``[-R, R]`` with ``R`` the power of ten
  above every feature's largest magnitude, as every feature's bounds (what an operator who knows
  only an order of magnitude would declare);
* ``private q=Q eps=E``: :func:`privstream.learning.mechanisms.private_bounds` on the first
  window's rows (the ``Q``- and ``(1 - Q)``-quantiles at ``E/(2d)`` each, 1024 cells over the
  range): what ``privstream bounds FILE --epsilon E --quantile Q`` releases.

Reported per data set and bounds: test accuracy (mean of the runs), its ratio to ``data``'s, and
the share of the test set's feature values outside the bounds (clipped by every learner).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np
from bench_real_data import DATASETS, load, progress

from privstream.learning.mechanisms import private_bounds
from privstream.learning.private_learners.vector_base import make_vector_learner
from privstream.learning.randomness import seeded

EPSILON = 1.0
BOUNDS_EPSILONS = (0.1, 1.0)
QUANTILES = (0.01, 0.05)
CELLS = 1024


def public_range(X: np.ndarray) -> tuple[float, float]:
    """``[-R, R]``, ``R`` the power of ten above the largest magnitude (an order of magnitude)."""
    top = float(np.max(np.abs(X)))
    radius = 10.0 ** math.ceil(math.log10(top)) if top > 0 else 1.0
    return -radius, radius


def clipped_share(X: np.ndarray, bounds: np.ndarray) -> float:
    lo, hi = bounds[:, 0], bounds[:, 1]
    return float(np.mean(np.less(X, lo) | np.greater(X, hi)))


def one_run(name: str, run: int) -> dict[str, tuple[float, float, int]]:
    """``{bounds: (accuracy, clipped share, first-window rows)}`` of one shuffled order."""
    X, y, data_bounds, _ = load(name)
    order = np.random.default_rng(run).permutation(X.shape[0])
    X, y = X[order], y[order]
    first, train = int(0.2 * X.shape[0]), int(0.8 * X.shape[0])
    lo, hi = public_range(X)
    candidates: dict[str, np.ndarray] = {
        "data": data_bounds,
        "range": np.array([[lo, hi]] * X.shape[1]),
    }
    for q in QUANTILES:
        for eps in BOUNDS_EPSILONS:
            released = private_bounds(
                X[:first].tolist(), epsilon=eps, lo=lo, hi=hi, cells=CELLS, quantile=q, rng=seeded(run)
            )
            candidates[f"private q={q:g} eps={eps:g}"] = np.array(released.bounds)
    learner = make_vector_learner("halfspaces")
    out = {}
    for key, bounds in candidates.items():
        model = learner.fit(
            X[first:train], y[first:train], epsilon=EPSILON, bounds=bounds, rng=seeded(100 + run)
        ).model
        accuracy = float(np.mean(np.asarray(model.predict(X[train:])) == y[train:]))
        out[key] = (accuracy, clipped_share(X[train:], bounds), first)
    return out


def measure(name: str, runs: int) -> dict[str, Any]:
    per_run = [one_run(name, run) for run in range(runs)]
    progress(f"{name}: {runs} runs")
    keys = list(per_run[0])
    accuracy = {k: float(np.mean([r[k][0] for r in per_run])) for k in keys}
    return {
        "first_window_rows": per_run[0]["data"][2],
        "accuracy": {k: round(v, 4) for k, v in accuracy.items()},
        "ratio_to_data_bounds": {k: round(v / accuracy["data"], 3) for k, v in accuracy.items()},
        "clipped_share": {k: round(float(np.mean([r[k][1] for r in per_run])), 4) for k in keys},
        "accuracy_per_run": {k: [round(r[k][0], 4) for r in per_run] for k in keys},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--datasets", default="all", help="comma-separated, or all")
    args = parser.parse_args(argv)
    names = DATASETS if args.datasets == "all" else tuple(args.datasets.split(","))
    result = {
        "epsilon": EPSILON,
        "learner": "halfspaces",
        "cells": CELLS,
        "runs": args.runs,
        "datasets": {name: measure(name, args.runs) for name in names},
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
