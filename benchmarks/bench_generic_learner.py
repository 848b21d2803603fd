"""The generic private learner vs non-private ERM vs the peer (diffprivlib LogisticRegression).

Run:  .venv/bin/python benchmarks/bench_generic_learner.py [--runs 20] [--seed 0] [--out benchmarks/results]
Prints one JSON object (also written to OUT/bench_generic_learner.json) and writes the plot
OUT/bench_generic_learner.png. ``benchmarks/results/`` is gitignored.

Needs, for the benchmark only (NOT runtime dependencies of privstream):
    .venv/bin/pip install matplotlib "scikit-learn<1.6" diffprivlib
(diffprivlib 0.6.6 does not import with scikit-learn >= 1.6.)
Without them the peer columns are null and no plot is written.

Experiments (errors are exact population errors unless stated: the synthetic marginal is uniform
on the domain, so err_D(h) is the fraction of domain points where h and the target differ):

* ``synthetic``: realizable data on ``thresholds:2^20`` (target ``1[x >= 0.3N]``) and
  ``intervals:2^20`` (target ``[0.3N, 0.55N)``), x uniform. Error against n at ε = 1, and against
  ε ∈ {0.1, 0.5, 1, 2} at n = 1000, mean over ``--runs`` fresh samples:
  - ``generic``: the ε-DP generic learner (exact exponential mechanism over the class);
  - ``erm``: non-private ERM (a uniformly random empirical risk minimiser in the class);
  - ``peer``: diffprivlib ``LogisticRegression(epsilon=ε, data_norm=1)`` on x/(N-1) ∈ [0, 1]; the
    bound is the public domain, never derived from the data. A 1-D linear classifier can
    represent thresholds but not intervals (its intervals error is mostly misspecification).
* ``breast_cancer``: scikit-learn's bundled Wisconsin diagnostic data (569 tumours), feature
  ``mean radius`` quantised to 2^16 levels over the PUBLIC range [0, 30] (clipped), label 1 =
  malignant; a random 70/30 split per run. Not realizable: we report test error and the excess
  over the best threshold on the test split (computed exactly), for generic on
  ``thresholds:65536``, ERM and the peer, at ε ∈ {0.1, 0.5, 1, 2}.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass, parse_class_spec
from privstream.learning.private_learners import GenericLearner, error_levels
from privstream.learning.randomness import seeded

N_SYNTH = 2**20
NS = (30, 100, 300, 1000, 3000)
EPSILONS = (0.1, 0.5, 1.0, 2.0)
TARGETS = {  # the target is 1[lo <= x < hi]
    "thresholds": (int(0.3 * N_SYNTH), N_SYNTH),
    "intervals": (int(0.3 * N_SYNTH), int(0.55 * N_SYNTH)),
}
RADIUS_RANGE = (0.0, 30.0)  # public bounds of "mean radius" (in mm); not derived from the data
RADIUS_LEVELS = 2**16


def erm(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, rng: Any) -> Hypothesis:
    """Non-private ERM: a uniformly random hypothesis of least empirical error (exact, via the blocks)."""
    levels = error_levels(hclass, xs, ys)
    best, count = levels.nonempty()[0]
    return levels.member(best, rng.uniform_int(count))


def peer_fit(xs01: np.ndarray, ys: np.ndarray, epsilon: float, seed: int) -> Any:
    """diffprivlib's ε-DP logistic regression on one feature in [0, 1] (public bound data_norm=1)."""
    from diffprivlib.models import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its convergence/PrivacyLeakWarning chatter
        return LogisticRegression(epsilon=epsilon, data_norm=1.0, random_state=seed).fit(
            xs01.reshape(-1, 1), ys
        )


def peer_available() -> bool:
    try:
        import diffprivlib.models  # noqa: F401
    except Exception:  # ImportError, or diffprivlib's own import failure with a new scikit-learn
        return False
    return True


def summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "sd": statistics.pstdev(values),
    }


# -- synthetic --------------------------------------------------------------------------------


