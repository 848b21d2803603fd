"""Shared strategies and helpers for the learning tests."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st


@st.composite
def small_matrices(draw, max_rows: int = 24, max_cols: int = 6, min_rows: int = 1) -> np.ndarray:
    """Random 0/1 class matrices (rows = hypotheses, duplicates allowed)."""
    cols = draw(st.integers(1, max_cols))
    rows = draw(st.integers(min_rows, max_rows))
    bits = draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
    return np.array(bits, dtype=bool).reshape(rows, cols)


def all_functions(n: int) -> np.ndarray:
    return np.array(list(itertools.product([0, 1], repeat=n)), dtype=bool)


def vc_reference(matrix: np.ndarray) -> int:
    """Brute force: the largest set of columns on which the rows show every pattern."""
    m = np.asarray(matrix, dtype=bool)
    best = 0
    for k in range(1, m.shape[1] + 1):
        if 2**k > m.shape[0] or not any(
            len({tuple(r) for r in m[:, list(s)].tolist()}) == 2**k
            for s in itertools.combinations(range(m.shape[1]), k)
        ):
            break  # shattered sets are downward closed
        best = k
    return best


def tdim_reference(matrix: np.ndarray) -> int:
    """Brute force over ordered point tuples: ``h_i(x_j) = 1 iff i <= j`` (Alon, Livni, Malliaris,
    Moran 2019, §3.2)."""
    m = np.asarray(matrix, dtype=bool)
    rows = {tuple(r) for r in m.tolist()}
    best = 0
    for k in range(1, m.shape[1] + 1):
        for xs in itertools.permutations(range(m.shape[1]), k):
            proj = {tuple(r[x] for x in xs) for r in rows}
            if all(tuple(j >= i for j in range(k)) in proj for i in range(k)):
                best = k
                break
    return best
