"""Sanitizers side by side: hierarchical, MWEM and fooling (ours), smartnoise-synth MWEM, a Laplace histogram.

Run:  .venv/bin/python benchmarks/bench_sanitizers.py [--out DIR] [--seeds 5] [--quick] [--no-plot]
Prints JSON lines of progress, then one JSON object; writes ``DIR/bench_sanitizers.json`` and
``DIR/bench_sanitizers.png`` (default DIR: ``benchmarks/results``, ignored by git).

Workloads (n points, clipped to ``{0..N-1}``): ``skewed`` = lognormal with median 0.05·N and σ = 1;
``bimodal`` = 0.6·Normal(0.3N, 0.04N) + 0.4·Normal(0.7N, 0.06N). Queries: *all* thresholds
``1[x >= t]`` (N+1) and *all* intervals ``[a, b)`` (N(N+1)/2 + 1); the figure of a release is its
maximum |answer - true fraction| over each class (exact, by
:func:`~privstream.learning.sanitizers.evaluation.class_errors` or a dense scan). Pure ε-DP,
replace-one (n public) for ours; the fooling sanitizer needs δ > 0 and runs at δ = 1e-6.

Sections:

* ``targets``: n = 10,000, ε = 1, both workloads at 2^16 and 2^32. ``hierarchical`` is
  one release per seed (the same release answers thresholds and intervals); ``mwem`` one release
  per seed and class (its selection runs over the class). Ours: mean over ``--seeds`` seeded
  releases (per-seed maxima in the JSON). ``ratios`` divide hierarchical's mean error by the
  others'; ``checks`` test the issue's targets (<= 0.008, <= 0.6 of MWEM and of smartnoise, < 2 s).
* ``vs_epsilon``: ε in 0.1 ... 10 at 2^16, n = 10,000, every sanitizer, both workloads.
* ``vs_n``: n in 10^3 ... 10^6 at 2^16, ε = 1, every sanitizer, bimodal. A sanitizer whose release
  took longer than ``--time-budget`` seconds is not run at larger n (the JSON says so).

Peers (benchmark only, not privstream dependencies):

* ``laplace_histogram``: Laplace(2/ε) on every cell of the dense N-cell histogram (replace-one ℓ1
  sensitivity 2), answers = prefix sums / n; numpy float noise, not a secure mechanism; dense, so
  run for N <= 2^20.
* ``smartnoise``: ``snsynth.mwem.MWEMSynthesizer(epsilon, split_factor=1, iterations=20,
  add_ranges=True)`` on a one-column DataFrame; one release answers both classes (its released
  histogram, decoded as its ``sample`` does, without sampling noise). ``smartnoise`` gets a
  ``TableTransformer([LabelTransformer()])`` fitted on the PUBLIC domain ``0..N-1`` (the fair, private
  way to call it); ``smartnoise_data_domain`` is its default (categories inferred from the private
  data, smartnoise-sdk issue #473; reported for reference, not a private release). Python
  ``random``/numpy selection and float Laplace noise. Its histogram is dense over the domain, so it
  runs for N <= 2^--peer-max-bits (default 16); the data-domain variant is scored densely (N <= 2^20).
  Some of its releases run for many minutes (its multiplicative-weights replay loops over every
  query of a selected family; with ``add_ranges`` a family can hold thousands): a release past
  ``--peer-timeout`` seconds is stopped and reported (``status``), the mean is over the others.

Install the peers into .venv (not runtime dependencies): ``pip install --no-deps smartnoise-synth
smartnoise-sql`` then ``pip install "pandas<3" pyyaml sqlalchemy faker scipy
"antlr4-python3-runtime==4.9.3" "opendp>=0.14.1,<0.15" matplotlib`` (without scipy the peer does
not import; matplotlib draws the figure).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import signal
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
CLASSES = ("thresholds", "intervals")
OURS = ("hierarchical", "mwem", "fooling")
FOOLING_DELTA = 1e-6


def make_data(kind: str, bits: int, n: int, seed: int) -> np.ndarray:
    """The workloads (the same as tests/learning/test_hierarchical_sanitizer.py)."""
    big_n = 2**bits
    rs = np.random.default_rng(seed)
    if kind == "skewed":
        x = rs.lognormal(math.log(0.05 * big_n), 1.0, n)
    elif kind == "bimodal":
        first = rs.random(n) < 0.6
        x = np.where(first, rs.normal(0.3 * big_n, 0.04 * big_n, n), rs.normal(0.7 * big_n, 0.06 * big_n, n))
    else:
        raise ValueError(f"unknown workload {kind!r}")
    return np.clip(x.astype(np.int64), 0, big_n - 1)


def dense_errors(xs: np.ndarray, mass: np.ndarray) -> dict[str, float]:
    """Max errors over all thresholds and intervals of a dense answer vector (per-cell masses)."""
    big_n = mass.shape[0]
    n = xs.shape[0]
    true_cdf = np.concatenate([[0.0], np.cumsum(np.bincount(xs, minlength=big_n))]) / n
    syn_cdf = np.concatenate([[0.0], np.cumsum(mass)])
    d = true_cdf - syn_cdf  # error of [a, b) is d(b) - d(a); of 1[x >= t] it is d(N) - d(t)
    return {"thresholds_max": float(np.abs(d[-1] - d).max()), "intervals_max": float(d.max() - d.min())}


def summarise(runs: list[dict[str, float]]) -> dict[str, Any]:
    """Means over runs, and the per-run maxima (one run is a noisy figure)."""
    out: dict[str, Any] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    for cls in CLASSES:
        out[f"{cls}_max_per_seed"] = [round(r[f"{cls}_max"], 6) for r in runs]
    out["runs"] = len(runs)
    return out


def run_ours(name: str, bits: int, xs: np.ndarray, eps: float, seeds: list[int]) -> dict[str, Any]:
    delta = FOOLING_DELTA if name == "fooling" else 0.0
    runs = []
    for seed in seeds:
        out: dict[str, float] = {}
        if name == "hierarchical":  # one release answers every class of the domain
            t0 = time.perf_counter()
            res = make_sanitizer(name).fit(
                parse_class_spec(f"thresholds:2^{bits}"), xs, epsilon=eps, rng=seeded(seed)
            )
            out["seconds"] = time.perf_counter() - t0
            out["blocks"] = res.distribution.num_blocks
            for cls in CLASSES:
                out[f"{cls}_max"] = class_errors(parse_class_spec(f"{cls}:2^{bits}"), res.distribution, xs)[0]
        else:
            out["seconds"] = 0.0
            for cls in CLASSES:
                hclass = parse_class_spec(f"{cls}:2^{bits}")
                t0 = time.perf_counter()
                res = make_sanitizer(name).fit(hclass, xs, epsilon=eps, delta=delta, rng=seeded(seed))
                out["seconds"] += time.perf_counter() - t0
                out[f"{cls}_max"] = class_errors(hclass, res.distribution, xs)[0]
                out[f"{cls}_blocks"] = res.distribution.num_blocks
        runs.append(out)
    summary = summarise(runs)
    summary["delta"] = delta
    return summary


def run_laplace(bits: int, xs: np.ndarray, eps: float, seed: int) -> dict[str, Any]:
    if bits > 20:
        return {"status": f"not run: a dense histogram of 2^{bits} cells"}
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


class PeerTimeout(Exception):
    """A peer's release ran past ``--peer-timeout``."""


