"""The DP Bayes-consistent learner (PCL) against a non-private histogram rule and diffprivlib's peers.

Run:  .venv/bin/python benchmarks/bench_consistent.py [--runs 5] [--seed 0] [--out benchmarks/results]
Prints one JSON object (also written to OUT/bench_consistent.json) and writes OUT/bench_consistent.png.
``benchmarks/results/`` is gitignored.

Needs, for the benchmark only (NOT runtime dependencies of privstream):
    .venv/bin/pip install diffprivlib "scikit-learn<1.6" river matplotlib
(diffprivlib 0.6.6 does not import with scikit-learn >= 1.6; River ships the Phishing data set.)

Methods (same data, same ε, same public bounds):
* ``pcl``: the ε-DP bayes-consistent learner (paper schedule K = ⌈n^{1/(2d)}⌉ cubes per axis). When
  K^d exceeds the release limit (high-dimensional real data) the benchmark predicts with the
  trusted-zone :class:`CellLabels` (the same ε-DP table, evaluated lazily; not publishable).
* ``histogram``: the classical non-private histogram rule on the same grid (the ε → ∞ reference).
* ``dp_gnb`` / ``dp_logreg``: diffprivlib ``GaussianNB(epsilon, bounds)`` and
  ``LogisticRegression(epsilon, data_norm)``, with the bounds / norm computed from the PUBLIC box.
* real data also: ``logreg`` (non-private scikit-learn logistic regression) and ``semi_supervised``
  (the (ε, δ = n^-2)-DP stump learner with half of the training labels hidden).

Experiments:
* ``synthetic``: excess risk against n ∈ {10^3, 10^4, 10^5} and ε ∈ {0.1, 0.5, 1, 2}, mean over
  ``--runs`` samples, on F1 (x ~ U[0,1], η(x) = x, L* = 1/4), F4 (U[0,1]^2, η = 0.9 in the disk of
  radius 0.3 at the centre, 0.2 outside, L* = 0.1717: a boundary no linear rule fits) and F5 (two
  unit Gaussians at (±1, 0), L* = Φ(-1), public box [-4, 4]^2 with clipping). Excess risk is
  computed for every method by the identity err - L* = E_x[|2η(x) - 1| 1[h(x) != h*(x)]]
  (the consistency theorems' population error): on a 10^5-point quadrature grid for F1, a 500²
  grid for F4, and by Monte Carlo over 2·10^5 fixed x for F5.
* ``real``: test error against ε ∈ {0.1, 0.5, 1, 2, 5, 10} on a random 70/30 split per run, for
  scikit-learn's breast-cancer (569 × 30), wine as a binary task (class 0 vs the rest, 178 × 13)
  and River's Phishing (1250 × 9, features already in [0, 1]). Public bounds: the feature ranges
  published with each data set (the DESCR summary statistics of scikit-learn, which are the
  full-data min/max; [0, 1] for Phishing), taken as given rather than computed per split; every
  method sees the features scaled to [0, 1]^d by them (so diffprivlib's data_norm is √d).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.consistent.pcl import (
    DEFAULT_MAX_CELLS,
    BayesConsistentLearner,
    histogram_rule,
    pcl_fit,
)
from privstream.learning.consistent.semisupervised import SemiSupervisedLearner
from privstream.learning.randomness import seeded

F5_BOUNDS = np.array([[-4.0, 4.0], [-4.0, 4.0]])
PHI_M1 = 0.5 * math.erfc(1 / math.sqrt(2))
BAYES = {"F1": 0.25, "F4": 0.2 - 0.1 * math.pi * 0.09, "F5": PHI_M1}
SYN_EPS = (0.1, 0.5, 1.0, 2.0)
SYN_N = (10**3, 10**4, 10**5)
REAL_EPS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)


# -- synthetic distributions ------------------------------------------------------------------


def _f1(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = gen.random(n)
    return x[:, None], (gen.random(n) < x).astype(np.uint8)


def _f5(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = (gen.random(n) < 0.5).astype(np.uint8)
    x = gen.standard_normal((n, 2))
    x[:, 0] += 2.0 * y - 1.0
    return x, y


def _f4(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = gen.random((n, 2))
    inside = np.sum((x - 0.5) ** 2, axis=1) < 0.09
    return x, (gen.random(n) < np.where(inside, 0.9, 0.2)).astype(np.uint8)


def _f4_points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quadrature: midpoints of a 500 × 500 grid of [0,1]^2; |2η - 1| is 0.8 in the disk, 0.6 outside."""
    g = (np.arange(500) + 0.5) / 500
    x = np.array(np.meshgrid(g, g)).reshape(2, -1).T
    inside = np.sum((x - 0.5) ** 2, axis=1) < 0.09
    return x, np.where(inside, 0.8, 0.6) / x.shape[0], inside.astype(np.uint8)


