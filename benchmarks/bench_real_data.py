"""Private releases on real data sets shipped inside PyPI packages, beside the DP library's models.

Run:  .venv/bin/pip install -e '.[bench]'
      .venv/bin/python benchmarks/bench_real_data.py [--runs 5] [--datasets all] [--plot FILE.png]
                                                      [--table FILE.md]
Prints one JSON object on stdout (progress on stderr); ``--plot`` draws the accuracies at each ε,
``--table`` writes the Markdown table of ``docs/benchmarks/real-data.md``.

**Data** (bundled in the packages, nothing downloaded at run time): scikit-learn's
``load_iris`` (virginica or not, d = 4), ``load_wine`` (cultivar 0 or not, d = 13),
``load_breast_cancer`` (d = 30), ``load_digits`` (digit >= 5, d = 64); River's ``Bananas``
(d = 2), ``Phishing`` (d = 9), ``ImageSegments`` (brickface or not, d = 18) and ``Shuttle``
(anomaly or not, d = 9, 49,097 rows). Each run splits 80/20 (stratified, seed = run). The online
part also streams statsmodels' survey sets ``fair`` (any affair, d = 8, 6,366 rows), ``randhie``
(any outpatient visit, d = 9, 20,190 rows) and ``anes96`` (votes Dole, d = 10, 944 rows).

**Public bounds.** A private learner needs per-feature bounds that do not come from the private
rows. Here they stand in for a schema's documented ranges: the digits' pixel range [0, 16], and
for the others each feature's min and max over the whole data set (a feature that never varies
gets [lo, lo + 1]). Every private method gets the same bounds.

**Methods** at ε ∈ {0.1, 1}, test accuracy:

* ``majority``: the training set's majority label; ``logistic_regression``: scikit-learn's
  ``LogisticRegression`` (C = 1, not private) on the features scaled to [0, 1] by the bounds;
* every privstream vector learner (:data:`VECTOR_LEARNERS`) with its defaults: ``halfspaces``
  (pure ε-DP), ``bayes-consistent`` (pure ε-DP), ``kernel`` and ``semi-supervised`` (δ = 1e-6); a
  learner that refuses a configuration (``bayes-consistent`` needs K^d cubes, ``semi-supervised``
  a cover of the box) is reported with its reason;
* diffprivlib 0.6.6 (pure ε-DP): ``LogisticRegression(epsilon, data_norm=sqrt(d))`` on the
  same [0, 1]-scaled features (so the norm bound is public and exact: no budget is spent on it,
  and no row is clipped), and ``GaussianNB(epsilon, bounds=(lo, hi))`` on the raw features with
  the public bounds (no budget spent on bounds). Their defaults otherwise.

**Release tree** (``release_tree``): the training rows in the data set's own order are a stream
of 16 count windows; every example's lifetime budget is ε. The tree with levels 0..4 releases
each node (2^j windows) once, with ``halfspaces`` at ε/5; its *best release* is the level-4
release (all the stream). Against it: level-0 releases at the whole ε (each window alone,
parallel composition), their mean accuracy. Tested on the last 20% of the data set (after the
stream, in order).

**Online** (``online``): privstream's online learners for vector streams
(:mod:`privstream.learning.online`: every registered one and the service's default ``auto``, their
defaults, the public bounds) against River's ``Perceptron`` and ``LogisticRegression`` (their
defaults, on the features scaled to [0, 1] by the same bounds): progressive validation (each
example predicted, then learned) over the whole data set in one fixed shuffled order, the same
for every learner; accuracy = 1 - mistakes/n.

**Targets** (``targets``): for every data set with n_train >= 1000 and d <= 64, at ε = 1 some
privstream release is within 5 points of non-private logistic regression, and at every ε the best
privstream release is ahead of the best diffprivlib model; on every data set, the default online
learner is at least as accurate as River's Perceptron (``online_targets``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, make_vector_learner
from privstream.learning.randomness import seeded

EPSILONS = (0.1, 1.0)
#: δ of the (ε, δ)-DP learners (the pure ones report δ = 0 whatever they are given).
DELTA = 1e-6
APPROXIMATE_DP = ("kernel", "semi-supervised")
DATASETS = ("bananas", "iris", "phishing", "shuttle", "wine", "segments", "breast_cancer", "digits")
#: statsmodels' bundled survey data sets: (label column, the positive class, its name).
STATSMODELS_SETS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray], str]] = {
    "fair": ("affairs", lambda v: v > 0, "any affair"),
    "randhie": ("mdvis", lambda v: v > 0, "any outpatient visit"),
    "anes96": ("vote", lambda v: v == 1, "votes Dole"),
}
#: More real streams for the online learners (not in the offline tables).
EXTRA_DATASETS = tuple(STATSMODELS_SETS)
#: Shuffled orders of each data set the online learners are measured on.
ORDERS = 5


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- data ----------------------------------------------------------------------------------------


def _river(dataset: Any, positive: Callable[[Any], bool] = bool) -> tuple[np.ndarray, np.ndarray]:
    rows, labels = [], []
    for x, y in dataset:
        rows.append([float(v) for v in x.values()])
        labels.append(positive(y))
    return np.array(rows), np.array(labels, dtype=np.uint8)


def load(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(X, y, bounds, task)`` of a bundled data set (see the module docstring)."""
    if name in ("iris", "wine", "breast_cancer", "digits"):
        from sklearn import datasets as sk

        if name == "iris":
            data = sk.load_iris()
            X, y, task = data.data, data.target == 2, "virginica"
        elif name == "wine":
            data = sk.load_wine()
            X, y, task = data.data, data.target == 0, "cultivar 0"
        elif name == "breast_cancer":
            data = sk.load_breast_cancer()
            X, y, task = data.data, data.target == 1, "benign"
        else:
            data = sk.load_digits()
            X, y, task = data.data, data.target >= 5, "digit >= 5"
            return X, y.astype(np.uint8), np.array([[0.0, 16.0]] * X.shape[1]), task
    elif name in STATSMODELS_SETS:
        from statsmodels import datasets as smd

        frame = getattr(smd, name).load_pandas().data
        target, positive, task = STATSMODELS_SETS[name]
        X = frame.drop(columns=[target]).to_numpy(dtype=np.float64)
        y, task = positive(frame[target].to_numpy(dtype=np.float64)), task
    else:
        from river import datasets as rd

        if name == "bananas":
            (X, y), task = _river(rd.Bananas()), "banana"
        elif name == "phishing":
            (X, y), task = _river(rd.Phishing()), "phishing"
        elif name == "shuttle":
            (X, y), task = _river(rd.Shuttle(), lambda t: t == 1), "anomaly"
        elif name == "segments":
            (X, y), task = _river(rd.ImageSegments(), lambda t: t == "brickface"), "brickface"
        else:
            raise ValueError(f"unknown data set {name!r}")
    lo, hi = X.min(axis=0), X.max(axis=0)
    bounds = np.stack((lo, np.where(hi > lo, hi, lo + 1)), axis=1)
    return X, np.asarray(y).astype(np.uint8), bounds, task


