"""The release tree vs level-0 releases vs a draining budget, at one lifetime budget.

Run:  .venv/bin/python benchmarks/bench_release_tree.py [--runs 5] [--epsilon 1.0] [--windows 64]
                                                         [--window-size 2000] [--noise 0.05]
                                                         [--holdout 50000] [--max-levels 6] [--seed 0]
                                                         [--modes public,private]
                                                         [--only thresholds,vectors,halfspaces,ledger]
                                                         [--ledger-windows 4096] [--out benchmarks/results]
Prints one JSON object (also written to OUT/bench_release_tree.json) and writes the plot
OUT/bench_release_tree.png, the error of the best release against the examples seen, for L = 0, 2,
4, 6 and the best L (``benchmarks/results/`` is gitignored). Benchmark-only dependency (NOT a
runtime dependency of privstream): ``.venv/bin/pip install matplotlib``; without it no plot.

**What is compared.** A stream of ``--windows`` count windows of
``--window-size`` examples; every example has the same lifetime budget ``--epsilon`` (ε, δ = 0):

* **the release tree with L levels** (L = 0..``--max-levels``; at L = 6 the top node covers all 64
  windows): node (j, m) covers windows ``[m·2^j, (m+1)·2^j)``, is released once, when complete, by
  the learner on all its examples at ``ε_j = ε / (L+1)`` (the service's default even split; each example
  lies in one node per level, so its lifetime cost is Σ_j ε_j = ε). The *best release* after k
  windows is the newest release of the highest completed level (``privstream subscribe``'s default);
  once level L has completed it is a level-L release, so ``best_release_excess`` averages all level-L
  releases (the L with the least is ``best_L``; ``best_L_mean_over_stream`` averages the best release
  over the 64 moments a window closes, which also counts the wait for the top level);
* **level-0 releases at the same lifetime budget**: L = 0, every window released at the whole ε
  (parallel composition over disjoint windows) -- the strongest level-0 baseline; the level-0
  releases inside a tree (at ε/(L+1)) are reported per level as well;
* **the one-window scheme** (one window, whole budget): the draining total spent on the first window at ε,
  after which the stream releases nothing more. Its release has the law of L = 0's first release
  (same data, same ε): it is that release, kept for ever.

``expected_size`` as the service sets it: mode ``public`` (count windows at the example level: n is
public, ``expected_size=None``) and mode ``private`` (n private, as with time windows:
``expected_size = window_size · 2^j`` for a level-j node, add/remove-one neighbours). Here every
node holds exactly its expected size, so both learners derive the same parameters in both modes and
the figures coincide (checked); ``--modes public`` is the default.

**Tasks.** ``thresholds``: the configured learner ``generic`` on ``thresholds:65536``, uniform
marginal, target ``1[x >= 20000]``, every label flipped with probability ``--noise``. ``vectors``:
the vector learner ``bayes-consistent`` (PCL grid) on 2 features uniform on the public box
``[0, 1]^2``, target ``1[x_2 >= 0.25 + 0.5·x_1]``, the same label noise. ``halfspaces``: the same
vector stream with the vector learner ``halfspaces`` (the exponential mechanism over a public net
of halfspaces, resolution ⌈ε·n/2⌉: its accuracy improves with ε·n, PCL's grid only with n).

**Error.** ``excess_holdout``: on ``--holdout`` fresh examples of the same distribution (new every
run), the disagreement with the noisy hold-out labels minus the noise floor (the target's own error
on the same labels, i.e. the realised noise rate, which removes the hold-out's sampling noise from
the difference). ``excess``: the same quantity in the population, ``(1 - 2·noise)·Pr[h(x) != c(x)]``
(symmetric label noise), with ``Pr[h(x) != c(x)]`` exact for thresholds (every domain point, uniform
marginal) and, for vectors, the mean over one fixed sample of 2^20 uniform points (the same for
every release; not a lattice: the target's rational slope would hide a halfspace within half a
lattice step of it): the hold-out figure's limit, nearly free of its sampling noise (relative
standard error about 1/sqrt(2^20·error)), which matters once the best release errs on a few hundred
domain points.
``vs_truth``: hold-out disagreement with the true labelling. Means and 0.9-quantiles over the
releases and ``--runs`` runs. The target: the best release's excess error <= 1/4 of a
level-0 release's (``target_met``, on ``excess``; ``target_met_holdout`` on ``excess_holdout``).

**Ledger cost** (``ledger``): with the ledger's write-ahead API (``reserve``) on a
SQLite file: reservations (the charge) per second per level, and in the schedule's order (see
:func:`ledger_cost`). A ledger without ``reserve`` reports ``measured: false`` and why.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.private_learners.vector_base import make_vector_learner
from privstream.learning.randomness import seeded
from privstream.stream_app.settings import ReleaseConfig

THRESHOLD_DOMAIN = 65536
THRESHOLD_TARGET = 20000
BOUNDS = [[0.0, 1.0], [0.0, 1.0]]


# -- the tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """Node (level, index) of the release tree: the aligned level-0 windows ``[first, last]``."""

    level: int
    index: int

    @property
    def first(self) -> int:
        return self.index << self.level

    @property
    def last(self) -> int:
        return ((self.index + 1) << self.level) - 1


def level_epsilons(lifetime_epsilon: float, levels: int) -> list[float]:
    """The learner's ε per level as the service configures it (its default without a
    sanitizer: the lifetime budget split evenly over the L+1 levels).

    >>> level_epsilons(1.0, 3)
    [0.25, 0.25, 0.25, 0.25]
    """
    return ReleaseConfig(epsilon_budget=lifetime_epsilon, top_level=levels).learner_epsilons


def complete_nodes(windows: int, levels: int) -> list[Node]:
    """Every node of levels 0..L complete once ``windows`` windows are closed.

    >>> [(n.level, n.index) for n in complete_nodes(4, 2)]
    [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (2, 0)]
    """
    return [Node(j, m) for j in range(levels + 1) for m in range(windows >> j)]


def best_node(closed: int, levels: int) -> Node:
    """The newest node of the highest completed level after ``closed`` >= 1 windows.

    >>> best_node(1, 6), best_node(6, 6), best_node(64, 2)
    (Node(level=0, index=0), Node(level=2, index=0), Node(level=2, index=15))
    """
    j = min(levels, closed.bit_length() - 1)
    return Node(j, (closed >> j) - 1)


# -- the tasks --------------------------------------------------------------------------------


@dataclass
class Sample:
    xs: np.ndarray
    noisy: np.ndarray
    truth: np.ndarray


#: a fitted release, as a predictor
Predictor = Callable[[np.ndarray], np.ndarray]


class ThresholdTask:
    name = "thresholds"
    learner = "generic"

    def __init__(self) -> None:
        self.hclass = parse_class_spec(f"thresholds:{THRESHOLD_DOMAIN}")
        self._learner = make_learner(self.learner)

    def sample(self, gen: np.random.Generator, n: int, noise: float) -> Sample:
        xs = gen.integers(0, THRESHOLD_DOMAIN, n)
        truth = (xs >= THRESHOLD_TARGET).astype(np.uint8)
        return Sample(xs, truth ^ (gen.random(n) < noise).astype(np.uint8), truth)

    def population(self) -> Sample:
        """Every domain point once: the uniform marginal exactly."""
        xs = np.arange(THRESHOLD_DOMAIN)
        truth = (xs >= THRESHOLD_TARGET).astype(np.uint8)
        return Sample(xs, truth, truth)

    def fit(
        self, xs: np.ndarray, ys: np.ndarray, epsilon: float, seed: int, expected_size: int | None
    ) -> Predictor:
        result = self._learner.fit(
            self.hclass, xs, ys, epsilon=epsilon, rng=seeded(seed), expected_size=expected_size
        )
        return result.hypothesis.predict  # type: ignore[no-any-return]


class VectorTask:
    name = "vectors"
    learner = "bayes-consistent"

    def __init__(self, learner: str | None = None) -> None:
        self.learner = learner or self.learner
        self._learner = make_vector_learner(self.learner)

    def sample(self, gen: np.random.Generator, n: int, noise: float) -> Sample:
        xs = gen.random((n, 2))
        truth = (xs[:, 1] >= 0.25 + 0.5 * xs[:, 0]).astype(np.uint8)
        return Sample(xs, truth ^ (gen.random(n) < noise).astype(np.uint8), truth)

    def population(self) -> Sample:
        """2^20 uniform points of the box, one fixed sample (Monte Carlo for the uniform marginal)."""
        xs = np.random.default_rng(20261127).random((1 << 20, 2))
        truth = (xs[:, 1] >= 0.25 + 0.5 * xs[:, 0]).astype(np.uint8)
        return Sample(xs, truth, truth)

    def fit(
        self, xs: np.ndarray, ys: np.ndarray, epsilon: float, seed: int, expected_size: int | None
    ) -> Predictor:
        result = self._learner.fit(
            xs, ys, epsilon=epsilon, bounds=np.array(BOUNDS), rng=seeded(seed), expected_size=expected_size
        )
        return result.model.predict


TASKS: dict[str, Callable[[], ThresholdTask | VectorTask]] = {
    "thresholds": ThresholdTask,
    "vectors": VectorTask,
    "halfspaces": lambda: VectorTask("halfspaces"),
}


# -- one task, one mode -----------------------------------------------------------------------


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "q90": float(np.quantile(a, 0.9)), "runs": int(a.size)}


def run_task(task: ThresholdTask | VectorTask, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every tree (L = 0..max), the one-window scheme, per level and per examples seen, over
    ``args.runs`` runs."""
    size, windows, eps = args.window_size, args.windows, args.epsilon
    all_levels = list(range(args.max_levels + 1))
    # excess[L][(j, m)] -> list over runs; curve[L][k-1] -> list over runs
    excess: dict[int, dict[tuple[int, int], list[float]]] = {L: {} for L in all_levels}
    holdout: dict[int, dict[tuple[int, int], list[float]]] = {L: {} for L in all_levels}
    truth_err: dict[int, dict[tuple[int, int], list[float]]] = {L: {} for L in all_levels}
    fit_seconds: dict[int, list[float]] = {j: [] for j in all_levels}
    population = task.population()
    for run in range(args.runs):
        print(f"{task.learner} ({mode}): run {run + 1} of {args.runs}", file=sys.stderr, flush=True)
        gen = np.random.default_rng([args.seed, run, 17])
        stream = task.sample(gen, size * windows, args.noise)
        hold = task.sample(gen, args.holdout, args.noise)
        floor = float(np.mean(hold.truth != hold.noisy))
        for L in all_levels:
            eps_j = level_epsilons(eps, L)
            for node in complete_nodes(windows, L):
                lo, hi = node.first * size, (node.last + 1) * size
                expected = None if mode == "public" else size << node.level
                seed = hash((args.seed, run, L, node.level, node.index)) & 0x7FFFFFFF
                t0 = time.perf_counter()
                predict = task.fit(stream.xs[lo:hi], stream.noisy[lo:hi], eps_j[node.level], seed, expected)
                fit_seconds[node.level].append(time.perf_counter() - t0)
                p = np.asarray(predict(hold.xs))
                key = (node.level, node.index)
                holdout[L].setdefault(key, []).append(float(np.mean(p != hold.noisy)) - floor)
                wrong = float(np.mean(np.asarray(predict(population.xs)) != population.truth))
                excess[L].setdefault(key, []).append((1 - 2 * args.noise) * wrong)
                truth_err[L].setdefault(key, []).append(float(np.mean(p != hold.truth)))

    def level_rows(L: int) -> dict[str, Any]:
        rows = {}
        for j in range(L + 1):
            ex = [v for (jj, _), vs in excess[L].items() if jj == j for v in vs]
            ho = [v for (jj, _), vs in holdout[L].items() if jj == j for v in vs]
            tr = [v for (jj, _), vs in truth_err[L].items() if jj == j for v in vs]
            rows[str(j)] = {
                "epsilon": level_epsilons(eps, L)[j],
                "examples": size << j,
                "expected_size": None if mode == "public" else size << j,
                "releases_per_run": windows >> j,
                "excess": _stats(ex),
                "excess_holdout": _stats(ho),
                "vs_truth": _stats(tr),
            }
        return rows

    level0 = _stats([v for (j, _), vs in excess[0].items() for v in vs])
    level0_holdout = _stats([v for (j, _), vs in holdout[0].items() for v in vs])
    trees = {}
    for L in all_levels:
        curve = []
        for k in range(1, windows + 1):
            node = best_node(k, L)
            curve.append(
                {
                    "examples_seen": k * size,
                    "level": node.level,
                    **_stats(excess[L][(node.level, node.index)]),
                }
            )
        rows = level_rows(L)
        # the best release once the top level has completed: a level-L release (every one of them is
        # the best release for a while), averaged over all its nodes and runs
        top, top_holdout = rows[str(L)]["excess"]["mean"], rows[str(L)]["excess_holdout"]["mean"]
        trees[str(L)] = {
            "level_epsilon": level_epsilons(eps, L)[0],
            "top_covers_windows": 1 << L,
            "per_level": rows,
            "best_release_excess": top,
            "best_release_excess_holdout": top_holdout,
            "last_release_excess": curve[-1]["mean"],
            "best_mean_over_stream": float(np.mean([c["mean"] for c in curve])),
            "ratio_best_to_level0": top / level0["mean"] if level0["mean"] > 0 else None,
            "ratio_best_to_level0_holdout": top_holdout / level0_holdout["mean"]
            if level0_holdout["mean"] > 0
            else None,
            "curve": curve,
        }
    old = _stats(excess[0][(0, 0)])
    best_L = min(all_levels, key=lambda L: trees[str(L)]["best_release_excess"])
    best_L_stream = min(all_levels, key=lambda L: trees[str(L)]["best_mean_over_stream"])
    best = trees[str(best_L)]
    ratio, ratio_holdout = best["ratio_best_to_level0"], best["ratio_best_to_level0_holdout"]
    return {
        "learner": task.learner,
        "mode": mode,
        "expected_size": "None (n public)" if mode == "public" else "window_size * 2^level",
        "level0_at_lifetime_budget": {"epsilon": eps, "excess": level0, "excess_holdout": level0_holdout},
        "old_scheme_one_window": {
            "epsilon": eps,
            "examples": size,
            "excess": old,
            "excess_holdout": _stats(holdout[0][(0, 0)]),
            "note": "the draining total spent on window 0; no release after it",
        },
        "trees": trees,
        "best_L": best_L,
        "best_L_mean_over_stream": best_L_stream,
        "best_release_excess": best["best_release_excess"],
        "ratio_best_to_level0": ratio,
        "ratio_best_to_old_scheme": best["best_release_excess"] / old["mean"] if old["mean"] > 0 else None,
        "target_met": ratio is not None and ratio <= 0.25,
        "ratio_best_to_level0_holdout": ratio_holdout,
        "target_met_holdout": ratio_holdout is not None and ratio_holdout <= 0.25,
        "fit_seconds_mean_per_level": {str(j): float(np.mean(v)) for j, v in fit_seconds.items() if v},
    }


