"""The generic learner on ``intervals:N``: the O(n log n) interval sampler vs the O(k²) error levels.

    .venv/bin/python benchmarks/bench_interval_sampler.py [--sizes 1e5 1e6 1e7] [--repeats 3]

For N in ``--domains`` (2^32 and 65536) and every n in ``--sizes``: a window of n examples, x
uniform on the domain, labelled by the interval ``[0.3N, 0.55N)`` with 10% of the labels flipped
(``noisy``), and the same points all labelled 0 (``zeros``: the gain walk W falls at every point,
so the prefix minimum changes at every step, the scan's worst case). Measured, median of
``--repeats`` seeded runs: ``GenericLearner.fit`` (validation, sort, the sampler's construction
and its draw), with the construction and the draw apart and the number of rejection rounds.

Side by side, in the same run, the path it replaces: the exact O(k²) error levels then the
exponential mechanism over them (validation, ``error_levels``, ``sample_hypothesis``), on
``--old-sizes`` and on every window of ``--sizes`` with at most ``--old-budget`` pairs
``k(k+1)/2`` (default 2.2·10^9: every window of ``intervals:65536``, whose k is at most 65,536,
and up to about 66,000 distinct points on ``intervals:2^32``; beyond, one run would take hours,
and days at 10^7 distinct points). Its guard refused
windows of more than ``2·10^8`` pairs (about 20,000 distinct points): ``old_guard_refused``
marks them, and those are timed once instead of ``--repeats`` times (``old_runs``).
``old_over_new`` is the ratio of the medians. ``exponent`` is the least-squares slope of
log(time) against log(n) over ``--sizes`` (1 is linear; sorting adds a log factor).

The machine is shared (2 cores, other jobs): read the ratios, not the absolute seconds.
Prints JSON; also writes benchmarks/results/bench_interval_sampler.json (ignored by git) and a
log-log plot, bench_interval_sampler.png, if matplotlib is installed (``.venv/bin/pip install
matplotlib``). The default run takes about 15 minutes, most of it the O(k²) path.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.hypothesis_classes import Intervals
from privstream.learning.private_learners import GenericLearner, error_levels, sample_hypothesis
from privstream.learning.private_learners.base import check_sample
from privstream.learning.private_learners.generic.interval_sampler import IntervalSampler
from privstream.learning.randomness import seeded

EPSILON = 1.0
OLD_PAIR_LIMIT = 2 * 10**8  # the guard the O(k²) path had (MAX_INTERVAL_PAIRS)


def window(n: int, n_dom: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, n_dom, n)
    if kind == "zeros":
        return xs, np.zeros(n, dtype=np.uint8)
    inside = (xs >= int(0.3 * n_dom)) & (xs < int(0.55 * n_dom))
    return xs, (inside ^ (rng.random(n) < 0.1)).astype(np.uint8)


def time_new(xs: np.ndarray, ys: np.ndarray, n_dom: int, seed: int) -> dict[str, float]:
    hclass = Intervals(n_dom)
    start = time.perf_counter()
    GenericLearner().fit(hclass, xs, ys, epsilon=EPSILON, rng=seeded(seed))
    fit = time.perf_counter() - start
    start = time.perf_counter()
    sampler = IntervalSampler(hclass, xs, ys, EPSILON)
    build = time.perf_counter() - start
    rounds = 0
    propose = sampler.propose

    def counting(rng: Any) -> Any:
        nonlocal rounds
        rounds += 1
        return propose(rng)

    sampler.propose = counting  # type: ignore[method-assign]
    start = time.perf_counter()
    sampler.draw(seeded(seed))
    return {
        "fit": fit,
        "build": build,
        "draw": time.perf_counter() - start,
        "rounds": rounds,
        "distinct": sampler.k,
    }


def time_old(xs: np.ndarray, ys: np.ndarray, n_dom: int, seed: int) -> float:
    """The fit before the interval sampler: validation, the O(k²) levels, the mechanism over them."""
    hclass = Intervals(n_dom)
    start = time.perf_counter()
    points, labels = check_sample(hclass, xs, ys)
    sample_hypothesis(error_levels(hclass, points, labels), EPSILON, seeded(seed))
    return time.perf_counter() - start


def domain_size(text: str) -> int:
    """``"2^32"`` or ``"65536"`` as an int."""
    return 2 ** int(text[2:]) if text.startswith("2^") else int(text)


def exponent(sizes: list[int], seconds: list[float]) -> float:
    x, y = np.log(np.array(sizes, dtype=float)), np.log(np.array(seconds))
    return float(np.polyfit(x, y, 1)[0])


def measure(domain: str, n_dom: int, kind: str, size: int, repeats: int, old_budget: float) -> dict[str, Any]:
    """One row: the new fit (median of ``repeats``), and the O(k²) path if within ``old_budget`` pairs."""
    runs = [time_new(*window(size, n_dom, kind, seed), n_dom, seed) for seed in range(repeats)]
    row: dict[str, Any] = {"domain": domain, "kind": kind, "n": size, "distinct": runs[0]["distinct"]}
    for key in ("fit", "build", "draw"):
        row[f"new_{key}_s"] = statistics.median(r[key] for r in runs)
    row["rounds"] = [r["rounds"] for r in runs]
    pairs = row["distinct"] * (row["distinct"] + 1) // 2
    row["old_guard_refused"] = pairs > OLD_PAIR_LIMIT
    row["old_fit_s"] = None  # beyond the budget: not run
    if pairs <= old_budget:
        row["old_runs"] = 1 if row["old_guard_refused"] else repeats  # refused windows take minutes
        row["old_fit_s"] = statistics.median(
            time_old(*window(size, n_dom, kind, seed), n_dom, seed) for seed in range(row["old_runs"])
        )
        row["old_over_new"] = row["old_fit_s"] / row["new_fit_s"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument(
        "--old-sizes",
        type=float,
        nargs="+",
        default=[1e3, 3e3, 1e4, 1.9e4],
        help="windows also run through the O(k²) path (side by side)",
    )
    parser.add_argument(
        "--old-budget", type=float, default=2.2e9, help="largest k(k+1)/2 run through the O(k²) path"
    )
    parser.add_argument("--domains", nargs="+", default=["2^32", "65536"])
    parser.add_argument("--kinds", nargs="+", default=["noisy", "zeros"], choices=["noisy", "zeros"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    main_sizes = {int(s) for s in args.sizes}
    for domain in args.domains:  # warm up (first calls pay for lazy imports and caches)
        n_dom = domain_size(domain)
        time_new(*window(1000, n_dom, "noisy", 0), n_dom, 0)
        time_old(*window(100, n_dom, "noisy", 0), n_dom, 0)
    for domain in args.domains:
        n_dom = domain_size(domain)
        for kind in args.kinds:
            for size in sorted({int(s) for s in args.sizes + args.old_sizes}):
                rows.append(measure(domain, n_dom, kind, size, args.repeats, args.old_budget))
                print(json.dumps(rows[-1]), flush=True)
            scaled = [r for r in rows if (r["domain"], r["kind"]) == (domain, kind) and r["n"] in main_sizes]
            if len(scaled) > 1:
                summary[f"{domain}/{kind}"] = {
                    "exponent": exponent([r["n"] for r in scaled], [r["new_fit_s"] for r in scaled]),
                    "new_fit_s": {str(r["n"]): r["new_fit_s"] for r in scaled},
                    "old_fit_s": {str(r["n"]): r["old_fit_s"] for r in scaled},
                    "old_over_new": {str(r["n"]): r.get("old_over_new") for r in scaled},
                }
    result = {
        "bench": "interval_sampler",
        "epsilon": EPSILON,
        "repeats": args.repeats,
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "processor": platform.machine(),
        },
        "old_budget_pairs": args.old_budget,
        "rows": rows,
        "scaling": summary,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_interval_sampler.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({"scaling": summary}, indent=2))
    plot(rows, out / "bench_interval_sampler.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (domain, kind) in enumerate(sorted({(r["domain"], r["kind"]) for r in rows})):
        mine = [r for r in rows if (r["domain"], r["kind"]) == (domain, kind)]
        ax.loglog(
            [r["n"] for r in mine],
            [r["new_fit_s"] for r in mine],
            "o-",
            color=f"C{i}",
            label=f"interval sampler, {domain}, {kind}",
        )
        old = [r for r in mine if r["old_fit_s"] is not None]
        if old:
            ax.loglog(
                [r["n"] for r in old],
                [r["old_fit_s"] for r in old],
                "x--",
                color=f"C{i}",
                label=f"O(k²) levels, {domain}, {kind}",
            )
    ax.set_xlabel("examples in the window (n)")
    ax.set_ylabel("seconds per release (median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
