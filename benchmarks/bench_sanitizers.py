"""Sanitizers side by side: our MWEM vs smartnoise-synth's MWEM vs a Laplace histogram over the domain.

Run:  .venv/bin/python benchmarks/bench_sanitizers.py [--n 10000] [--seed 0] [--peer-max-bits 16] [--quick]
Prints one JSON object and writes benchmarks/results/bench_sanitizers.{json,png}.

Workload: n = 10,000 points of a discretised normal (mean 0.4·N, sd 0.08·N) on domains N = 2^10, 2^16,
2^20, ε in {0.5, 1, 2} (pure DP, replace-one). Queries: *all* thresholds ``1[x >= t]`` (N+1) and *all*
intervals ``[a, b)`` (N(N+1)/2 + 1). Figures: max and mean |answer - true fraction| over each class,
and wall time of the release (fit).

* ``ours``: :class:`privstream.learning.sanitizers.mwem.MWEMSanitizer` (T = 20, 50 replays), one
  release per query class (its selection runs over that class); errors by
  :func:`~privstream.learning.sanitizers.evaluation.class_errors` (exact over the class); mean of
  --our-seeds runs (default 3; per-seed maxima in the JSON). The peers run once per setting.
* ``laplace_histogram``: the baseline -- Laplace(2/ε) on every cell of the dense N-cell histogram
  (replace-one ℓ1 sensitivity 2), answers = prefix sums / n. Benchmark-only: numpy float noise,
  not a secure mechanism; it answers both classes from one release.
* ``smartnoise``: ``snsynth.mwem.MWEMSynthesizer(epsilon, split_factor=1, iterations=20,
  add_ranges=True)`` on a one-column DataFrame; one release answers both classes (its released
  histogram, decoded as its ``sample`` does, without sampling noise). Two configurations:
  ``smartnoise`` gets a ``TableTransformer([LabelTransformer()])`` fitted on the PUBLIC domain
  ``0..N-1`` (the fair, private way to call it; it still sizes its histogram from the data's
  min..max); ``smartnoise_data_domain`` is its default (categories inferred from the private data,
  smartnoise-sdk issue #473): its cells are the distinct observed values, so its starting
  distribution already follows the data -- reported for reference, not a private release. Both use
  Python ``random``/numpy selection and float Laplace noise. Its dense histogram is sized by the
  domain, so it runs for N <= 2^--peer-max-bits (default 16; the public-domain run at 2^20 is
  reported as not run with its reason).

Benchmark-only installs (into .venv, not runtime dependencies): ``pip install --no-deps
smartnoise-synth smartnoise-sql`` plus ``"pandas<3" pyyaml sqlalchemy faker scipy
"antlr4-python3-runtime==4.9.3" "opendp>=0.14.1,<0.15"`` (as in dp_landscape.md; without scipy the
peer does not import), and ``matplotlib`` for the plot.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers import make_sanitizer
from privstream.learning.sanitizers.evaluation import class_errors

RESULTS = Path(__file__).with_name("results")


def make_data(bits: int, n: int, seed: int) -> np.ndarray:
    big_n = 2**bits
    rs = np.random.default_rng(seed)
    return np.clip(rs.normal(0.4 * big_n, 0.08 * big_n, n).astype(np.int64), 0, big_n - 1)


def dense_errors(xs: np.ndarray, mass: np.ndarray) -> dict[str, float]:
    """Max/mean errors over all thresholds and intervals of a dense answer vector (per-cell masses)."""
    big_n = mass.shape[0]
    n = xs.shape[0]
    true_cdf = np.concatenate([[0.0], np.cumsum(np.bincount(xs, minlength=big_n))]) / n
    syn_cdf = np.concatenate([[0.0], np.cumsum(mass)])
    d = true_cdf - syn_cdf  # error of [a, b) is d(b) - d(a); of 1[x >= t] it is d(N) - d(t)
    thr = np.abs(d[-1] - d)
    g = np.sort(d)
    m = g.shape[0]
    pairs = float(g @ (2 * np.arange(m) - m + 1))
    return {
        "thresholds_max": float(thr.max()), "thresholds_mean": float(thr.mean()),
        "intervals_max": float(d.max() - d.min()), "intervals_mean": pairs / (big_n * (big_n + 1) / 2 + 1),
    }


def run_ours(bits: int, xs: np.ndarray, eps: float, seeds: list[int]) -> dict[str, Any]:
    """Mean over ``seeds`` (its run-to-run spread is reported too: one run is a noisy figure)."""
    runs: list[dict[str, float]] = []
    for seed in seeds:
        out: dict[str, float] = {}
        total = 0.0
        for cls in ("thresholds", "intervals"):
            hclass = parse_class_spec(f"{cls}:2^{bits}")
            t0 = time.perf_counter()
            res = make_sanitizer("mwem").fit(hclass, xs, epsilon=eps, rng=seeded(seed))
            elapsed = time.perf_counter() - t0
            total += elapsed
            mx, mean = class_errors(hclass, res.distribution, xs)
            out[f"{cls}_max"], out[f"{cls}_mean"], out[f"{cls}_seconds"] = mx, mean, elapsed
            out[f"{cls}_blocks"] = res.distribution.num_blocks
        out["seconds"] = total
        runs.append(out)
    summary: dict[str, Any] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    summary["thresholds_max_per_seed"] = [r["thresholds_max"] for r in runs]
    summary["intervals_max_per_seed"] = [r["intervals_max"] for r in runs]
    return summary


def run_laplace(bits: int, xs: np.ndarray, eps: float, seed: int) -> dict[str, float]:
    t0 = time.perf_counter()
    hist = np.bincount(xs, minlength=2**bits).astype(np.float64)
    noisy = hist + np.random.default_rng(seed).laplace(0.0, 2.0 / eps, hist.shape[0])
    mass = noisy / xs.shape[0]
    elapsed = time.perf_counter() - t0
    return {**dense_errors(xs, mass), "seconds": elapsed}


def peer_mass(synth: Any, bits: int) -> np.ndarray:
    """The peer's released histogram mapped back to domain points (its own decoding, as in ``sample``)."""
    fake, _, split = synth.synthetic_histograms[0]
    weights = np.ravel(fake).astype(np.float64)
    key = str(split[0])
    cells = np.arange(weights.shape[0])[:, None] * synth.scale[key] + synth.mins_maxes[key][0]
    values = np.asarray(synth._transformer.inverse_transform(cells)["x"], dtype=np.int64)
    mass = np.zeros(2**bits)
    np.add.at(mass, values, weights)
    return mass / weights.sum()