def unit(X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    return np.clip((X - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0]), 0.0, 1.0)


# -- methods -------------------------------------------------------------------------------------


def privstream_release(
    name: str, X: np.ndarray, y: np.ndarray, bounds: np.ndarray, eps: float, seed: int
) -> Any:
    delta = DELTA if name in APPROXIMATE_DP else 0.0
    return (
        make_vector_learner(name).fit(X, y, epsilon=eps, delta=delta, bounds=bounds, rng=seeded(seed)).model
    )


def peers(Xtr: np.ndarray, ytr: np.ndarray, bounds: np.ndarray, eps: float, seed: int) -> dict[str, Any]:
    import diffprivlib.models as dp

    d = Xtr.shape[1]
    lr = dp.LogisticRegression(epsilon=eps, data_norm=math.sqrt(d), random_state=seed)
    lr.fit(unit(Xtr, bounds), ytr)
    nb = dp.GaussianNB(epsilon=eps, bounds=(bounds[:, 0], bounds[:, 1]), random_state=seed)
    nb.fit(Xtr, ytr)
    return {
        "diffprivlib_logistic_regression": lambda X: lr.predict(unit(X, bounds)),
        "diffprivlib_gaussian_nb": nb.predict,
    }


def offline(name: str, runs: int) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y, bounds, task = load(name)
    accuracy: dict[str, list[float]] = {}
    seconds: dict[str, list[float]] = {}
    refused: dict[str, str] = {}
    n_train = 0
    for run in range(runs):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=run, stratify=y)
        n_train = int(Xtr.shape[0])

        def score(key: str, predicted: np.ndarray, truth: np.ndarray = yte) -> None:
            accuracy.setdefault(key, []).append(float(np.mean(np.asarray(predicted) == truth)))

        score("majority", np.full(Xte.shape[0], int(np.mean(ytr) >= 0.5)))
        logistic = LogisticRegression(max_iter=10_000).fit(unit(Xtr, bounds), ytr)
        score("logistic_regression", logistic.predict(unit(Xte, bounds)))
        for eps in EPSILONS:
            for learner in sorted(VECTOR_LEARNERS):
                key = f"{learner}@{eps:g}"
                if key in refused:
                    continue
                t0 = time.perf_counter()
                try:
                    model = privstream_release(learner, Xtr, ytr, bounds, eps, 1000 * run + 7)
                except ValueError as exc:  # a configuration the learner refuses (public: d, m)
                    refused[key] = str(exc).split(";")[0]
                    continue
                seconds.setdefault(key, []).append(time.perf_counter() - t0)
                score(key, model.predict(Xte))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # diffprivlib's notes on its own settings
                for key, predict in peers(Xtr, ytr, bounds, eps, run).items():
                    score(f"{key}@{eps:g}", predict(Xte))
        progress(f"{name}: run {run + 1} of {runs}")
    return {
        "task": task,
        "n_train": n_train,
        "d": int(X.shape[1]),
        "accuracy": {k: float(np.mean(v)) for k, v in accuracy.items()},
        "accuracy_per_run": {k: [round(a, 4) for a in v] for k, v in accuracy.items()},
        "seconds": {k: float(np.mean(v)) for k, v in seconds.items()},
        "refused": refused,
    }


