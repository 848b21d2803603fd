"""Vectorised floats with an unbounded exponent and a certified error model (for proposal weights).

A positive number is a pair ``(m, e)`` of numpy arrays (or scalars) meaning ``m · 2**e``: ``m``
a float64 in ``[1/2, 1)``, ``e`` an int64. That is float64's 53-bit precision without its exponent
range, so weights like ``|A| · exp(-ε·w/2)`` with ``|A|`` up to ``2**1024`` and ``w`` up to ``n``
neither overflow nor underflow. They serve as *proposal* weights of exact rejection samplers:
what matters is not that they are exact but that their error is *proved*, so that the sampler
can bound target/proposal by a known constant and then accept exactly.

**Error model.** With IEEE-754 binary64 round-to-nearest (numpy's ``+``, ``×`` and ``/`` are
correctly rounded: ``fl(a∘b) = (a∘b)(1 + δ)``, ``|δ| <= u = 2**-53`` for a normal result; Higham,
*Accuracy and Stability of Numerical Algorithms*, 2002, §2.2), each operation below returns its
exact result times a factor in ``[1/φ, φ]``, ``φ = 1/(1 - 2u) = 2**52/(2**52 - 1)``:

* :func:`mul`, :func:`div`: one rounded product (quotient) of mantissas in ``[1/4, 2)``, a normal
  number; exponents add exactly.
* :func:`add`: both mantissas are scaled to the larger exponent by ``ldexp``, exact unless the
  smaller falls below ``2**-1022``, where it loses at most ``2**-1075`` (rounded to a subnormal
  or to 0) against a sum ``>= 1/2``;
  then one rounded addition: the factor is within ``(1 ± u)(1 ± 2**-1074) ⊂ [1/φ, φ]``.
* :func:`from_ints`: an integer's top 64 bits (truncation: ``1 - 2**-63 <= factor <= 1``) rounded
  once to a float (``1 ± u``).

So a quantity computed from positive exact values by these operations is its exact value
times a factor in ``[φ**-m, φ**m]``, where ``m`` counts roundings: 1 for a :func:`from_ints`
input, ``m(a) + m(b) + 1`` for a product or quotient, ``max(m(a), m(b)) + 1`` for a sum (by
induction: a product carries both factors' errors and one rounding; a sum is the exact sum of
two values each within its own bound, times one rounding). :func:`phi_power` bounds ``φ**m``
by an exact rational.

>>> m, e = mul(*from_ints([3]), *from_ints([5]))
>>> float(m[0]) * 2.0 ** int(e[0])
15.0
>>> weights, shift = to_integer_weights(*from_ints([1, 2**600, 3]))
>>> [int(w) for w in weights], shift  # weights[i] >= value[i] · 2**shift, each >= 1
([1, 576460752303423488, 1], -541)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["add", "div", "from_ints", "mul", "phi_power", "to_integer_weights"]

XFloats = tuple[np.ndarray, np.ndarray]
_EXACT_FLOAT_INTS = 1 << 53
_CHUNK = 1 << 16  # long arrays go by slices: the temporaries stay in cache


def _normal(total: np.ndarray, exponent: np.ndarray) -> XFloats:
    """``total · 2**exponent`` (``total > 0``) with the mantissa brought back into ``[1/2, 1)`` (exact)."""
    m, d = np.frexp(total)
    return m, exponent + d


def mul(am: np.ndarray, ae: np.ndarray, bm: np.ndarray | np.float64, be: np.ndarray | np.int64) -> XFloats:
    """``a · b``, one rounding (``b`` may be one scalar pair)."""
    return _normal(np.multiply(am, bm), np.add(ae, be))


def div(am: np.ndarray, ae: np.ndarray, bm: np.ndarray, be: np.ndarray) -> XFloats:
    """``a / b``, one rounding."""
    return _normal(np.divide(am, bm), np.subtract(ae, be))


def add(am: np.ndarray, ae: np.ndarray, bm: np.ndarray, be: np.ndarray) -> XFloats:
    """``a + b``: both aligned to the larger exponent (``ldexp``, int64 shifts), one rounding."""
    e = np.maximum(ae, be)
    return _normal(np.ldexp(am, ae - e) + np.ldexp(bm, be - e), e)


def from_ints(values: object) -> XFloats:
    """Positive integers (``uint64``/``int64`` array, or any Python ints) as extended floats.

    Machine integers below ``2**53`` are exact floats; larger ones are split in 32-bit halves,
    each exact, and summed once. Python ints keep their top 64 bits (truncation below
    ``2**-63`` relative) and are rounded once.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        if arr.size and int(arr.max()) >= _EXACT_FLOAT_INTS:
            v = arr.astype(np.uint64)
            total = (v >> np.uint64(32)).astype(np.float64) * 2.0**32 + (v & np.uint64(0xFFFFFFFF)).astype(
                np.float64
            )
        else:
            total = arr.astype(np.float64)
        return _normal(total, np.zeros(arr.shape, dtype=np.int64))
    ints = [int(x) for x in np.ravel(arr)]
    shifts = [max(0, x.bit_length() - 64) for x in ints]
    mantissas = np.array([float(x >> s) for x, s in zip(ints, shifts, strict=True)], dtype=np.float64)
    return _normal(mantissas.reshape(arr.shape), np.array(shifts, dtype=np.int64).reshape(arr.shape))