def run_smartnoise(bits: int, xs: np.ndarray, eps: float, seed: int, public_domain: bool) -> dict[str, Any]:
    try:
        import pandas as pd
        from snsynth.mwem import MWEMSynthesizer
        from snsynth.transform import TableTransformer
        from snsynth.transform.label import LabelTransformer
    except Exception as exc:
        return {"status": f"not run: cannot import smartnoise-synth ({type(exc).__name__}: {exc})"}
    import random

    random.seed(seed)
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            transformer = None
            if public_domain:  # categories from the public domain, not from the data
                transformer = TableTransformer([LabelTransformer(nullable=False)])
                transformer.fit(pd.DataFrame({"x": np.arange(2**bits)}))
            t0 = time.perf_counter()
            synth = MWEMSynthesizer(epsilon=eps, split_factor=1, iterations=20, add_ranges=True)
            if transformer is None:
                synth.fit(pd.DataFrame({"x": xs}), categorical_columns=["x"])
            else:
                synth.fit(pd.DataFrame({"x": xs}), transformer=transformer)
            fit_seconds = time.perf_counter() - t0
            mass = peer_mass(synth, bits)
    except Exception as exc:
        return {"status": f"failed: {type(exc).__name__}: {str(exc)[:200]}"}
    cells = int(np.ravel(synth.synthetic_histograms[0][0]).shape[0])
    return {**dense_errors(xs, mass), "seconds": fit_seconds, "status": "ok", "cells": cells}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bits", type=int, nargs="+", default=[10, 16, 20])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--peer-max-bits", type=int, default=16)
    parser.add_argument("--our-seeds", type=int, default=3, help="runs of ours per setting (mean reported)")
    parser.add_argument("--quick", action="store_true", help="2^10 and 2^16 at ε = 1 only")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.bits, args.epsilons = [10, 16], [1.0]
    rows = []
    for bits in args.bits:
        xs = make_data(bits, args.n, args.seed)
        for eps in args.epsilons:
            row: dict[str, Any] = {"domain": f"2^{bits}", "bits": bits, "epsilon": eps, "n": args.n}
            row["ours"] = run_ours(bits, xs, eps, list(range(args.seed, args.seed + args.our_seeds)))
            row["laplace_histogram"] = run_laplace(bits, xs, eps, args.seed)
            if bits <= args.peer_max_bits:
                row["smartnoise"] = run_smartnoise(bits, xs, eps, args.seed, public_domain=True)
            else:
                row["smartnoise"] = {"status": f"not run: its dense histogram over the public domain has "
                                               f"{2**bits:,} cells (--peer-max-bits {args.peer_max_bits})"}
            row["smartnoise_data_domain"] = run_smartnoise(bits, xs, eps, args.seed, public_domain=False)
            ratios: dict[str, float] = {}
            for peer in ("smartnoise", "smartnoise_data_domain", "laplace_histogram"):
                other = row[peer]
                if "thresholds_max" not in other:
                    continue
                for key in ("thresholds_max", "thresholds_mean", "intervals_max", "intervals_mean"):
                    ratios[f"{peer}/ours {key}"] = other[key] / row["ours"][key]
                ratios[f"{peer}/ours seconds"] = other["seconds"] / row["ours"]["seconds"]
            row["ratios"] = ratios
            rows.append(row)
            print(json.dumps({"progress": row["domain"], "epsilon": eps,
                              "ours_thresholds_max": row["ours"]["thresholds_max"],
                              "ours_seconds": row["ours"]["seconds"]}), flush=True)
    result = {"benchmark": "sanitizers", "python": platform.python_version(), "machine": platform.machine(),
              "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_sanitizers.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    if not args.no_plot:
        plot(rows, RESULTS / "bench_sanitizers.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    methods = [("ours", "ours (MWEM, blocks)", "C0"), ("smartnoise", "smartnoise-synth MWEM", "C3"),
               ("smartnoise_data_domain", "smartnoise, data-derived domain (leaks)", "C1"),
               ("laplace_histogram", "Laplace histogram", "C2")]
    for ax, (key, title) in zip(axes[:2], (("thresholds_max", "max error, all thresholds"),
                                           ("intervals_max", "max error, all intervals")), strict=True):
        for m, label, colour in methods:
            for bits, marker in ((10, "o"), (16, "s"), (20, "^")):
                pts = [(r["epsilon"], r[m][key]) for r in rows if r["bits"] == bits and key in r[m]]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker=marker, color=colour,
                            label=f"{label}, 2^{bits}", alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_title(title)
    axes[0].legend(fontsize=6)
    ax = axes[2]
    for m, label, colour in methods:
        pts = [(r["bits"], r[m]["seconds"]) for r in rows if r["epsilon"] == 1.0 and "seconds" in r[m]]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", color=colour, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("log2 N")
    ax.set_title("release time (s), ε = 1")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