def release_tree(name: str, eps: float, levels: int = 4) -> dict[str, Any]:
    """The stream in the data set's order; see the module docstring."""
    X, y, bounds, _ = load(name)
    cut = int(0.8 * X.shape[0])
    stream_x, stream_y, test_x, test_y = X[:cut], y[:cut], X[cut:], y[cut:]
    windows = 2**levels
    size = cut // windows
    learner = make_vector_learner("halfspaces")

    def accuracy(lo: int, hi: int, budget: float, seed: int) -> float:
        model = learner.fit(
            stream_x[lo:hi], stream_y[lo:hi], epsilon=budget, bounds=bounds, rng=seeded(seed)
        ).model
        return float(np.mean(model.predict(test_x) == test_y))

    level0 = [accuracy(w * size, (w + 1) * size, eps, w) for w in range(windows)]
    best = accuracy(0, windows * size, eps / (levels + 1), 99)
    return {
        "stream": name,
        "window_size": size,
        "windows": windows,
        "top_level": levels,
        "lifetime_epsilon": eps,
        "level0_mean_accuracy": float(np.mean(level0)),
        "level0_accuracy": [round(a, 4) for a in level0],
        "best_release_accuracy": best,
    }


#: River's linear classifiers (their defaults), alone and behind its running StandardScaler: the
#: peers of the online learners, "River's best" on an order being the best of them on that order.
RIVER_ONLINE = ("Perceptron", "LogisticRegression", "PAClassifier", "ALMAClassifier")


def river_online_models() -> dict[str, Callable[[], Any]]:
    from river import linear_model, preprocessing

    models: dict[str, Callable[[], Any]] = {}
    for cls_name in RIVER_ONLINE:
        cls = getattr(linear_model, cls_name)
        models[f"river_{cls_name}"] = cls
        models[f"river_StandardScaler|{cls_name}"] = lambda cls=cls: preprocessing.StandardScaler() | cls()
    return models


