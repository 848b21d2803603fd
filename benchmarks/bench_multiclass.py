"""Multi-class labels on real data sets: the online multi-class Perceptron, and the private
one-vs-rest release beside diffprivlib's and non-private logistic regression.

Run:  .venv/bin/pip install -e '.[bench]'
      .venv/bin/python benchmarks/bench_multiclass.py [--runs 3]
Prints one JSON object on stdout (progress on stderr).

Data (bundled in scikit-learn): ``iris`` (K = 3, d = 4), ``wine`` (K = 3, d = 13), ``digits``
(K = 10, d = 64). Public bounds as in ``bench_real_data`` (digits' pixel range [0, 16]; otherwise
each feature's min and max over the whole set).

* ``online``: :class:`~privstream.learning.online.multiclass.MulticlassPerceptron` (margin 0.1),
  progressive validation over the whole set in orders ``numpy.random.default_rng(k).permutation``;
* ``private`` (80/20 stratified splits, seed = run), test accuracy at ε ∈ {0.1, 1}:
  ``one_vs_rest`` (:class:`~privstream.learning.private_learners.one_vs_rest.OneVsRestLearner`,
  what a stream of K classes releases with: K halfspaces at ε/K, pure ε-DP), diffprivlib 0.6's
  ``LogisticRegression(epsilon, data_norm=sqrt(d))`` on the [0, 1]-scaled features (its
  multi-class fit, pure ε-DP), and scikit-learn's ``LogisticRegression`` (not private) on the same
  features.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any

import numpy as np

from privstream.learning.online.multiclass import MulticlassPerceptron
from privstream.learning.private_learners.one_vs_rest import OneVsRestLearner
from privstream.learning.randomness import seeded

EPSILONS = (0.1, 1.0)


def load(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from sklearn import datasets as sk

    data = {"iris": sk.load_iris, "wine": sk.load_wine, "digits": sk.load_digits}[name]()
    X, y = data.data.astype(np.float64), data.target.astype(np.int64)
    if name == "digits":
        return X, y, np.array([[0.0, 16.0]] * X.shape[1])
    lo, hi = X.min(axis=0), X.max(axis=0)
    return X, y, np.stack((lo, np.where(hi > lo, hi, lo + 1)), axis=1)


def unit(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    return np.clip((X - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0]), 0.0, 1.0)


def measure(name: str, runs: int) -> dict[str, Any]:
    import diffprivlib.models as dp
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y, bounds = load(name)
    K = int(y.max()) + 1
    online = []
    for k in range(5):
        order = np.random.default_rng(k).permutation(len(y))
        learner = MulticlassPerceptron(bounds, classes=K, margin=0.1)
        online.append(round(float(np.mean(learner.learn_many(X[order], y[order]) == y[order])), 4))
    acc: dict[str, list[float]] = {}
    for run in range(runs):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=run, stratify=y)
        lr = LogisticRegression(max_iter=10_000).fit(unit(Xtr, bounds), ytr)
        acc.setdefault("logistic_regression", []).append(float(np.mean(lr.predict(unit(Xte, bounds)) == yte)))
        for eps in EPSILONS:
            model = (
                OneVsRestLearner(K)
                .fit(Xtr, ytr, epsilon=eps, bounds=bounds, rng=seeded(1000 * run + 7))
                .model
            )
            acc.setdefault(f"one_vs_rest@{eps:g}", []).append(float(np.mean(model.predict(Xte) == yte)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                peer = dp.LogisticRegression(epsilon=eps, data_norm=math.sqrt(X.shape[1]), random_state=run)
                peer.fit(unit(Xtr, bounds), ytr)
            key = f"diffprivlib_logistic_regression@{eps:g}"
            acc.setdefault(key, []).append(float(np.mean(peer.predict(unit(Xte, bounds)) == yte)))
        print(f"{name}: run {run + 1} of {runs}", file=sys.stderr, flush=True)
    return {
        "classes": K,
        "n": len(y),
        "d": int(X.shape[1]),
        "online_multiclass_perceptron": online,
        "accuracy": {k: round(float(np.mean(v)), 4) for k, v in acc.items()},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    out = {
        "benchmark": "bench_multiclass",
        "runs": args.runs,
        **{n: measure(n, args.runs) for n in ("iris", "wine", "digits")},
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
