"""Online learners on feature vectors: mistakes against the Perceptron's bound, and the batch path's speed.

Run:  .venv/bin/python benchmarks/bench_online_vectors.py [--examples 100000] [--seed 0]
Prints one JSON object per (stream, learner), then a summary object.

Streams (features uniform in their public bounds, labelled by a random halfspace):

* ``separable``: only points at least γ from the hyperplane (features scaled to [-1, 1], a constant 1
  appended): separable with margin γ, so the Perceptron makes at most ⌊(d + 1)/γ²⌋ mistakes;
* ``noisy``: every point, 10% of the labels flipped: no halfspace separates it, and the margin
  test must say so once the Perceptron's mistakes pass the bound.

For each learner: its mistakes (and the share of the stream), the bound and the margin test's
verdict, and examples per second for ``learn_many`` on the whole stream against ``learn_one`` in a
loop (the same predictions: the benchmark checks it), with their ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from privstream.learning.online import ONLINE_LEARNERS, make_online_learner
from privstream.learning.parameters import declared
from privstream.stream_app.sources.synthetic import synthetic_vectors

MARGIN = 0.05
CASES = [(2, "separable"), (9, "separable"), (64, "separable"), (2, "noisy"), (9, "noisy"), (64, "noisy")]


def learner(name: str, bounds: np.ndarray) -> object:
    # the margin γ where the learner takes one (the scaled learners and the logistic take none)
    params = {"margin": MARGIN} if "margin" in declared(ONLINE_LEARNERS[name]) else {}
    return make_online_learner(name, bounds.tolist(), **params)


def run(d: int, kind: str, n: int, seed: int) -> list[dict]:
    stream = synthetic_vectors(
        d,
        n,
        label_noise=0.1 if kind == "noisy" else 0.0,
        seed=seed,
        margin=MARGIN if kind == "separable" else None,
    )
    X, y = stream.X, stream.ys
    out = []
    for name in sorted(ONLINE_LEARNERS):
        batch = learner(name, stream.bounds)
        started = time.perf_counter()
        predictions = batch.learn_many(X, y)
        many_seconds = time.perf_counter() - started
        loop_n = min(n, 20_000)  # one at a time is slow: timed on a prefix
        single = learner(name, stream.bounds)
        started = time.perf_counter()
        singles = [single.learn_one(x, int(label)) for x, label in zip(X[:loop_n], y[:loop_n], strict=True)]
        one_seconds = time.perf_counter() - started
        reference = learner(name, stream.bounds)
        assert singles == reference.learn_many(X[:loop_n], y[:loop_n]).tolist()  # the same predictions
        assert predictions.tolist()[:loop_n] == singles
        result = {
            "stream": kind,
            "d": d,
            "examples": n,
            "learner": name,
            "margin": MARGIN,
            "mistakes": batch.mistakes,
            "error_rate": round(batch.mistakes / n, 4),
            "mistake_bound": batch.mistake_bound,
            "margin_mistakes": batch.margin_mistakes,
            "margin_bound": batch.margin_bound,
            "realizable": batch.realizable,
            "learn_many_per_second": round(n / many_seconds),
            "learn_one_per_second": round(loop_n / one_seconds),
            "batch_over_one_at_a_time": round((n / many_seconds) / (loop_n / one_seconds), 1),
        }
        print(json.dumps(result), flush=True)
        out.append(result)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = [r for d, kind in CASES for r in run(d, kind, args.examples, args.seed + d)]
    separable = [r for r in results if r["stream"] == "separable" and r["margin_bound"] is not None]
    noisy = [r for r in results if r["stream"] == "noisy" and r["margin_bound"] is not None]
    summary = {
        "summary": True,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "separable_within_bound": all(r["margin_mistakes"] <= r["margin_bound"] for r in separable),
        "noisy_reported": {f"{r['learner']}:d={r['d']}": r["realizable"] is False for r in noisy},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
