"""The private learners side by side: generic, global-stability, proper (if registered) and non-private ERM.

Run:  .venv/bin/python benchmarks/bench_private_learners.py [--runs 10] [--slow-runs 3] [--timeout 120]
                                                             [--seed 0] [--out benchmarks/results]
                                                             [--only table,gs-curve,proper-large,proper-scale]
Prints one JSON object (also written to OUT/bench_private_learners.json) and writes the plots
OUT/bench_private_learners.png and OUT/bench_gs_curve.png (``benchmarks/results/`` is gitignored).

Three parts (``--only`` picks some):

* ``table``: the setting below, every learner;
* ``gs-curve``: the global-stability learner's error against n next to the generic
  learner's, on the same data (same seeds), on ``thresholds:1024``, ``points:1024`` (the point 17 with
  mass 0.2) and ``intervals:1024`` (target ``[256, 640)``), n from 500 to 50,000, ε = 1, δ = 1e-6,
  α = β = 0.1, ``--runs`` samples per n; the 0.9-quantile and mean error, the success rate;
* ``proper-large``: the proper learner on ``intervals:65536`` (target ``[16384, 40960)``)
  and ``thresholds:2^32`` (target ``1[x >= 1234567890]``), uniform marginal, n = 20,000, ε = 1,
  δ = 1e-6: fit time and exact error per run (``--runs`` runs), in the public-n and private-n modes;
* ``proper-scale``: the proper learner on ``intervals:2^32`` (target ``[10^9, 3·10^9)``) at n = 10^5,
  10^6 and 10^7, one run each, beside the generic learner on the same data: fit time and exact error.

Benchmark-only dependency (NOT a runtime dependency of privstream): ``.venv/bin/pip install matplotlib``;
without it no plot is written.

Setting (realizable data; errors are exact population errors ``sum of D(x) over x with h(x) != c(x)``):

* ``thresholds:1024``: uniform marginal, target ``1[x >= 512]``;
* ``points:1024``: the point 17 has mass 0.2, the rest uniform; target ``1[x = 17]`` (the all-zero
  function has error 0.2, so a learner must find the point);
* ``intervals:64``: uniform marginal, target ``[16, 40)``;
* ``random-ldimD`` (D = 1, 2, 3): a random file class on 10 points with Ldim exactly D (rows drawn
  until the exact Ldim matches), uniform marginal, a random member as target.

For each class and learner: error against n at ε = 1 and against ε at n = 10^4 (δ = 1e-6, α = β = 0.1),
``--runs`` fresh samples per cell (the proper learner: ``--slow-runs`` samples at n = 10^3 and 10^4
only, no ε sweep, each fit in a child process killed after ``--timeout`` s); the 0.9-quantile and
mean error, the success rate Pr[error <= 0.1], the mean fit time; the smallest n of the grid where
the success rate is >= 0.9 (a learner that has not succeeded by 10^5 is tried at 3·10^5 and 10^6);
the theorem's n (each learner's own calculator: the generic learner's,
:func:`global_stability_sample_size`, the proper learner's) next to it, and the ratios
practical/theory n (log10) and fit time relative to the generic learner.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing as mp
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, parse_class_spec
from privstream.learning.private_learners import LEARNERS, error_levels, generic_sample_size, make_learner
from privstream.learning.private_learners.global_stability.learner import global_stability_sample_size
from privstream.learning.randomness import RandomSource, seeded

ALPHA = BETA = 0.1
DELTA = 1e-6
NS = (100, 300, 1000, 3000, 10_000, 30_000, 100_000)
EXTRA_NS = (300_000, 1_000_000)
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
EPS_N = 10_000
SLOW: set[str] = set()  # learners run with fewer runs, two sizes, no ε sweep, a timeout (none now)
SLOW_NS = (1000, 10_000)


def erm(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, rng: RandomSource) -> Hypothesis:
    """Non-private ERM: a uniformly random hypothesis of least empirical error (exact, via the blocks)."""
    levels = error_levels(hclass, xs, ys)
    best, count = levels.nonempty()[0]
    return levels.member(best, rng.uniform_int(count))


def random_class(ldim: int, seed: int, domain: int = 10) -> FiniteClass:
    """A random file class on ``domain`` points whose Ldim is exactly ``ldim``."""
    rng = np.random.default_rng(seed)
    rows = 2 ** (ldim + 1)
    while True:
        hclass = FiniteClass(rng.random((rows, domain)) < 0.5, f"random-ldim{ldim}")
        if hclass.version_space().ldim() == ldim:
            return hclass


def problems(seed: int) -> list[tuple[str, HypothesisClass, np.ndarray, np.ndarray]]:
    """(name, class, marginal, target truth table) of every benchmark problem."""
    out = []
    thresholds = parse_class_spec("thresholds:1024")
    out.append(("thresholds:1024", thresholds, np.full(1024, 1 / 1024), np.arange(1024) >= 512))
    marginal = np.full(1024, 0.8 / 1024)
    marginal[17] += 0.2
    out.append(("points:1024", parse_class_spec("points:1024"), marginal, np.arange(1024) == 17))
    out.append(
        (
            "intervals:64",
            parse_class_spec("intervals:64"),
            np.full(64, 1 / 64),
            (np.arange(64) >= 16) & (np.arange(64) < 40),
        )
    )
    for d in (1, 2, 3):
        hclass = random_class(d, seed + d)
        target = hclass.matrix()[np.random.default_rng(seed + 10 * d).integers(0, hclass.size)]
        out.append((f"random-ldim{d}", hclass, np.full(hclass.domain_size, 1 / hclass.domain_size), target))
    return out


def _fit_error(
    name: str,
    hclass: HypothesisClass,
    marginal: np.ndarray,
    target: np.ndarray,
    n: int,
    epsilon: float,
    seed: int,
) -> tuple[float, float]:
    data = np.random.default_rng(seed)
    xs = data.choice(hclass.domain_size, size=n, p=marginal)
    ys = target[xs].astype(np.uint8)
    start = time.perf_counter()
    if name == "erm":
        h = erm(hclass, xs, ys, seeded(seed))
    else:
        h = (
            make_learner(name)
            .fit(hclass, xs, ys, epsilon=epsilon, delta=DELTA, alpha=ALPHA, beta=BETA, rng=seeded(seed))
            .hypothesis
        )
    seconds = time.perf_counter() - start
    return float(marginal[h.truth_table() != target].sum()), seconds


def _child(queue: Any, *args: Any) -> None:
    try:
        queue.put(("ok", _fit_error(*args)))
    except Exception as exc:  # reported, not raised: one learner's failure must not stop the table
        queue.put(("error", f"{type(exc).__name__}: {exc}"[:300]))


def fit_error(name: str, timeout: float, *args: Any) -> tuple[str, Any]:
    """("ok", (error, seconds)) | ("error", message) | ("timeout", None); slow learners in a child."""
    if name not in SLOW:
        try:
            return "ok", _fit_error(name, *args)
        except Exception as exc:
            return "error", f"{type(exc).__name__}: {exc}"[:300]
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, name, *args))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return "timeout", None
    return queue.get() if not queue.empty() else ("error", f"child exited with {proc.exitcode}")


def cell(
    name: str, prob: tuple, n: int, epsilon: float, runs: int, timeout: float, seed: int
) -> dict[str, Any]:
    _, hclass, marginal, target = prob
    errors, times, problems_seen = [], [], []
    for r in range(runs):
        status, value = fit_error(name, timeout, hclass, marginal, target, n, epsilon, seed + r)
        if status != "ok":
            problems_seen.append(status if value is None else value)
            break
        errors.append(value[0])
        times.append(value[1])
    out: dict[str, Any] = {"n": n, "epsilon": epsilon, "runs": len(errors)}
    if problems_seen:
        out["failure"] = problems_seen[0]
    if errors:
        out.update(
            error_q90=float(np.quantile(errors, 0.9)),
            error_mean=float(np.mean(errors)),
            success_rate=float(np.mean([e <= ALPHA for e in errors])),
            seconds_mean=float(np.mean(times)),
        )
    return out


def theory_n(name: str, hclass: HypothesisClass, d: int) -> dict[str, Any]:
    """The learner's theorem sample size at (α, β, ε=1, δ): exact int if < 10^30, else its log10."""
    try:
        if name == "generic":
            value = generic_sample_size(hclass.size, ALPHA, BETA, 1.0)
        elif name == "global-stability":
            value = global_stability_sample_size(ALPHA, BETA, 1.0, DELTA, d) if d >= 1 else 0
        elif name == "proper":
            from privstream.learning.private_learners.proper.learner import proper_sample_size

            value = proper_sample_size(ALPHA, BETA, 1.0, DELTA, d)
        else:
            return {"n": None, "log10": None}
    except Exception as exc:
        return {"n": None, "log10": None, "error": f"{type(exc).__name__}: {exc}"[:200]}
    log10 = round(math.log10(value), 3) if value > 0 else 0.0
    return {"n": int(value) if value < 10**30 else None, "log10": log10}