def _f1_points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quadrature: midpoints of 10^5 equal cells of [0, 1], weight |2η - 1|/10^5, Bayes labels."""
    x = (np.arange(100_000) + 0.5) / 100_000
    return x[:, None], np.abs(2 * x - 1) / 100_000, (x > 0.5).astype(np.uint8)


def _f5_points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Monte Carlo: 2·10^5 x from the F5 marginal, weight |2η - 1|/m with η = 1/(1 + e^{-2x1})."""
    x, _ = _f5(np.random.default_rng(12345), 200_000)
    eta = 1 / (1 + np.exp(-2 * x[:, 0]))
    return x, np.abs(2 * eta - 1) / x.shape[0], (x[:, 0] > 0).astype(np.uint8)


def _excess(predict: Any, points: tuple[np.ndarray, np.ndarray, np.ndarray]) -> float:
    x, weight, bayes = points
    return float(np.sum(weight[predict(x) != bayes]))


# -- the peers ----------------------------------------------------------------------------------


def _peers_available() -> bool:
    try:
        import diffprivlib  # noqa: F401
        import sklearn  # noqa: F401
    except Exception:  # ImportError, or diffprivlib failing against a newer scikit-learn
        return False
    return True


def _dp_gnb(X: np.ndarray, y: np.ndarray, eps: float, bounds: np.ndarray, seed: int) -> Any:
    from diffprivlib.models import GaussianNB

    model = GaussianNB(epsilon=eps, bounds=(bounds[:, 0], bounds[:, 1]), random_state=seed)
    model.fit(X, y)
    return lambda Z: model.predict(np.clip(Z, bounds[:, 0], bounds[:, 1])).astype(np.uint8)


def _dp_logreg(X: np.ndarray, y: np.ndarray, eps: float, bounds: np.ndarray, seed: int) -> Any:
    from diffprivlib.models import LogisticRegression

    norm = float(np.sqrt(np.sum(np.max(np.abs(bounds), axis=1) ** 2)))  # public: from the box
    model = LogisticRegression(epsilon=eps, data_norm=norm, random_state=seed)
    model.fit(np.clip(X, bounds[:, 0], bounds[:, 1]), y)
    return lambda Z: model.predict(np.clip(Z, bounds[:, 0], bounds[:, 1])).astype(np.uint8)


def _logreg(X: np.ndarray, y: np.ndarray) -> Any:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=2000).fit(X, y)
    return lambda Z: model.predict(Z).astype(np.uint8)


def _pcl_predictor(
    X: np.ndarray, y: np.ndarray, eps: float, bounds: np.ndarray, seed: int
) -> tuple[Any, str]:
    """The released model if K^d fits the release limit, else the trusted-zone lazy table."""
    try:
        res = BayesConsistentLearner().fit(X, y, epsilon=eps, bounds=bounds, rng=seeded(seed))
        return res.model.predict, "released"
    except ValueError:
        cells = pcl_fit(X, y, epsilon=eps, bounds=bounds, rng=seeded(seed))
        return cells.predict, "trusted-zone (K^d > release limit)"