def _alarm(signum: int, frame: Any) -> None:
    raise PeerTimeout


def run_smartnoise_once(
    bits: int, xs: np.ndarray, eps: float, seed: int, public_domain: bool, timeout: float
) -> dict[str, Any]:
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
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
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
    except PeerTimeout:
        return {"status": f"timed out after {timeout:g} s (--peer-timeout)", "seconds": timeout}
    except Exception as exc:
        return {"status": f"failed: {type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return {**dense_errors(xs, mass), "seconds": fit_seconds}


def run_smartnoise(
    bits: int,
    xs: np.ndarray,
    eps: float,
    seeds: list[int],
    public_domain: bool,
    max_bits: int,
    timeout: float,
) -> dict[str, Any]:
    if public_domain and bits > max_bits:
        return {
            "status": f"not run: its dense histogram over the public domain has {2**bits:,} cells "
            f"(--peer-max-bits {max_bits})"
        }
    if bits > 20:
        return {"status": f"not run: scored by a dense scan of 2^{bits} cells"}
    runs, problems = [], []
    for seed in seeds:
        out = run_smartnoise_once(bits, xs, eps, seed, public_domain, timeout)
        if "status" in out:
            if out["status"].startswith("not run"):
                return out
            problems.append(f"seed {seed}: {out['status']}")
        else:
            runs.append(out)
    if not runs:
        return {"status": "; ".join(problems)}
    return {**summarise(runs), "status": "ok" if not problems else "; ".join(problems)}


def run_all(
    bits: int, xs: np.ndarray, eps: float, args: argparse.Namespace, skip: dict[str, str] | None = None
) -> dict[str, Any]:
    """Every sanitizer on one (domain, data, ε); ``skip`` maps a name to why it is not run."""
    skip = skip or {}
    seeds = list(range(args.seed, args.seed + args.seeds))
    peer_seeds = list(range(args.seed, args.seed + args.peer_seeds))
    max_bits = args.peer_max_bits
    row: dict[str, Any] = {}
    runners = {
        **{name: (lambda name=name: run_ours(name, bits, xs, eps, seeds)) for name in OURS},
        "smartnoise": lambda: run_smartnoise(bits, xs, eps, peer_seeds, True, max_bits, args.peer_timeout),
        "smartnoise_data_domain": lambda: run_smartnoise(
            bits, xs, eps, peer_seeds, False, max_bits, args.peer_timeout
        ),
        "laplace_histogram": lambda: run_laplace(bits, xs, eps, args.seed),
    }
    for name, runner in runners.items():
        row[name] = {"status": skip[name]} if name in skip else runner()
    return row


def ratios(row: dict[str, Any]) -> dict[str, float]:
    """hierarchical / other, per class (< 1: hierarchical is better), and of the release times."""
    out: dict[str, float] = {}
    ours = row["hierarchical"]
    for other in ("mwem", "smartnoise", "smartnoise_data_domain", "laplace_histogram", "fooling"):
        if "thresholds_max" not in row.get(other, {}):
            continue
        for cls in CLASSES:
            out[f"hierarchical/{other} {cls}_max"] = ours[f"{cls}_max"] / row[other][f"{cls}_max"]
        out[f"hierarchical/{other} seconds"] = ours["seconds"] / row[other]["seconds"]
    return out


def checks(row: dict[str, Any]) -> dict[str, bool]:
    """The issue's targets on one setting of the ``targets`` section."""
    h = row["hierarchical"]
    out = {f"{cls}_max <= 0.008": h[f"{cls}_max"] <= 0.008 for cls in CLASSES}
    out["every release under 2 s"] = bool(h["seconds"] < 2.0)
    for other in ("mwem", "smartnoise"):
        if "thresholds_max" in row.get(other, {}):
            for cls in CLASSES:
                out[f"{cls}_max <= 0.6 x {other}"] = h[f"{cls}_max"] <= 0.6 * row[other][f"{cls}_max"]
    return out


def progress(section: str, row: dict[str, Any]) -> None:
    brief = {k: v for k, v in row.items() if not isinstance(v, dict)}
    for name in ("hierarchical", "mwem", "smartnoise"):
        if "thresholds_max" in row.get(name, {}):
            brief[name] = [
                round(row[name]["thresholds_max"], 5),
                round(row[name]["intervals_max"], 5),
                round(row[name]["seconds"], 3),
            ]
    print(json.dumps({"progress": section, **brief}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the JSON and the figure")
    parser.add_argument("--seed", type=int, default=0, help="first seed of the releases")
    parser.add_argument("--data-seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=5, help="seeded releases of ours per setting (mean)")
    parser.add_argument("--peer-seeds", type=int, default=3, help="runs of smartnoise per setting")
    parser.add_argument("--peer-max-bits", type=int, default=16)
    parser.add_argument(
        "--peer-timeout",
        type=float,
        default=60.0,
        help="a smartnoise release longer than this is stopped and reported as timed out",
    )
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0, 10.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument(
        "--time-budget",
        type=float,
        default=60.0,
        help="vs_n: a sanitizer slower than this (s per setting) is not run at larger n",
    )
    parser.add_argument("--quick", action="store_true", help="targets only, 3 seeds")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.peer_seeds = 3, 1
    result: dict[str, Any] = {
        "benchmark": "sanitizers",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seeds": args.seeds,
        "peer_seeds": args.peer_seeds,
    }

    targets = []
    for kind in ("skewed", "bimodal"):
        for bits in (16, 32):
            xs = make_data(kind, bits, 10_000, args.data_seed)
            row: dict[str, Any] = {
                "data": kind,
                "domain": f"2^{bits}",
                "bits": bits,
                "epsilon": 1.0,
                "n": 10_000,
            }
            row.update(run_all(bits, xs, 1.0, args))
            row["ratios"], row["checks"] = ratios(row), checks(row)
            progress("targets", row)
            targets.append(row)
    result["targets"] = targets

    if not args.quick:
        vs_eps = []
        for kind in ("skewed", "bimodal"):
            xs = make_data(kind, 16, 10_000, args.data_seed)
            for eps in args.epsilons:
                row = {"data": kind, "bits": 16, "epsilon": eps, "n": 10_000, **run_all(16, xs, eps, args)}
                progress("vs_epsilon", row)
                vs_eps.append(row)
        result["vs_epsilon"] = vs_eps

        vs_n = []
        slow: dict[str, str] = {}
        for n in args.sizes:
            xs = make_data("bimodal", 16, n, args.data_seed)
            row = {
                "data": "bimodal",
                "bits": 16,
                "epsilon": 1.0,
                "n": n,
                **run_all(16, xs, 1.0, args, dict(slow)),
            }
            for name, fig in row.items():
                if isinstance(fig, dict) and fig.get("seconds", 0.0) > args.time_budget and name not in slow:
                    slow[name] = (
                        f"not run: {fig['seconds']:.0f} s at n = {n:,} exceeded the time budget "
                        f"({args.time_budget:g} s)"
                    )
            progress("vs_n", row)
            vs_n.append(row)
        result["vs_n"] = vs_n

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_sanitizers.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    if not args.no_plot:
        plot(result, args.out / "bench_sanitizers.png")


STYLE = {
    "hierarchical": ("hierarchical (ours)", "C0"),
    "mwem": ("MWEM (ours)", "C1"),
    "smartnoise": ("smartnoise-synth MWEM", "C3"),
    "laplace_histogram": ("Laplace histogram", "C2"),
    "fooling": ("fooling (ours, δ = 1e-6)", "C4"),
    "smartnoise_data_domain": ("smartnoise, data-derived domain (leaks)", "C7"),
}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    sweeps = [("vs_epsilon", "epsilon", "ε (2^16, n = 10,000)"), ("vs_n", "n", "n (2^16, ε = 1, bimodal)")]
    for ax, (section, key, label) in zip(axes[0], sweeps, strict=True):
        rows = [r for r in result.get(section, []) if r["data"] == "bimodal"]
        for name, (title, colour) in STYLE.items():
            for cls, line in (("intervals", "-"), ("thresholds", ":")):
                pts = [(r[key], r[name][f"{cls}_max"]) for r in rows if f"{cls}_max" in r[name]]
                if pts:
                    ax.plot(
                        *zip(*pts, strict=True),
                        line,
                        marker="o",
                        color=colour,
                        ms=3,
                        label=f"{title}, {cls}" if cls == "intervals" else None,
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_title(f"max error (intervals solid, thresholds dotted), {section.replace('_', ' ')}")
    axes[0, 0].legend(fontsize=7)
    ax = axes[1, 0]
    targets = result["targets"]
    names = [
        n for n in ("hierarchical", "mwem", "smartnoise") if any("intervals_max" in r[n] for r in targets)
    ]
    width = 0.8 / (2 * len(names))
    for i, name in enumerate(names):
        for j, cls in enumerate(CLASSES):
            xs = [k + (2 * i + j) * width for k in range(len(targets))]
            ys = [r[name].get(f"{cls}_max", 0.0) for r in targets]
            ax.bar(
                xs,
                ys,
                width,
                color=STYLE[name][1],
                alpha=1.0 if cls == "intervals" else 0.5,
                label=f"{STYLE[name][0]}, {cls}",
            )
    ax.axhline(0.008, color="k", ls="--", lw=1, label="target 0.008")
    ax.set_xticks(
        [k + 0.4 - width / 2 for k in range(len(targets))], [f"{r['data']}, {r['domain']}" for r in targets]
    )
    ax.set_yscale("log")
    ax.set_title("targets: n = 10,000, ε = 1 (mean of seeded releases)")
    ax.legend(fontsize=7)
    ax = axes[1, 1]
    rows = result.get("vs_n", [])
    for name, (title, colour) in STYLE.items():
        pts = [(r["n"], r[name]["seconds"]) for r in rows if "seconds" in r[name]]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", color=colour, label=title)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (2^16, ε = 1)")
    ax.set_title("release time (s): hierarchical one release, MWEM and fooling one per class")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