GS_CURVE_NS = (500, 1000, 2000, 5000, 10_000, 20_000, 50_000)


def gs_problems() -> list[tuple[str, HypothesisClass, np.ndarray, np.ndarray]]:
    """The issue-20 problems over 2^10 (name, class, marginal, target truth table)."""
    size = 1024
    uniform = np.full(size, 1 / size)
    marginal = np.full(size, 0.8 / size)
    marginal[17] += 0.2
    grid = np.arange(size)
    return [
        ("thresholds:1024", parse_class_spec("thresholds:1024"), uniform, grid >= 512),
        ("points:1024", parse_class_spec("points:1024"), marginal, grid == 17),
        ("intervals:1024", parse_class_spec("intervals:1024"), uniform, (grid >= 256) & (grid < 640)),
    ]


def gs_curve(runs: int, seed: int) -> dict[str, Any]:
    """Error of global-stability and generic against n, on the same samples (the same seeds)."""
    out: dict[str, Any] = {}
    for pname, hclass, marginal, target in gs_problems():
        entry: dict[str, Any] = {}
        for name in ("global-stability", "generic"):
            cells = []
            for n in GS_CURVE_NS:
                errors, times = [], []
                for r in range(runs):
                    err, sec = _fit_error(name, hclass, marginal, target, n, 1.0, seed + r)
                    errors.append(err)
                    times.append(sec)
                cells.append(
                    {
                        "n": n,
                        "runs": runs,
                        "error_q90": float(np.quantile(errors, 0.9)),
                        "error_mean": float(np.mean(errors)),
                        "error_max": float(np.max(errors)),
                        "success_rate": float(np.mean([e <= ALPHA for e in errors])),
                        "seconds_mean": float(np.mean(times)),
                    }
                )
            entry[name] = cells
            at = next(c for c in cells if c["n"] == 20_000)
            print(
                f"gs-curve {pname:16s} {name:17s} n=20000: q90 error {at['error_q90']:.4f} "
                f"max {at['error_max']:.4f} success {at['success_rate']:.2f}",
                flush=True,
            )
        out[pname] = entry
    return out


