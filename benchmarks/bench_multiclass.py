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
  multi-class fit, pure ε-DP), ``softmax`` (a multinomial private learner: :func:`softmax_release`,
  one K-class fit at the whole ε) and scikit-learn's ``LogisticRegression`` (not private) on the same
  features.

The multinomial candidate is output perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Alg. 1)
of L2-regularised softmax regression, ``F(W) = Σ_i ℓ(W; z_i, y_i) + (Λ/2)|W|²`` on ``z = (u - 1/2,
1)`` (``u`` the [0, 1]-scaled features, ``|z| <= R = sqrt(d/4 + 1)``). The cross-entropy's gradient
``(p - e_y) z^T`` has norm at most ``L = √2·R``, so replacing one row moves the minimiser of the
Λ-strongly convex ``F`` by at most ``2L/Λ`` (the optimiser is run until ``|∇F| <= 10⁻³·L``, adding
``2·10⁻³·L/Λ``); noise of density ``∝ exp(-ε|b|/Δ)`` on the ``K(d + 1)`` weights (a Gamma norm, a
uniform direction) makes it ε-DP. ``Λ = 100·n`` (n public, the training rows): the noise and the
weights both scale as ``1/Λ``, and from about ``Λ = 10·n`` on the accuracy no longer changes (a
sweep of ``Λ`` from 1 to 10⁵ on these sets). Floating-point noise, a candidate measured here, not a
mechanism the service releases with.
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


def softmax_release(U: np.ndarray, y: np.ndarray, K: int, epsilon: float, seed: int) -> np.ndarray:
    """The ``K × (d + 1)`` weights of the multinomial candidate (module docstring), ε-DP under
    replace-one with ``n = len(y)`` public; predict ``argmax_k ⟨W_k, (u - 1/2, 1)⟩``."""
    from scipy.optimize import minimize

    n, d = U.shape
    Z = np.hstack((U - 0.5, np.ones((n, 1))))
    lipschitz = math.sqrt(2) * math.sqrt(d / 4 + 1)
    lam, tol = 100.0 * n, 1e-3 * lipschitz
    onehot = np.eye(K)[y]

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        W = w.reshape(K, d + 1)
        S = Z @ W.T
        S -= S.max(axis=1, keepdims=True)
        logp = S - np.log(np.exp(S).sum(axis=1, keepdims=True))
        grad = (np.exp(logp) - onehot).T @ Z + lam * W
        return float(-logp[np.arange(n), y].sum() + lam / 2 * (w @ w)), grad.ravel()

    w = minimize(objective, np.zeros(K * (d + 1)), jac=True, method="L-BFGS-B", options={"gtol": 1e-12}).x
    if np.linalg.norm(objective(w)[1]) > tol:  # |w - w*| <= |∇F(w)|/Λ: the slack in Δ must hold
        raise RuntimeError("softmax: the optimiser stopped short of the tolerance the noise covers")
    sensitivity = 2 * (lipschitz + tol) / lam
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=w.size)
    noise = direction / np.linalg.norm(direction) * rng.gamma(w.size, sensitivity / epsilon)
    out: np.ndarray = (w + noise).reshape(K, d + 1)
    return out


def softmax_predict(W: np.ndarray, U: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.argmax(np.hstack((U - 0.5, np.ones((len(U), 1)))) @ W.T, axis=1)
    return out


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
            W = softmax_release(unit(Xtr, bounds), ytr, K, eps, seed=1000 * run + 7)
            acc.setdefault(f"softmax@{eps:g}", []).append(
                float(np.mean(softmax_predict(W, unit(Xte, bounds)) == yte))
            )
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