def online(name: str, orders: int = ORDERS) -> dict[str, Any]:
    """Progressive validation (predict, then learn) over the whole data set in ``orders`` fixed
    shuffled orders (order ``k`` is ``numpy.random.default_rng(k).permutation``), the same for every
    learner; accuracy = 1 - mistakes/n, per order."""
    from privstream.learning.online import (
        DEFAULT_ONLINE_LEARNER,
        ONLINE_LEARNERS,
        make_online_learner,
        resolve_online_learner,
    )

    X0, y0, bounds, _ = load(name)
    out: dict[str, Any] = {
        "examples": int(X0.shape[0]),
        "d": int(X0.shape[1]),
        "orders": orders,
        "default": resolve_online_learner(DEFAULT_ONLINE_LEARNER, int(X0.shape[1])),
        "accuracy": {},
        "examples_per_second": {},
    }
    accuracy: dict[str, list[float]] = out["accuracy"]
    rate: dict[str, list[float]] = out["examples_per_second"]
    for k in range(orders):
        order = np.random.default_rng(k).permutation(X0.shape[0])
        X, y = X0[order], y0[order]
        for learner in sorted(ONLINE_LEARNERS):
            t0 = time.perf_counter()
            model = make_online_learner(learner, bounds)
            predictions = model.learn_many(X, y)
            rate.setdefault(f"privstream_{learner}", []).append(X.shape[0] / (time.perf_counter() - t0))
            accuracy.setdefault(f"privstream_{learner}", []).append(float(np.mean(predictions == y)))
        U = unit(X, bounds)
        for label, make in river_online_models().items():
            model = make()
            t0 = time.perf_counter()
            right = 0
            for row, label_y in zip(U, y, strict=True):
                x = dict(enumerate(row.tolist()))
                right += int(bool(model.predict_one(x)) == bool(label_y))
                model.learn_one(x, bool(label_y))
            rate.setdefault(label, []).append(X.shape[0] / (time.perf_counter() - t0))
            accuracy.setdefault(label, []).append(right / X.shape[0])
        progress(f"online on {name}: order {k + 1} of {orders}")
    river = [key for key in accuracy if key.startswith("river_")]
    out["river_best"] = [max(accuracy[key][k] for key in river) for k in range(orders)]
    out["river_best_model"] = [max(river, key=lambda key, k=k: accuracy[key][k]) for k in range(orders)]
    out["examples_per_second"] = {key: float(np.median(v)) for key, v in rate.items()}
    return out


def online_targets(online_results: dict[str, Any]) -> dict[str, Any]:
    """Per data set: the default online learner against River's best, order by order (within 0.01
    on every order), and against River's Perceptron."""
    out: dict[str, Any] = {}
    for name, res in online_results.items():
        ours = res["accuracy"][f"privstream_{res['default']}"]
        gaps = [best - a for a, best in zip(ours, res["river_best"], strict=True)]
        out[name] = {
            "default": res["default"],
            "within_0.01_of_river_best_on_every_order": max(gaps) <= 0.01,
            "worst_gap_to_river_best": max(gaps),
            "at_least_river_perceptron_on_every_order": all(
                a >= p for a, p in zip(ours, res["accuracy"]["river_Perceptron"], strict=True)
            ),
        }
    return out