def _uniform_error(h: Any, target: Any) -> float:
    """Exact error under the uniform marginal, from the run-length forms (no truth table)."""
    n = h.domain_size
    cuts = sorted({0, n, *h.change_points()[1], *target.change_points()[1]})
    return sum(b - a for a, b in itertools.pairwise(cuts) if h.predict(a) != target.predict(a)) / n


def proper_large(runs: int, seed: int) -> dict[str, Any]:
    """The proper learner at n = 20,000 on intervals:65536 and thresholds:2^32: time, error, properness."""
    from privstream.learning.hypotheses import hypothesis_from_runs
    from privstream.learning.private_learners.proper.structured_selection import coordinates

    out: dict[str, Any] = {}
    for spec, first, changes in (
        ("intervals:65536", 0, (16384, 40960)),
        ("thresholds:4294967296", 0, (1234567890,)),
    ):
        hclass = parse_class_spec(spec)
        truth = hypothesis_from_runs(hclass.domain_size, first, changes)
        entry: dict[str, Any] = {}
        for mode, expected in (("public n", None), ("private n (expected_size=20000)", 20_000)):
            rows = []
            for r in range(runs):
                xs = np.random.default_rng(seed + r).integers(0, hclass.domain_size, 20_000)
                start = time.perf_counter()
                res = make_learner("proper").fit(
                    hclass,
                    xs,
                    truth.predict(xs),
                    epsilon=1.0,
                    delta=DELTA,
                    alpha=ALPHA,
                    beta=BETA,
                    rng=seeded(seed + r),
                    expected_size=expected,
                )
                seconds = time.perf_counter() - start
                rows.append(
                    {
                        "seconds": seconds,
                        "error": _uniform_error(res.hypothesis, truth),
                        "proper": bool(res.proper and coordinates(hclass, res.hypothesis) is not None),
                    }
                )
            entry[mode] = {
                "runs": rows,
                "seconds_max": max(r["seconds"] for r in rows),
                "error_max": max(r["error"] for r in rows),
                "all_proper": all(r["proper"] for r in rows),
                "parameters": {k: v for k, v in res.parameters.items() if k != "constants"},
            }
            print(
                f"proper-large {spec:22s} {mode:32s} max {entry[mode]['seconds_max']:.2f} s, "
                f"max error {entry[mode]['error_max']:.5f}, proper {entry[mode]['all_proper']}",
                flush=True,
            )
        out[spec] = entry
    return out