def synthetic_point(kind: str, n: int, eps: float, runs: int, seed: int, with_peer: bool) -> dict[str, Any]:
    hclass = parse_class_spec(f"{kind}:{N_SYNTH}")
    lo, hi = TARGETS[kind]
    grid = np.arange(N_SYNTH, dtype=np.int64)
    truth = (grid >= lo) & (grid < hi)
    grid01 = (grid / (N_SYNTH - 1)).reshape(-1, 1)
    data_rng = np.random.default_rng([seed, n, int(eps * 1000), len(kind)])
    rng = seeded(seed * 1_000_003 + n)  # seeded: reproducible benchmark, not a private release
    learner = GenericLearner()
    errs: dict[str, list[float]] = {"generic": [], "erm": [], "peer": []}
    fit_seconds = []
    for run in range(runs):
        xs = data_rng.integers(0, N_SYNTH, size=n)
        ys = truth[xs].astype(np.uint8)
        t0 = time.perf_counter()
        h = learner.fit(hclass, xs, ys, epsilon=eps, rng=rng).hypothesis
        fit_seconds.append(time.perf_counter() - t0)
        errs["generic"].append(float(np.mean(h.truth_table() != truth)))
        errs["erm"].append(float(np.mean(erm(hclass, xs, ys, rng).truth_table() != truth)))
        if with_peer:
            clf = peer_fit(xs / (N_SYNTH - 1), ys, eps, seed=run + 7919 * n)
            errs["peer"].append(float(np.mean(clf.predict(grid01).astype(bool) != truth)))
    out: dict[str, Any] = {
        "class": hclass.spec,
        "n": n,
        "epsilon": eps,
        "runs": runs,
        "generic_fit_seconds_median": statistics.median(fit_seconds),
    }
    for name, values in errs.items():
        out[name] = summary(values) if values else None
    return out


# -- real data --------------------------------------------------------------------------------


def breast_cancer(runs: int, seed: int, with_peer: bool) -> dict[str, Any] | None:
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError:
        return None
    data = load_breast_cancer()
    col = list(data.feature_names).index("mean radius")
    radius = data.data[:, col]
    lo, hi = RADIUS_RANGE
    q = np.clip(np.floor((radius - lo) / (hi - lo) * RADIUS_LEVELS), 0, RADIUS_LEVELS - 1).astype(np.int64)
    malignant = (data.target == 0).astype(np.uint8)  # sklearn: 0 = malignant, 1 = benign
    hclass = parse_class_spec(f"thresholds:{RADIUS_LEVELS}")
    learner = GenericLearner()
    split_rng = np.random.default_rng(seed)
    results = []
    for eps in EPSILONS:
        rng = seeded(seed + int(eps * 1000))
        rows: dict[str, list[float]] = {"generic": [], "erm": [], "peer": [], "best_threshold": []}
        for run in range(runs):
            order = split_rng.permutation(q.shape[0])
            cut = int(0.7 * q.shape[0])
            train, test = order[:cut], order[cut:]
            xt, yt, xv, yv = q[train], malignant[train], q[test], malignant[test]
            rows["generic"].append(
                float(np.mean(learner.fit(hclass, xt, yt, epsilon=eps, rng=rng).hypothesis.predict(xv) != yv))
            )
            rows["erm"].append(float(np.mean(erm(hclass, xt, yt, rng).predict(xv) != yv)))
            # Best threshold in hindsight on the test split: its least error count, exactly.
            rows["best_threshold"].append(error_levels(hclass, xv, yv).nonempty()[0][0] / xv.shape[0])
            if with_peer:
                clf = peer_fit(xt / (RADIUS_LEVELS - 1), yt, eps, seed=run)
                pred = clf.predict((xv / (RADIUS_LEVELS - 1)).reshape(-1, 1))
                rows["peer"].append(float(np.mean(pred != yv)))
        best = rows["best_threshold"]
        entry: dict[str, Any] = {
            "epsilon": eps,
            "runs": runs,
            "n_train": cut,
            "n_test": int(q.shape[0]) - cut,
            "best_threshold_test_error": summary(best),
        }
        for name in ("generic", "erm", "peer"):
            if rows[name]:
                entry[name] = summary(rows[name])
                entry[f"{name}_excess"] = summary([e - b for e, b in zip(rows[name], best, strict=True)])
            else:
                entry[name] = entry[f"{name}_excess"] = None
        results.append(entry)
    return {
        "dataset": "sklearn breast_cancer (Wisconsin diagnostic)",
        "feature": "mean radius",
        "quantisation": {"public_range": list(RADIUS_RANGE), "levels": RADIUS_LEVELS},
        "label": "1 = malignant",
        "class": hclass.spec,
        "results": results,
    }