def targets(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, res in results.items():
        if res["n_train"] < 1000 or res["d"] > 64:
            continue
        acc = res["accuracy"]
        ours = {
            eps: max((v for k, v in acc.items() if k.endswith(f"@{eps:g}") and "diffprivlib" not in k))
            for eps in EPSILONS
        }
        theirs = {
            eps: max(v for k, v in acc.items() if k.endswith(f"@{eps:g}") and "diffprivlib" in k)
            for eps in EPSILONS
        }
        out[name] = {
            "within_5_points_at_1": ours[1.0] >= acc["logistic_regression"] - 0.05,
            "gap_to_logistic_regression_at_1": acc["logistic_regression"] - ours[1.0],
            "ahead_of_diffprivlib": {f"{eps:g}": ours[eps] > theirs[eps] for eps in EPSILONS},
        }
    return out


# -- output --------------------------------------------------------------------------------------

COLUMNS = (
    ("majority", "majority"),
    ("halfspaces", "halfspaces"),
    ("kernel", "kernel (δ=1e-6)"),
    ("bayes-consistent", "bayes-consistent"),
    ("semi-supervised", "semi-supervised (δ=1e-6)"),
    ("diffprivlib_logistic_regression", "diffprivlib LR"),
    ("diffprivlib_gaussian_nb", "diffprivlib GaussianNB"),
    ("logistic_regression", "logistic regression (not private)"),
)


def markdown_online(online_results: dict[str, Any]) -> str:
    """The online table: every privstream learner's accuracy on every order (the default's in
    bold), River's best of that order with its model (every River figure is in the JSON), and the
    default's gap to it; one row per (data set, order)."""
    first = next(iter(online_results.values()))
    keys = [k for k in first["accuracy"] if k.startswith("privstream_")]
    heads = [k.replace("privstream_", "") for k in keys]
    lines = [
        "| data (examples, d) | order | "
        + " | ".join(heads)
        + " | River's best | its model | default − River's best |",
        "|" + "---|" * (len(heads) + 5),
    ]
    for name, res in online_results.items():
        default = f"privstream_{res['default']}"
        for k in range(res["orders"]):
            cells = []
            for key in keys:
                cell = f"{res['accuracy'][key][k]:.3f}"
                cells.append(f"**{cell}**" if key == default else cell)
            model = res["river_best_model"][k].replace("river_", "").replace("StandardScaler|", "scaled ")
            gap = res["accuracy"][default][k] - res["river_best"][k]
            lines.append(
                f"| {name} ({res['examples']}, {res['d']}) | {k} | "
                + " | ".join(cells)
                + f" | {res['river_best'][k]:.3f} | {model} | {gap:+.3f} |"
            )
    return "\n".join(lines) + "\n"


def markdown(results: dict[str, Any]) -> str:
    head = "| data (n train, d) | ε | " + " | ".join(label for _, label in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for name, res in results.items():
        acc = res["accuracy"]
        for eps in EPSILONS:
            cells = []
            for key, _ in COLUMNS:
                full = key if key in ("majority", "logistic_regression") else f"{key}@{eps:g}"
                cells.append(f"{acc[full]:.3f}" if full in acc else "refused")
            lines.append(
                f"| {name}, {res['task']} ({res['n_train']}, {res['d']}) | {eps:g} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(EPSILONS), figsize=(14, 5), sharey=True)
    names = list(results)
    for ax, eps in zip(axes, EPSILONS, strict=True):
        width = 0.8 / len(COLUMNS)
        for i, (key, label) in enumerate(COLUMNS):
            full = [key if key in ("majority", "logistic_regression") else f"{key}@{eps:g}"]
            values = [results[n]["accuracy"].get(full[0], np.nan) for n in names]
            ax.bar(np.arange(len(names)) + i * width, values, width, label=label)
        ax.set_xticks(np.arange(len(names)) + 0.4, [f"{n}\n(d={results[n]['d']})" for n in names], fontsize=8)
        ax.set_title(f"test accuracy, ε = {eps:g} (5 runs, 80/20)")
        ax.set_ylim(0.3, 1.0)
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--orders", type=int, default=ORDERS, help="shuffled orders of the online part")
    parser.add_argument("--datasets", default="all", help=f"comma-separated, of {', '.join(DATASETS)}")
    parser.add_argument("--online-only", action="store_true", help="only the online learners")
    parser.add_argument("--plot", type=Path, help="write the accuracy plot to this PNG file")
    parser.add_argument("--table", type=Path, help="write the Markdown table to this file")
    args = parser.parse_args(argv)
    names = DATASETS if args.datasets == "all" else tuple(args.datasets.split(","))
    results = {} if args.online_only else {name: offline(name, args.runs) for name in names}
    if args.datasets == "all":
        names = (*names, *EXTRA_DATASETS)  # more streams for the online learners
    trees = []
    for stream in ("shuttle", "phishing"):
        if stream in names and not args.online_only:
            for eps in EPSILONS:
                trees.append(release_tree(stream, eps))
                progress(f"release tree on {stream} at ε = {eps:g}: done")
    online_results = {name: online(name, args.orders) for name in names}
    out = {
        "benchmark": "bench_real_data",
        "runs": args.runs,
        "epsilons": list(EPSILONS),
        "offline": results,
        "release_tree": trees,
        "online": online_results,
        "targets": targets(results),
        "online_targets": online_targets(online_results),
    }
    print(json.dumps(out, indent=1))
    if args.table:
        tables = [markdown(results)] if results else []
        args.table.write_text("\n".join([*tables, markdown_online(online_results)]))
    if args.plot and results:
        plot(results, args.plot)
    return out


if __name__ == "__main__":
    main()
