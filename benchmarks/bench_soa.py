"""SOA throughput: batch vs one example at a time, on thresholds:2^32 and on a file class.

Run:  .venv/bin/python benchmarks/bench_soa.py [--examples 1000000] [--seed 0]
Prints one JSON object. Figures: examples per second (best of --repeats runs) and ratios.

* ``thresholds``: 10^6 examples labelled by a random threshold on 2^32 points (uniform x):
  ``learn_many`` (vectorised prefix max/min) vs ``learn_one`` in a loop (O(1) Python ints)
  vs a plain per-example SOA written directly from the definition (version space as the
  range of cuts, Ldim by ``floor(log2)`` of the counts; the baseline).
* ``file_class``: a random class with |H| = 1024, |X| = 64 and a realizable stream; the SOA
  is warmed up on one pass (the Ldim memo fills), then timed on fresh SOAs over new streams.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Callable

import numpy as np

from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.soa import SOA


class PlainThresholdSOA:
    """The SOA for thresholds written plainly from its definition (baseline)."""

    def __init__(self, n: int, tie: int = 1) -> None:
        self.lo, self.hi, self.tie, self.mistakes = 0, n, tie, 0

    def learn_one(self, x: int, y: int) -> int:
        ones = max(0, min(x, self.hi) - self.lo + 1)  # cuts t <= x
        zeros = (self.hi - self.lo + 1) - ones
        l1 = math.floor(math.log2(ones)) if ones else -1
        l0 = math.floor(math.log2(zeros)) if zeros else -1
        p = 1 if l1 > l0 else 0 if l1 < l0 else self.tie
        self.mistakes += p != y
        if y:
            self.hi = min(self.hi, x)
        else:
            self.lo = max(self.lo, x + 1)
        return p


def best_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_thresholds(n_examples: int, seed: int, repeats: int) -> dict:
    n = 2**32
    cls = parse_class_spec("thresholds:2^32")
    rng = np.random.default_rng(seed)
    target = int(rng.integers(0, n + 1))
    xs = rng.integers(0, n, n_examples, dtype=np.int64)
    ys = (xs >= target).astype(np.uint8)
    xl, yl = xs.tolist(), ys.tolist()

    def batch() -> SOA:
        soa = SOA(cls)
        soa.learn_many(xs, ys)
        return soa

    def one() -> SOA:
        soa = SOA(cls)
        learn = soa.learn_one
        for x, y in zip(xl, yl, strict=True):
            learn(x, y)
        return soa

    def plain() -> PlainThresholdSOA:
        soa = PlainThresholdSOA(n)
        for x, y in zip(xl, yl, strict=True):
            soa.learn_one(x, y)
        return soa

    a, b, c = batch(), one(), plain()
    assert a.mistakes == b.mistakes == c.mistakes and a.state_dict() == b.state_dict()
    t_batch, t_one, t_plain = (best_time(f, repeats) for f in (batch, one, plain))
    return {
        "class": cls.spec,
        "examples": n_examples,
        "mistakes": a.mistakes,
        "mistake_bound": a.mistake_bound,
        "batch_examples_per_s": round(n_examples / t_batch),
        "learn_one_examples_per_s": round(n_examples / t_one),
        "plain_python_soa_examples_per_s": round(n_examples / t_plain),
        "batch_vs_plain": round(t_plain / t_batch, 1),
        "batch_vs_learn_one": round(t_one / t_batch, 1),
        "learn_one_vs_plain": round(t_plain / t_one, 2),
    }


def bench_file_class(n_examples: int, seed: int, repeats: int) -> dict:
    rng = np.random.default_rng(seed)
    cls = FiniteClass(rng.integers(0, 2, (1024, 64)), spec="random-1024x64")

    def stream(s: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.random.default_rng(s)
        target = cls.hypothesis(int(r.integers(0, cls.size))).truth_table()
        xs = r.integers(0, 64, n_examples)
        return xs, target[xs].astype(np.uint8)

    t0 = time.perf_counter()
    soa = SOA(cls)  # the class Ldim: fills the memo from the top
    soa.learn_many(*stream(seed))
    warm_up_s = time.perf_counter() - t0
    streams = [stream(seed + 1 + i) for i in range(repeats)]
    t_one = t_batch = math.inf
    mistakes = []
    for xs, ys in streams:
        xl, yl = xs.tolist(), ys.tolist()
        s1 = SOA(cls)
        t = time.perf_counter()
        for x, y in zip(xl, yl, strict=True):
            s1.learn_one(x, y)
        t_one = min(t_one, time.perf_counter() - t)
        s2 = SOA(cls)
        t = time.perf_counter()
        s2.learn_many(xs, ys)
        t_batch = min(t_batch, time.perf_counter() - t)
        assert s1.state_dict() == s2.state_dict() and s1.mistakes <= s1.mistake_bound
        mistakes.append(s1.mistakes)
    return {
        "class": f"random |H|=1024 (distinct rows: {cls.size}), |X|=64",
        "examples": n_examples,
        "mistake_bound": soa.mistake_bound,
        "mistakes": mistakes,
        "warm_up_s": round(warm_up_s, 2),
        "learn_one_examples_per_s": round(n_examples / t_one),
        "batch_examples_per_s": round(n_examples / t_batch),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1_000_000)
    ap.add_argument("--file-examples", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "thresholds": bench_thresholds(args.examples, args.seed, args.repeats),
        "file_class": bench_file_class(args.file_examples, args.seed, args.repeats),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