# -- plot -------------------------------------------------------------------------------------


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    styles: dict[str, tuple[str, str]] = {
        "generic": ("C0", "generic (ε-DP EM)"),
        "erm": ("C2", "ERM (non-private)"),
        "peer": ("C3", "diffprivlib LogReg (ε-DP)"),
    }
    for kind, ls in (("thresholds", "-"), ("intervals", "--")):
        for key, ax, xkey in (("by_n", axes[0], "n"), ("by_epsilon", axes[1], "epsilon")):
            rows = report["synthetic"][kind][key]
            for name, (colour, label) in styles.items():
                ys = [r[name]["mean"] if r[name] else None for r in rows]
                if any(y is None for y in ys):
                    continue
                ax.plot(
                    [r[xkey] for r in rows],
                    [max(y, 1e-6) for y in ys],
                    ls,
                    color=colour,
                    marker="o",
                    label=f"{label}, {kind}",
                )
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="n (ε = 1)",
        ylabel="population error",
        title="realizable, domain 2^20: error vs n",
    )
    axes[1].set(
        xscale="log", yscale="log", xlabel="ε (n = 1000)", ylabel="population error", title="error vs ε"
    )
    axes[0].legend(fontsize=7)
    bc = report.get("breast_cancer")
    if bc:
        rows = bc["results"]
        eps = [r["epsilon"] for r in rows]
        for name, (colour, label) in styles.items():
            if rows[0][name] is not None:
                axes[2].plot(eps, [r[name]["mean"] for r in rows], color=colour, marker="o", label=label)
        best = [r["best_threshold_test_error"]["mean"] for r in rows]
        axes[2].plot(eps, best, "k:", label="best threshold (hindsight)")
        axes[2].set(
            xscale="log",
            xlabel="ε",
            ylabel="test error",
            title=f"breast cancer, mean radius (n_train = {rows[0]['n_train']})",
        )
        axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per point (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    with_peer = peer_available()
    started = time.perf_counter()
    synthetic: dict[str, Any] = {}
    for kind in ("thresholds", "intervals"):
        synthetic[kind] = {
            "target": list(TARGETS[kind]),
            "by_n": [synthetic_point(kind, n, 1.0, args.runs, args.seed, with_peer) for n in NS],
            "by_epsilon": [synthetic_point(kind, 1000, e, args.runs, args.seed, with_peer) for e in EPSILONS],
        }
    at_1000 = next(r for r in synthetic["thresholds"]["by_n"] if r["n"] == 1000)

    def ratio(stat: str) -> float | None:
        peer, generic = at_1000["peer"], at_1000["generic"]
        return peer[stat] / generic[stat] if peer and generic[stat] > 0 else None

    report: dict[str, Any] = {
        "benchmark": "generic private learner vs ERM vs diffprivlib LogisticRegression",
        "peer": "diffprivlib LogisticRegression(epsilon, data_norm=1)" if with_peer else None,
        "synthetic": synthetic,
        "breast_cancer": breast_cancer(args.runs, args.seed, with_peer),
        "headline": {
            "thresholds_2^20_n1000_eps1": {
                "generic_error": at_1000["generic"],
                "erm_error": at_1000["erm"],
                "peer_error": at_1000["peer"],
                "peer_over_generic_mean": ratio("mean"),
                "peer_over_generic_median": ratio("median"),
            },
        },
        "seconds": None,
        "machine": {"python": platform.python_version(), "numpy": np.__version__},
        "command": f"benchmarks/bench_generic_learner.py --runs {args.runs} --seed {args.seed}",
    }
    report["seconds"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_generic_learner.json").write_text(json.dumps(report, indent=1) + "\n")
    report["plot"] = (
        str(args.out / "bench_generic_learner.png")
        if plot(report, args.out / "bench_generic_learner.png")
        else None
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
