"""Correlated ERM (global_stability/correlated_erm.py): Algorithm M's practical batch learner.

What privacy needs: a batch's output depends on its own examples and the shared draws only. What
accuracy needs: outputs have empirical error <= τ and coincide across batches of the same data."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.private_learners.global_stability.correlated_erm import ErmParameters, correlated_erm
from privstream.learning.randomness import seeded


def _batches(n: int, k: int) -> np.ndarray:
    return np.arange(n) % k


def test_output_has_empirical_error_within_tolerance() -> None:
    hclass = parse_class_spec("intervals:128")
    rng = np.random.default_rng(0)
    xs = rng.integers(0, 128, 3000)
    ys = ((xs >= 30) & (xs < 90)).astype(np.uint8)
    ys[rng.random(3000) < 0.02] ^= 1  # noisy labels: the tolerance, not the target, bounds the error
    batch = _batches(3000, 10)
    tau = Fraction(1, 10)
    out = correlated_erm(hclass, xs, ys, batch, 10, ErmParameters(tau, 1, 1 << 16), seeded(1))
    for b, h in enumerate(out):
        assert h is not None
        sel = batch == b
        assert np.count_nonzero(h.predict(xs[sel]) != ys[sel]) <= tau * sel.sum()


def test_a_batch_output_depends_on_its_own_examples_and_the_draws_only() -> None:
    """Privacy's requirement: batch 0 alone and batch 0 among others give the same output (same seed)."""
    hclass = parse_class_spec("thresholds:256")
    rng = np.random.default_rng(1)
    xs = rng.integers(0, 256, 800)
    ys = (xs >= 100).astype(np.uint8)
    batch = _batches(800, 8)
    params = ErmParameters(Fraction(1, 20), 1, 1 << 12)
    together = correlated_erm(hclass, xs, ys, batch, 8, params, seeded(4))
    ys_other = ys.copy()
    ys_other[batch != 0] = 1 - ys_other[batch != 0]  # every other batch changes completely
    changed = correlated_erm(hclass, xs, ys_other, batch, 8, params, seeded(4))
    alone = correlated_erm(
        hclass, xs[batch == 0], ys[batch == 0], np.zeros(100, dtype=np.int64), 1, params, seeded(4)
    )
    assert together[0] == changed[0] == alone[0]
    assert changed[1] != together[1]


def test_batches_of_the_same_distribution_mostly_agree() -> None:
    """The replicability that makes the histogram release something (thresholds:1024, m = 114)."""
    hclass = parse_class_spec("thresholds:1024")
    rng = np.random.default_rng(2)
    xs = rng.integers(0, 1024, 114 * 140)
    ys = (xs >= 512).astype(np.uint8)
    params = ErmParameters(Fraction(1, 20), 57, 1 << 16)
    out = correlated_erm(hclass, xs, ys, _batches(xs.size, 140), 140, params, seeded(3))
    top, count = Counter(out).most_common(1)[0]
    assert count >= 50  # clears the histogram threshold T = 28 at ε = 1, δ = 1e-6
    assert abs(int(top.change_points()[1][0]) - 512) <= 60  # a threshold within 0.06 of the target


def test_small_batches_and_exhausted_draws_fail() -> None:
    hclass = parse_class_spec("points:64")
    xs = np.array([5, 5, 5, 9], dtype=np.int64)
    ys = np.array([1, 1, 1, 1], dtype=np.uint8)  # batch 1 = (9, 1) only; batch 2 is empty
    batch = np.array([0, 0, 0, 1])
    out = correlated_erm(hclass, xs, ys, batch, 3, ErmParameters(Fraction(0), 2, 1 << 12), seeded(0))
    assert out[0] is not None and out[0].predict(5) == 1
    assert out[1] is None and out[2] is None  # below min_batch (empty batches included)
    # a non-realizable batch at tolerance 0 has no qualifying hypothesis: Fail after max_draws
    bad = correlated_erm(
        hclass,
        np.array([5, 6]),
        np.array([1, 1]),
        np.zeros(2, dtype=np.int64),
        1,
        ErmParameters(Fraction(0), 1, 300),
        seeded(0),
    )
    assert bad == [None]
    # examples outside every batch (batch -1: S') are ignored
    skip = correlated_erm(
        hclass, xs, ys, np.array([0, 0, 0, -1]), 1, ErmParameters(Fraction(0), 1, 1 << 12), seeded(0)
    )
    assert skip[0] == out[0]


def test_file_classes_and_parameter_validation() -> None:
    rows = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=bool)
    hclass = FiniteClass(rows, "three-rows")
    xs = np.array([0, 1, 2, 3] * 5)
    ys = rows[1][xs].astype(np.uint8)
    out = correlated_erm(
        hclass, xs, ys, np.zeros(20, dtype=np.int64), 1, ErmParameters(Fraction(0), 1, 64), seeded(2)
    )
    assert np.array_equal(out[0].truth_table(), rows[1])
    with pytest.raises(ValueError):
        ErmParameters(Fraction(1), 1, 1)
    with pytest.raises(ValueError):
        ErmParameters(Fraction(0), 0, 1)
