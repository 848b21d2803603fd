"""The generic private learner: exact blocks, exact privacy, the sampler, accuracy, errors."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, parse_class_spec
from privstream.learning.private_learners import blocks as levels_module
from privstream.learning.private_learners import (
    error_levels,
    generic_sample_size,
)
from tests.learning.conftest import small_matrices

STRUCTURED = ("thresholds", "points", "intervals")


def brute_errors(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> list[int]:
    """Errors of every row of the class's truth table (the reference)."""
    return [int((row[xs].astype(np.uint8) != ys).sum()) for row in hclass.matrix()]


def assert_levels_exact(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> None:
    """Counts equal brute force, and each level's member map lists exactly its hypotheses once."""
    levels = error_levels(hclass, xs, ys)
    errs = brute_errors(hclass, xs, ys)
    ref = Counter(errs)
    assert levels.counts == tuple(ref.get(e, 0) for e in range(len(xs) + 1))
    assert levels.class_size == hclass.size
    by_level: dict[int, set] = {}
    for i, e in enumerate(errs):
        by_level.setdefault(e, set()).add(hclass.hypothesis(i))
    for e, count in enumerate(levels.counts):
        members = [levels.member(e, r) for r in range(count)]
        assert len(set(members)) == count
        assert set(members) == by_level.get(e, set())


@st.composite
def samples(draw, max_domain: int = 9, max_n: int = 7):
    """A domain size and a sample biased towards the edge points 0 and N-1 and duplicates."""
    n_dom = draw(st.integers(1, max_domain))
    point = st.one_of(st.just(0), st.just(n_dom - 1), st.integers(0, n_dom - 1))
    pairs = draw(st.lists(st.tuples(point, st.integers(0, 1)), max_size=max_n))
    xs = np.array([x for x, _ in pairs], dtype=np.int64)
    ys = np.array([y for _, y in pairs], dtype=np.uint8)
    return n_dom, xs, ys


# -- exact blocks -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STRUCTURED)
@settings(max_examples=150, deadline=None)
@given(data=samples())
def test_structured_levels_match_brute_force(kind, data) -> None:
    n_dom, xs, ys = data
    assert_levels_exact(parse_class_spec(f"{kind}:{n_dom}"), xs, ys)


@settings(max_examples=150, deadline=None)
@given(matrix=small_matrices(max_rows=20, max_cols=12), data=st.data())
def test_file_class_levels_match_brute_force(matrix, data) -> None:
    hclass = FiniteClass(matrix, spec="random")
    n_dom = hclass.domain_size
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n_dom - 1), st.integers(0, 1)), max_size=40))
    xs = np.array([x for x, _ in pairs], dtype=np.int64)
    ys = np.array([y for _, y in pairs], dtype=np.uint8)
    assert_levels_exact(hclass, xs, ys)


@pytest.mark.parametrize("spec", ["thresholds:5", "points:5", "intervals:5"])
def test_shared_functions_counted_once(spec) -> None:
    """All-zero (points) and empty (intervals) functions share a block with equal-error functions."""
    hclass = parse_class_spec(spec)
    xs = np.array([0, 4, 4, 2], dtype=np.int64)
    ys = np.array([0, 1, 0, 1], dtype=np.uint8)
    assert_levels_exact(hclass, xs, ys)
    empty = error_levels(hclass, xs[:0], ys[:0])  # n = 0: one level holding the whole class
    assert empty.counts == (hclass.size,)


def test_dense_fallback_for_other_classes() -> None:
    """A class that is neither structured nor a file class goes through its truth table."""

    class Parity(HypothesisClass):
        spec, domain_size, size = "parity:3", 8, 8

        def version_space(self):  # pragma: no cover - not needed here
            raise NotImplementedError

        def version_space_from_state(self, state):  # pragma: no cover
            raise NotImplementedError

        def hypothesis(self, index):
            from privstream.learning.hypotheses import hypothesis_from_table
            return hypothesis_from_table([bin(index & x).count("1") % 2 for x in range(8)])

    xs = np.array([1, 2, 3, 7, 7], dtype=np.int64)
    ys = np.array([1, 0, 1, 1, 0], dtype=np.uint8)
    assert_levels_exact(Parity(), xs, ys)


