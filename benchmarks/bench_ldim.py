"""Exact Littlestone dimension of file classes: bitset search vs a plain memoised recursion.

Run:  .venv/bin/python benchmarks/bench_ldim.py [--timeout 300] [--random-classes 3]
Prints one JSON object. For each workload: the Ldim, the bitset search's time (fresh memo,
best of --repeats), the reference recursion's time (the Littlestone recursion memoised on frozensets,
``littlestone_dimension_reference``) and the speed-up. A reference run that exceeds
--timeout seconds is stopped; its speed-up is then reported as a lower bound (">=").

Workloads: thresholds:128 and intervals:24 given as matrices, intervals:12 and :16 (where
the reference finishes quickly), and random classes with |H| = 256, |X| = 16.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import time

import numpy as np

from privstream.learning.dimensions import littlestone_dimension_reference
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.hypothesis_classes.bitset_search import BitsetClass, columns_from_matrix


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def fast_ldim(matrix: np.ndarray) -> int:
    rows = np.unique(matrix.astype(bool), axis=0)
    bs = BitsetClass(columns_from_matrix(rows), rows.shape[0])
    return bs.ldim(bs.full)


def reference_with_timeout(matrix: np.ndarray, timeout: float) -> tuple[int | None, float]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    t0 = time.perf_counter()
    try:
        return littlestone_dimension_reference(matrix), time.perf_counter() - t0
    except _Timeout:
        return None, time.perf_counter() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def bench(name: str, matrix: np.ndarray, timeout: float, repeats: int) -> dict:
    t_fast = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        d = fast_ldim(matrix)
        t_fast = min(t_fast, time.perf_counter() - t0)
    ref, t_ref = reference_with_timeout(matrix, timeout)
    if ref is not None:
        assert ref == d, (name, ref, d)
    speedup = t_ref / t_fast
    return {
        "workload": name,
        "hypotheses": int(np.unique(matrix, axis=0).shape[0]),
        "domain": matrix.shape[1],
        "ldim": d,
        "bitset_s": round(t_fast, 5),
        "reference_s": round(t_ref, 3) if ref is not None else f">= {timeout} (stopped)",
        "speedup": round(speedup, 1) if ref is not None else f">= {round(speedup, 1)}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per reference run")
    ap.add_argument("--random-classes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    workloads = [
        (spec, parse_class_spec(spec).matrix())
        for spec in ("thresholds:128", "intervals:12", "intervals:16", "intervals:24")
    ]
    workloads += [
        (f"random 256x16 #{i}", rng.integers(0, 2, (256, 16)).astype(bool))
        for i in range(args.random_classes)
    ]
    results = [bench(name, m, args.timeout, args.repeats) for name, m in workloads]
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "numpy": np.__version__,
                "timeout_s": args.timeout,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
