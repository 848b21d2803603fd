"""The default online learner's speed on real streams, beside the weighted majority and River.

Run:  .venv/bin/pip install -e '.[bench]'
      .venv/bin/python benchmarks/bench_online_default.py [--datasets shuttle,randhie,fair,bananas]
                                                          [--batch 1000] [--repeat 4]
Prints one JSON object on stdout (progress on stderr).

For each real data set of ``bench_real_data`` (bundled in the packages, shuffled with
``numpy.random.default_rng(0)``), examples per second of progressive validation (predict, then
learn) through ``learn_many`` in batches of ``--batch`` examples, as the service's ingest hands
them over:

* ``default``: the service's default (``auto``, :mod:`privstream.learning.online.block_vote`);
* ``weighted_majority``: the weighted majority of five sequential learners
  (:mod:`privstream.learning.online.weighted_majority`);
* ``river_scaled_logistic``: River's ``StandardScaler() | LogisticRegression()``, one example at a
  time (River has no batch path for it), on the features scaled to [0, 1] by the bounds.

``long_stream``: the data set repeated ``--repeat`` times in fresh shuffled orders (a stream long
enough for the default's blocks to reach their full length), the default and the weighted majority
only. The ratios (``default / weighted_majority``, ``default / river_scaled_logistic``) compare
rates measured in the same run on the same machine; each rate is the best of three timings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_real_data import load, unit

from privstream.learning.online import DEFAULT_ONLINE_LEARNER, make_online_learner, resolve_online_learner


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def best_rate(run: Callable[[], int]) -> float:
    """Examples per second: the best of three timings of ``run`` (which returns its example count)."""
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        n = run()
        rates.append(n / (time.perf_counter() - started))
    return max(rates)


def privstream_rate(name: str, X: np.ndarray, y: np.ndarray, bounds: np.ndarray, batch: int) -> float:
    def run() -> int:
        learner = make_online_learner(name, bounds)
        for start in range(0, len(y), batch):
            learner.learn_many(X[start : start + batch], y[start : start + batch])
        return len(y)

    return best_rate(run)


def river_rate(X: np.ndarray, y: np.ndarray, bounds: np.ndarray) -> float:
    from river import linear_model, preprocessing

    rows = [dict(enumerate(r)) for r in unit(X, bounds).tolist()]
    labels = [bool(v) for v in y]

    def run() -> int:
        model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
        for x, label in zip(rows, labels, strict=True):
            model.predict_one(x)
            model.learn_one(x, label)
        return len(rows)

    return best_rate(run)


def measure(name: str, batch: int, repeat: int) -> dict[str, Any]:
    X0, y0, bounds, _ = load(name)
    order = np.random.default_rng(0).permutation(len(y0))
    X, y = X0[order], y0[order]
    rates = {
        "default": privstream_rate(DEFAULT_ONLINE_LEARNER, X, y, bounds, batch),
        "weighted_majority": privstream_rate("weighted-majority", X, y, bounds, batch),
        "river_scaled_logistic": river_rate(X, y, bounds),
    }
    orders = [np.random.default_rng(k).permutation(len(y0)) for k in range(repeat)]
    LX, Ly = np.vstack([X0[o] for o in orders]), np.concatenate([y0[o] for o in orders])
    long_rates = {
        "default": privstream_rate(DEFAULT_ONLINE_LEARNER, LX, Ly, bounds, batch),
        "weighted_majority": privstream_rate("weighted-majority", LX[:20_000], Ly[:20_000], bounds, batch),
    }
    progress(f"{name}: done")
    return {
        "examples": len(y),
        "d": int(X.shape[1]),
        "default": resolve_online_learner(DEFAULT_ONLINE_LEARNER, int(X.shape[1])),
        "examples_per_second": {k: round(v) for k, v in rates.items()},
        "default_over_weighted_majority": round(rates["default"] / rates["weighted_majority"], 2),
        "default_over_river_scaled_logistic": round(rates["default"] / rates["river_scaled_logistic"], 2),
        "long_stream": {
            "examples": len(Ly),
            "examples_per_second": {k: round(v) for k, v in long_rates.items()},
            "default_over_weighted_majority": round(
                long_rates["default"] / long_rates["weighted_majority"], 2
            ),
            "weighted_majority_timed_on": 20_000,
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="shuttle,randhie,fair,bananas")
    parser.add_argument("--batch", type=int, default=1000, help="examples per learn_many call")
    parser.add_argument("--repeat", type=int, default=4, help="orders concatenated into the long stream")
    args = parser.parse_args(argv)
    out = {
        "benchmark": "bench_online_default",
        "batch": args.batch,
        "datasets": {name: measure(name, args.batch, args.repeat) for name in args.datasets.split(",")},
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