# -- the ledger's cost ------------------------------------------------------------------------


def ledger_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Reservations per second per level through the ledger's write-ahead API, if it has one.

    ``per_level``: each level on a fresh ledger (its nodes over ``--ledger-windows`` windows), so a
    level's rate reflects its node range, not the history; ``schedule``: all levels on one ledger in
    the order the release agent reserves them (after window w closes, every node it completes,
    level 0 first), with the rate over the first and the last tenth of the reservations (the
    history's cost).
    """
    from privstream.agents import ledger_port
    from privstream.stream_app.store.sqlite_ledger import SqliteLedger

    node_range = getattr(ledger_port, "NodeRange", None)
    if not hasattr(SqliteLedger, "reserve") or node_range is None:
        return {
            "measured": False,
            "reason": "this ledger has no reserve(...)/NodeRange",
        }
    windows, levels = args.ledger_windows, args.max_levels
    eps = args.epsilon / (levels + 1)

    def reserve_all(nodes: list[Node]) -> tuple[list[float], Any]:
        with tempfile.TemporaryDirectory() as tmp:
            ledger = SqliteLedger.open(Path(tmp) / "ledger.sqlite3", create_if_missing=True)
            try:
                ledger.register_stream("bench", ledger_port.PrivacyCost(args.epsilon, 0.0))
                times = []
                for node in nodes:
                    t0 = time.perf_counter()
                    ledger.reserve(
                        "bench",
                        f"c2000-L{node.level}-{node.index}",
                        "learner:generic",
                        eps,
                        0.0,
                        node_range(node.level, node.first, node.last),
                    )
                    times.append(time.perf_counter() - t0)
                return times, ledger.lifetime("bench")
            finally:
                ledger.close()

    def rate(times: list[float]) -> float:
        return len(times) / sum(times)

    per_level = {}
    for j in range(levels + 1):
        times, _ = reserve_all([Node(j, m) for m in range(windows >> j)])
        per_level[str(j)] = {
            "reservations": len(times),
            "per_second": rate(times),
            "median_ms": 1000 * float(np.median(times)),
        }
    order = [
        Node(j, (w + 1 >> j) - 1)
        for w in range(windows)
        for j in range(levels + 1)
        if (w + 1) % (1 << j) == 0
    ]
    times, lifetime = reserve_all(order)
    tenth = max(len(times) // 10, 1)
    return {
        "measured": True,
        "backend": "sqlite (one transaction per reservation, a temporary file)",
        "windows": windows,
        "levels": levels,
        "epsilon_per_level": eps,
        "per_level": per_level,
        "schedule": {
            "reservations": len(times),
            "per_second": rate(times),
            "first_tenth_per_second": rate(times[:tenth]),
            "last_tenth_per_second": rate(times[-tenth:]),
            "lifetime_after": {
                "spent_per_example": lifetime.spent_per_example.epsilon,
                "budget": lifetime.budget.epsilon,
                "refusals": lifetime.refusals,
            },
        },
    }


# -- the plot ---------------------------------------------------------------------------------


def plot(report: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = [(name, mode, r) for name, modes in report["tasks"].items() for mode, r in modes.items()]
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (name, mode, r) in zip(axes[0], results, strict=True):
        shown = {str(L) for L in range(0, len(r["trees"]), 2)} | {str(r["best_L"])}  # a readable few
        for L, tree in r["trees"].items():
            if L not in shown:
                continue
            xs = [c["examples_seen"] for c in tree["curve"]]
            ys = [max(c["mean"], 1e-5) for c in tree["curve"]]
            ax.step(xs, ys, where="post", label=f"tree L={L} (eps/level {tree['level_epsilon']:.3g})")
        old = max(r["old_scheme_one_window"]["excess"]["mean"], 1e-5)
        ax.axhline(old, color="black", linestyle="--", label="old scheme: one window, whole budget")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("examples seen")
        ax.set_ylabel("excess error of the best release")
        ax.set_title(f"{name} ({r['learner']}), n {mode}")
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"lifetime budget eps = {report['config']['epsilon']} per example")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return str(path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=1.0, help="lifetime budget per example")
    parser.add_argument("--windows", type=int, default=64)
    parser.add_argument("--window-size", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.05)
    parser.add_argument("--holdout", type=int, default=50_000)
    parser.add_argument("--max-levels", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default="public")
    parser.add_argument("--only", default="thresholds,vectors,halfspaces,ledger")
    parser.add_argument("--ledger-windows", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))
    report: dict[str, Any] = {
        "benchmark": "release_tree",
        "machine": platform.platform(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "tasks": {},
    }
    for name, factory in TASKS.items():
        if name in parts:
            task = factory()
            report["tasks"][name] = {mode: run_task(task, mode, args) for mode in args.modes.split(",")}
    report["summary"] = {
        f"{name}/{mode}": {
            k: r[k]
            for k in (
                "best_L",
                "best_L_mean_over_stream",
                "best_release_excess",
                "ratio_best_to_level0",
                "ratio_best_to_old_scheme",
                "target_met",
                "ratio_best_to_level0_holdout",
                "target_met_holdout",
            )
        }
        | {
            "level0_excess": r["level0_at_lifetime_budget"]["excess"]["mean"],
            "old_scheme_excess": r["old_scheme_one_window"]["excess"]["mean"],
        }
        for name, modes in report["tasks"].items()
        for mode, r in modes.items()
    }
    if "ledger" in parts:
        report["ledger"] = ledger_cost(args)
    args.out.mkdir(parents=True, exist_ok=True)
    if report["tasks"]:
        report["plot"] = plot(report, args.out / "bench_release_tree.png")
    (args.out / "bench_release_tree.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