def to_integer_weights(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, int]:
    """``int64`` weights ``W`` and a shift ``s`` with ``W[i] >= value[i]·2**s`` and ``W[i] >= 1``.

    Also ``Σ W < 2**62`` (an ``int64`` cumulative sum cannot overflow) and ``2**s·Σ value >= 2**57``
    (the ``+1`` rounding of each weight is small against the total), for fewer than ``2**40``
    values with at least one non-zero. Proof: let ``f_i = ldexp(m_i, e_i - e_max)`` (exact when
    ``value_i·2**-e_max >= 2**-1022``, else within ``2**-1075`` of it), ``F`` their float sum
    (``F >= max f_i >= 1/2``; any summation order is within ``(1 ± u)**len`` of the exact sum) and
    ``2**(q-1) <= F < 2**q``. With ``t = 60 - q``, ``W_i = max(1, ceil(f_i·2**t))`` (``f_i·2**t``
    is exact, ``t >= 20``) is ``>= value_i·2**s``, ``s = t - e_max``: when ``f_i`` is exact by
    the ceiling, otherwise because ``value_i·2**s < 2**(t - 1022) < 1``. ``Σ W <= 2**t·Σ f + len
    <= 2**t·2F + len < 2**61 + len``, and ``2**s·Σ value >= 2**t·(F/2 - len·2**-1075) >= 2**57``.
    """
    m = np.asarray(m, dtype=np.float64)
    e = np.asarray(e, dtype=np.int64)
    top = int(e.max())
    parts = [slice(start, start + _CHUNK) for start in range(0, m.shape[0], _CHUNK)]
    scaled = [np.ldexp(m[part], e[part] - top) for part in parts]
    t = 60 - int(np.frexp(sum(float(f.sum()) for f in scaled))[1])
    weights = [np.maximum(np.ceil(np.ldexp(f, t)), 1.0).astype(np.int64) for f in scaled]
    return np.concatenate(weights), t - top


def phi_power(count: int) -> Fraction:
    """An exact rational upper bound on ``φ**count``, ``φ = 2**52/(2**52 - 1)``.

    Square-and-multiply in 128-bit fixed point, every product rounded up.

    >>> 1 < phi_power(10**6) < 1 + 10**6 * 2.0**-51
    True
    """
    one = 1 << 128
    base = -(-(one << 52) // ((1 << 52) - 1))
    result = one
    while count:
        if count & 1:
            result = -(-(result * base) // one)
        count >>= 1
        if count:
            base = -(-(base * base) // one)
    return Fraction(result, one)