def proper_scale(seed: int, sizes: tuple[int, ...] = (10**5, 10**6, 10**7)) -> dict[str, Any]:
    """The proper learner against n on intervals:2^32 (target ``[10^9, 3·10^9)``), one run per n,
    beside the generic learner (its O(n log n) interval sampler) on the same data: fit seconds and
    exact error."""
    from privstream.learning.hypotheses import hypothesis_from_runs

    hclass = parse_class_spec("intervals:4294967296")
    truth = hypothesis_from_runs(hclass.domain_size, 0, (10**9, 3 * 10**9))
    rows = []
    for n in sizes:
        xs = np.random.default_rng(seed + n).integers(0, hclass.domain_size, n)
        row: dict[str, Any] = {"n": n}
        for name in ("proper", "generic"):
            start = time.perf_counter()
            res = make_learner(name).fit(
                hclass,
                xs,
                truth.predict(xs),
                epsilon=1.0,
                delta=DELTA,
                alpha=ALPHA,
                beta=BETA,
                rng=seeded(seed),
            )
            seconds = time.perf_counter() - start
            row[name] = {"seconds": seconds, "error": _uniform_error(res.hypothesis, truth)}
        row["proper_over_generic_time"] = row["proper"]["seconds"] / row["generic"]["seconds"]
        proper = row["proper"]
        print(
            f"proper-scale n={n}: proper {proper['seconds']:.2f} s (error {proper['error']:.2e}), "
            f"generic {row['generic']['seconds']:.2f} s",
            flush=True,
        )
        rows.append(row)
    return {"class": hclass.spec, "target": [10**9, 3 * 10**9], "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slow-runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per fit of a slow learner")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--only",
        default="table,gs-curve,proper-large,proper-scale",
        help="comma-separated parts: table, gs-curve, proper-large, proper-scale",
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {}
    if "gs-curve" in parts:
        extra["gs_curve"] = gs_curve(args.runs, args.seed)
        plot_gs_curve(extra["gs_curve"], args.out / "bench_gs_curve.png")
    if "proper-large" in parts:
        extra["proper_large"] = proper_large(args.runs, args.seed)
    if "proper-scale" in parts:
        extra["proper_scale"] = proper_scale(args.seed)
    if "table" not in parts:
        results = {
            "setting": {
                "alpha": ALPHA,
                "beta": BETA,
                "delta": DELTA,
                "runs": args.runs,
                "seed": args.seed,
                "python": platform.python_version(),
            },
            **extra,
        }
        (args.out / "bench_private_learners.json").write_text(json.dumps(results, indent=1))
        print(json.dumps(results))
        return
    learners = ["erm", "generic", "global-stability"] + (["proper"] if "proper" in LEARNERS else [])
    results: dict[str, Any] = {
        "setting": {
            "alpha": ALPHA,
            "beta": BETA,
            "delta": DELTA,
            "ns": NS,
            "extra_ns": EXTRA_NS,
            "epsilons": EPSILONS,
            "eps_n": EPS_N,
            "runs": args.runs,
            "slow_runs": args.slow_runs,
            "timeout_s": args.timeout,
            "seed": args.seed,
            "python": platform.python_version(),
        },
        "problems": {},
    }
    for prob in problems(args.seed):
        pname, hclass, _, _ = prob
        d = hclass.version_space().ldim()
        entry: dict[str, Any] = {"class_size": hclass.size, "ldim": d, "learners": {}}
        for name in learners:
            runs = args.slow_runs if name in SLOW else args.runs
            by_n, smallest, stop = [], None, False
            for n in SLOW_NS if name in SLOW else NS + EXTRA_NS:
                if n in EXTRA_NS and smallest is not None:
                    break
                if stop:
                    break
                c = cell(name, prob, n, 1.0, runs, args.timeout, args.seed)
                by_n.append(c)
                stop = "failure" in c  # a timeout or an error at n: larger n would not do better
                if smallest is None and "failure" not in c and c.get("success_rate", 0) >= 0.9:
                    smallest = n
            by_eps = (
                []
                if name == "erm" or name in SLOW
                else [cell(name, prob, EPS_N, e, runs, args.timeout, args.seed) for e in EPSILONS]
            )
            theory = theory_n(name, hclass, d)
            ratio = None
            if smallest is not None and theory.get("log10") is not None and name != "erm":
                ratio = round(math.log10(smallest) - theory["log10"], 3)
            entry["learners"][name] = {
                "error_vs_n": by_n,
                "error_vs_epsilon": by_eps,
                "smallest_n_alpha_0.1_w.p._0.9": smallest,
                "theory_n": theory,
                "log10_practical_over_theory_n": ratio,
            }
            print(
                f"{pname:16s} {name:17s} smallest n {smallest} theory log10 {theory.get('log10')}", flush=True
            )
        gen_t = {c["n"]: c.get("seconds_mean") for c in entry["learners"]["generic"]["error_vs_n"]}
        for rec in entry["learners"].values():
            rec["time_ratio_vs_generic"] = {
                c["n"]: round(c["seconds_mean"] / gen_t[c["n"]], 2)
                for c in rec["error_vs_n"]
                if c.get("seconds_mean") and gen_t.get(c["n"])
            }
        results["problems"][pname] = entry
    results.update(extra)
    (args.out / "bench_private_learners.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results))
    plot(results, args.out / "bench_private_learners.png")


def plot(results: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    probs = results["problems"]
    colours = {
        "erm": "tab:blue",
        "generic": "tab:orange",
        "global-stability": "tab:green",
        "proper": "tab:red",
    }
    fig, axes = plt.subplots(len(probs), 2, figsize=(11, 3.2 * len(probs)), squeeze=False)
    for row, (pname, entry) in enumerate(probs.items()):
        for name, rec in entry["learners"].items():
            pts = [(c["n"], c["error_q90"]) for c in rec["error_vs_n"] if "error_q90" in c]
            if pts:
                axes[row][0].plot(*zip(*pts, strict=True), marker="o", label=name, color=colours.get(name))
            pts = [(c["epsilon"], c["error_q90"]) for c in rec["error_vs_epsilon"] if "error_q90" in c]
            if pts:
                axes[row][1].plot(*zip(*pts, strict=True), marker="o", label=name, color=colours.get(name))
        for col, (xlabel, title) in enumerate((("n (ε = 1)", "error vs n"), ("ε (n = 10^4)", "error vs ε"))):
            ax = axes[row][col]
            ax.set_xscale("log")
            ax.axhline(ALPHA, color="grey", lw=0.8, ls="--")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("0.9-quantile error")
            ax.set_title(f"{pname} (Ldim {entry['ldim']}): {title}")
            ax.legend(fontsize=7)
        axes[row][1].set_xticks(list(EPSILONS), [f"{e:g}" for e in EPSILONS])
        axes[row][1].minorticks_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_gs_curve(curve: dict[str, Any], path: Path) -> None:
    """Error (0.9-quantile, with the mean dashed) against n: global-stability vs generic, per class."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(curve), figsize=(5 * len(curve), 3.6), squeeze=False)
    colours = {"global-stability": "tab:green", "generic": "tab:orange"}
    for ax, (pname, entry) in zip(axes[0], curve.items(), strict=True):
        for name, cells in entry.items():
            ns = [c["n"] for c in cells]
            colour = colours[name]
            ax.plot(ns, [c["error_q90"] for c in cells], marker="o", color=colour, label=f"{name} (q90)")
            ax.plot(ns, [c["error_mean"] for c in cells], ls="--", color=colour, label=f"{name} (mean)")
        ax.axhline(ALPHA, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("n (ε = 1, δ = 1e-6)")
        ax.set_ylabel("population error")
        ax.set_title(pname)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