@pytest.mark.parametrize("kind", STRUCTURED)
@settings(max_examples=40, deadline=None)
@given(offsets=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1)), max_size=12),
       r_frac=st.fractions(0, 1))
def test_huge_domains_are_exact(kind, offsets, r_frac) -> None:
    """N = 2^64 + 3 (object arrays, Python ints): counts sum to |H|, members have their level's errors."""
    n_dom = 2**64 + 3
    hclass = parse_class_spec(f"{kind}:{n_dom}")
    pts = [min(n_dom - 1, (o * 2**58) if o % 2 else n_dom - 1 - o) for o, _ in offsets]
    xs = np.array(pts, dtype=object)
    ys = np.array([y for _, y in offsets], dtype=np.uint8)
    levels = error_levels(hclass, xs, ys)
    assert levels.class_size == hclass.size
    for e, count in levels.nonempty():
        for r in {0, count - 1, int(r_frac * (count - 1))}:
            h = levels.member(e, r)
            assert int((h.predict(xs).astype(np.uint8) != ys).sum()) == e


def test_interval_limb_path_equals_direct_path() -> None:
    """The 16-bit-limb summation (used when |H| >= 2^64) agrees with the plain uint64 sums."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        k = int(rng.integers(1, 30))
        size_a = rng.integers(0, 2**20, size=k + 1).astype(np.uint64)
        size_b = rng.integers(0, 2**20, size=k + 1).astype(np.uint64)
        walk = np.concatenate(([0], np.cumsum(rng.integers(-2, 3, size=k)))).astype(np.int64)
        spread = int(walk.max() - walk.min())  # |W[b] - W[a]| <= spread keeps levels in [0, n]
        ones, n = spread, 2 * spread
        direct = levels_module._pair_level_sums(size_a, size_b, walk, ones, n, class_size=2**50)
        limbs = levels_module._pair_level_sums(size_a, size_b, walk, ones, n, class_size=2**64)
        ref = [0] * (n + 1)
        for a, b in itertools.combinations(range(k + 1), 2):
            ref[ones - int(walk[b] - walk[a])] += int(size_a[a]) * int(size_b[b])
        assert direct == limbs == tuple(ref)


# -- sample size ------------------------------------------------------------------------------


def test_sample_size_matches_spec_example() -> None:
    assert generic_sample_size(1025, 0.25, 0.25, 1.0) == 289  # bayes_overview.md §A.3
    # Realizable ERM-style term dominates for eps >= 1/2; the EM term below.
    assert generic_sample_size(1025, 0.25, 0.25, 0.1) == math.ceil(16 * math.log(8 * 1025) / 0.1)


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1, 2**200), alpha=st.floats(0.01, 0.99), beta=st.floats(0.01, 0.99),
       eps=st.floats(0.01, 10))
def test_sample_size_is_the_derived_formula_and_monotone(size, alpha, beta, eps) -> None:
    n = generic_sample_size(size, alpha, beta, eps)
    log_term = math.log(2 * size / beta)
    assert n == math.ceil(max(8 * log_term / alpha, 4 * log_term / (alpha * eps)))
    # Both failure bounds of the derivation are met at n.
    assert size * math.exp(-n * alpha / 8) <= beta / 2 * (1 + 1e-9)
    assert size * math.exp(-eps * n * alpha / 4) <= beta / 2 * (1 + 1e-9)
    assert generic_sample_size(size, alpha, beta, eps / 2) >= n
    assert generic_sample_size(2 * size, alpha, beta, eps) >= n


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_sample_size_rejects_bad_class_size(bad) -> None:
    with pytest.raises(ValueError, match="class_size"):
        generic_sample_size(bad, 0.25, 0.25, 1.0)
