"""Vectorised integer helpers for the batch SOA paths (exact on ``uint64``)."""

from __future__ import annotations

import numpy as np

UINT64_MAX = 2**64 - 1
FLOAT_EXACT = 2**53  # integers below this are exact in float64
CHUNK = 1 << 15  # batch paths work in chunks that stay in cache


def bit_length_u64(v: np.ndarray) -> np.ndarray:
    """Elementwise ``int.bit_length`` of a ``uint64`` array (so ``floor(log2 v) + 1``, 0 for 0).

    ``frexp`` of the float gives it, except that values just below a power of two can round
    up to it (above 2**53); those are corrected with one exact shift.
    """
    _, e = np.frexp(v.astype(np.float64))
    e = e.astype(np.int64)
    shift = np.clip(e - 1, 0, 63).astype(np.uint64)
    rounded_up = (e > 0) & ((v >> shift) == 0)
    lengths: np.ndarray = e - rounded_up
    return lengths


def bit_length_key(v: np.ndarray, exact_in_float: bool) -> np.ndarray:
    """A key ordered like ``bit_length`` with the same ties (only for comparing).

    When every value is below 2**53 the float64 conversion is exact and its biased exponent
    field (0 for 0, 1023 + floor(log2 v) otherwise) is such a key, at a fraction of the cost.
    """
    if exact_in_float:
        return v.astype(np.float64).view(np.int64) >> 52
    return bit_length_u64(v)


def soa_rule(c1: np.ndarray, c0: np.ndarray, tie: int, exact_in_float: bool = False) -> np.ndarray:
    """Vectorised SOA rule for chains: compare ``floor(log2)`` of the two side sizes."""
    a, b = bit_length_key(c1, exact_in_float), bit_length_key(c0, exact_in_float)
    return (a >= b if tie else a > b).view(np.uint8)
