"""Vectorised integer helpers for the batch SOA paths (exact on ``uint64``)."""

from __future__ import annotations

import numpy as np

UINT64_MAX = 2**64 - 1


def bit_length_u64(v: np.ndarray) -> np.ndarray:
    """Elementwise ``int.bit_length`` of a ``uint64`` array (so ``floor(log2 v) + 1``, 0 for 0).

    ``frexp`` of the float gives it, except that values just below a power of two can round
    up to it (above 2**53); those are corrected with one exact shift.
    """
    _, e = np.frexp(v.astype(np.float64))
    e = e.astype(np.int64)
    shift = np.clip(e - 1, 0, 63).astype(np.uint64)
    rounded_up = (e > 0) & ((v >> shift) == 0)
    return e - rounded_up


def soa_rule(c1: np.ndarray, c0: np.ndarray, tie: int) -> np.ndarray:
    """Vectorised SOA rule for chains: compare ``floor(log2)`` of the two side sizes."""
    a, b = bit_length_u64(c1), bit_length_u64(c0)
    return np.where(a > b, 1, np.where(a < b, 0, tie)).astype(np.uint8)
