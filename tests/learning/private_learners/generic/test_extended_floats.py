"""Extended-range floats: every operation within the proved factor [1/φ, φ] of its exact result."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.private_learners.generic.extended_floats import (
    add,
    div,
    from_ints,
    mul,
    phi_power,
    to_integer_weights,
)

PHI = Fraction(2**52, 2**52 - 1)
positive = st.integers(1, 2**1023)
exponents = st.integers(-5000, 5000)


def value(m: np.ndarray, e: np.ndarray, i: int = 0) -> Fraction:
    return Fraction(float(np.ravel(m)[i])) * Fraction(2) ** int(np.ravel(e)[i])


def within(computed: Fraction, exact: Fraction, count: int = 1) -> bool:
    return exact / PHI**count <= computed <= exact * PHI**count


@settings(max_examples=300, deadline=None)
@given(a=positive, b=positive, sa=exponents, sb=exponents)
def test_each_operation_is_within_one_rounding(a, b, sa, sb) -> None:
    am, ae = from_ints([a])
    bm, be = from_ints([b])
    assert within(value(am, ae), Fraction(a)) and 0.5 <= float(am[0]) < 1
    am, ae, bm, be = am, ae + sa, bm, be + sb  # scale by powers of two: exact
    x, y = value(am, ae), value(bm, be)
    assert within(value(*mul(am, ae, bm, be)), x * y)
    assert within(value(*div(am, ae, bm, be)), x / y)
    assert within(value(*add(am, ae, bm, be)), x + y)  # also when one is 2**10000 times the other


def test_machine_integers_convert_in_both_ranges() -> None:
    values = np.array([1, 2**53 - 1, 2**53 + 1, 2**63 + 12345, 2**64 - 1], dtype=np.uint64)
    m, e = from_ints(values)
    for i, v in enumerate(values.tolist()):
        assert within(value(m, e, i), Fraction(v))
    assert value(m, e, 1) == 2**53 - 1  # below 2**53: exact


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.tuples(st.integers(1, 2**60), st.integers(-3000, 3000)), min_size=1, max_size=60))
def test_integer_weights_bound_the_values(values) -> None:
    m, e = from_ints([v for v, _ in values])
    e = e + np.array([s for _, s in values], dtype=np.int64)
    weights, shift = to_integer_weights(m, e)
    exact = [value(m, e, i) for i in range(len(values))]
    scale = Fraction(2) ** shift
    assert all(int(w) >= 1 and w >= x * scale for w, x in zip(weights.tolist(), exact, strict=True))
    assert int(weights.sum()) < 2**62
    assert sum(exact) * scale >= 2**57


def test_phi_power_is_an_upper_bound() -> None:
    for m in (0, 1, 2, 7, 100, 4097):
        assert PHI**m <= phi_power(m) <= PHI**m * (1 + Fraction(m + 1, 2**120))