# -- experiments ----------------------------------------------------------------------------------


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def synthetic(runs: int, seed: int, peers: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sample, points, bounds in (
        ("F1", _f1, _f1_points(), np.array([[0.0, 1.0]])),
        ("F4", _f4, _f4_points(), np.array([[0.0, 1.0], [0.0, 1.0]])),
        ("F5", _f5, _f5_points(), F5_BOUNDS),
    ):
        rows = []
        for n in SYN_N:
            hist = []
            for r in range(runs):
                X, y = sample(np.random.default_rng(seed + 1000 * r + n), n)
                hist.append(_excess(histogram_rule(X, y, bounds=bounds).predict, points))
            for eps in SYN_EPS:
                acc: dict[str, list[float]] = {"pcl": [], "dp_gnb": [], "dp_logreg": []}
                for r in range(runs):
                    X, y = sample(np.random.default_rng(seed + 1000 * r + n), n)
                    acc["pcl"].append(_excess(_pcl_predictor(X, y, eps, bounds, seed + r)[0], points))
                    if peers:
                        acc["dp_gnb"].append(_excess(_dp_gnb(X, y, eps, bounds, seed + r), points))
                        acc["dp_logreg"].append(_excess(_dp_logreg(X, y, eps, bounds, seed + r), points))
                row = {
                    "n": n,
                    "epsilon": eps,
                    "histogram": _mean(hist),
                    **{k: (_mean(v) if v else None) for k, v in acc.items()},
                }
                row["ratio_pcl_to_histogram"] = row["pcl"] / row["histogram"] if row["histogram"] else None
                for peer in ("dp_gnb", "dp_logreg"):
                    row[f"ratio_pcl_to_{peer}"] = row["pcl"] / row[peer] if row.get(peer) else None
                rows.append(row)
        out[name] = {"bayes_error": BAYES[name], "excess_risk": rows}
    return out


def _datasets() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    data: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    try:
        from sklearn.datasets import load_breast_cancer, load_wine
    except ImportError:
        return data
    bc = load_breast_cancer()
    # published ranges (DESCR summary statistics = full-data min/max), taken as public bounds
    data["breast_cancer"] = (
        bc.data,
        (bc.target == 0).astype(np.uint8),  # 1 = malignant
        np.column_stack((bc.data.min(axis=0), bc.data.max(axis=0))),
    )
    wine = load_wine()
    data["wine_class0"] = (
        wine.data,
        (wine.target == 0).astype(np.uint8),
        np.column_stack((wine.data.min(axis=0), wine.data.max(axis=0))),
    )
    try:
        from river.datasets import Phishing
    except ImportError:
        return data
    rows = list(Phishing())
    keys = sorted(rows[0][0])
    X = np.array([[float(x[k]) for k in keys] for x, _ in rows])
    y = np.array([int(label) for _, label in rows], dtype=np.uint8)
    data["phishing"] = (X, y, np.tile([0.0, 1.0], (X.shape[1], 1)))
    return data


def real(runs: int, seed: int, peers: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (X_raw, y, public) in _datasets().items():
        # every method sees the features scaled to [0, 1]^d by the public bounds
        X = np.clip((X_raw - public[:, 0]) / (public[:, 1] - public[:, 0]), 0.0, 1.0)
        n, d = X.shape
        bounds = np.tile([0.0, 1.0], (d, 1))
        rows = []
        base: dict[str, list[float]] = {"histogram": [], "logreg": []}
        splits = []
        for r in range(runs):
            perm = np.random.default_rng(seed + r).permutation(n)
            cut = int(0.7 * n)
            splits.append((perm[:cut], perm[cut:]))
        for tr, te in splits:
            base["histogram"].append(
                float(np.mean(histogram_rule(X[tr], y[tr], bounds=bounds).predict(X[te]) != y[te]))
                if _fits(len(tr), d)
                else float("nan")
            )
            if peers:
                base["logreg"].append(float(np.mean(_logreg(X[tr], y[tr])(X[te]) != y[te])))
        mode = ""
        for eps in REAL_EPS:
            acc: dict[str, list[float]] = {"pcl": [], "semi_supervised": [], "dp_gnb": [], "dp_logreg": []}
            for r, (tr, te) in enumerate(splits):
                predict, mode = _pcl_predictor(X[tr], y[tr], eps, bounds, seed + r)
                acc["pcl"].append(float(np.mean(predict(X[te]) != y[te])))
                y_semi = y[tr].astype(np.float64)
                y_semi[np.random.default_rng(seed + r).random(len(tr)) < 0.5] = np.nan
                ssl = SemiSupervisedLearner(n_semi=500).fit(
                    X[tr], y_semi, epsilon=eps, delta=len(tr) ** -2.0, bounds=bounds, rng=seeded(seed + r)
                )
                acc["semi_supervised"].append(float(np.mean(ssl.model.predict(X[te]) != y[te])))
                if peers:
                    for peer, fit in (("dp_gnb", _dp_gnb), ("dp_logreg", _dp_logreg)):
                        predict = fit(X[tr], y[tr], eps, bounds, seed + r)
                        acc[peer].append(float(np.mean(predict(X[te]) != y[te])))
            row = {"epsilon": eps, **{k: (_mean(v) if v else None) for k, v in acc.items()}}
            for peer in ("dp_gnb", "dp_logreg"):
                row[f"ratio_pcl_to_{peer}"] = row["pcl"] / row[peer] if row.get(peer) else None
            rows.append(row)
        k = math.ceil((0.7 * n) ** (1 / (2 * d)))
        out[name] = {
            "n": n,
            "d": d,
            "cells_per_axis": k,
            "cells": k**d,
            "pcl_predictions": mode,
            "majority_error": float(min(np.mean(y), 1 - np.mean(y))),
            "histogram_error": _mean(base["histogram"]) if _fits(int(0.7 * n), d) else None,
            "logreg_error": _mean(base["logreg"]) if base["logreg"] else None,
            "test_error": rows,
        }
    return out


def _fits(n: int, d: int) -> bool:
    return math.ceil(n ** (1 / (2 * d))) ** d <= DEFAULT_MAX_CELLS


def _plot(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    real_sets = list(result["real"])
    fig, axes = plt.subplots(1, 3 + len(real_sets), figsize=(4.5 * (3 + len(real_sets)), 4))
    for ax, name in zip(axes[:3], ("F1", "F4", "F5"), strict=True):
        rows = [r for r in result["synthetic"][name]["excess_risk"] if r["epsilon"] == 1.0]
        ns = [r["n"] for r in rows]
        for key in ("pcl", "histogram", "dp_gnb", "dp_logreg"):
            if rows[0].get(key) is not None:
                ax.loglog(ns, [max(r[key], 1e-6) for r in rows], marker="o", label=key)
        ax.set_title(f"{name}: excess risk vs n (eps = 1)")
        ax.set_xlabel("n")
        ax.legend()
    for ax, name in zip(axes[3:], real_sets, strict=True):
        rows = result["real"][name]["test_error"]
        eps = [r["epsilon"] for r in rows]
        for key in ("pcl", "semi_supervised", "dp_gnb", "dp_logreg"):
            if rows[0].get(key) is not None:
                ax.semilogx(eps, [r[key] for r in rows], marker="o", label=key)
        for key, style in (("logreg_error", ":"), ("histogram_error", "--")):
            if result["real"][name].get(key) is not None:
                ax.axhline(result["real"][name][key], linestyle=style, color="grey", label=key)
        ax.set_title(f"{name}: test error vs eps")
        ax.set_xlabel("epsilon")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # diffprivlib's PrivacyLeakWarning etc. (bounds are given)
    peers = _peers_available()
    start = time.time()
    result: dict[str, Any] = {
        "benchmark": "bench_consistent",
        "runs": args.runs,
        "seed": args.seed,
        "python": platform.python_version(),
        "peers_available": peers,
        "synthetic": synthetic(args.runs, args.seed, peers),
        "real": real(args.runs, args.seed, peers),
    }
    result["seconds"] = round(time.time() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_consistent.json").write_text(json.dumps(result, indent=1))
    png = out / "bench_consistent.png"
    result["plot"] = str(png) if _plot(result, png) else None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
