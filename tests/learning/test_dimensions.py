"""Dimensions: the spec fixture tables, closed forms vs the exact matrix search, properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings

from privstream.learning.dimensions import (
    all_dimensions,
    dual_littlestone_dimension,
    dual_vc_dimension,
    littlestone_dimension,
    littlestone_dimension_reference,
    threshold_dimension,
    vc_dimension,
    witness_tree,
)
from privstream.learning.errors import TooExpensiveError
from privstream.learning.hypothesis_classes import (
    FiniteClass,
    Intervals,
    Points,
    Thresholds,
    parse_class_spec,
)
from privstream.learning.hypothesis_classes._interval_ldim import intervals_ldim
from privstream.learning.hypothesis_classes.bitset_search import BitsetClass, columns_from_matrix

from .conftest import all_functions, small_matrices, tdim_reference, vc_reference


def finite(matrix: np.ndarray, name: str = "m") -> FiniteClass:
    return FiniteClass(np.asarray(matrix, dtype=bool), name)


def dims(matrix: np.ndarray) -> tuple[int, int, int]:
    c = finite(matrix)
    return littlestone_dimension(c), vc_dimension(c), threshold_dimension(c)


def drop_row(matrix: np.ndarray, row: np.ndarray) -> np.ndarray:
    return matrix[~(matrix == row).all(axis=1)]


# ---- Littlestone dimensions by brute force (domain [1..n], closed intervals), in our classes -

INTERVALS_LDIM = [1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]  # n = 1..18
INTERVALS_NONEMPTY_LDIM = [0, 1, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]


@pytest.mark.parametrize("n", range(1, 17))
def test_thresholds_all_cuts(n: int) -> None:
    # h_t = 1[x >= t], t = 1..n+1 on [1..n]  ==  thresholds:n on {0..n-1}.
    cls = parse_class_spec(f"thresholds:{n}")
    assert cls.size == n + 1
    assert dims(cls.matrix()) == (math.floor(math.log2(n + 1)), 1, n)
    assert (littlestone_dimension(cls), vc_dimension(cls), threshold_dimension(cls)) == (
        math.floor(math.log2(n + 1)),
        1,
        n,
    )


@pytest.mark.parametrize("n", range(1, 17))
def test_thresholds_figure_one_style(n: int) -> None:
    # t_i(j) = 1 iff i <= j, i = 1..n: thresholds:n without the all-zero cut.
    m = drop_row(parse_class_spec(f"thresholds:{n}").matrix(), np.zeros(n, dtype=bool))
    assert m.shape[0] == n
    assert dims(m) == (math.floor(math.log2(n)), 1 if n >= 2 else 0, n)
    if n == 8:
        assert dims(m)[0] == 3  # Figure 1


@pytest.mark.parametrize("n", range(1, 10))
def test_points(n: int) -> None:
    m = parse_class_spec(f"points:{n}").matrix()
    assert m.shape[0] == n + 1 and dims(m) == (1, 1, 1)
    only = drop_row(m, np.zeros(n, dtype=bool))  # singletons without the all-zero function
    assert dims(only) == (0 if n == 1 else 1, 0 if n == 1 else 1, 1)


@pytest.mark.parametrize("n", range(1, 19))
def test_intervals(n: int) -> None:
    cls = parse_class_spec(f"intervals:{n}")
    assert cls.size == n * (n + 1) // 2 + 1
    m = cls.matrix()
    assert dims(m) == (INTERVALS_LDIM[n - 1], min(2, n), n)
    assert littlestone_dimension(cls) == INTERVALS_LDIM[n - 1]
    nonempty = drop_row(m, np.zeros(n, dtype=bool))
    assert littlestone_dimension(finite(nonempty)) == INTERVALS_NONEMPTY_LDIM[n - 1]
    assert vc_dimension(finite(nonempty)) == (2 if n >= 3 else n - 1)


@pytest.mark.parametrize(("n", "k"), [(n, k) for n in range(1, 8) for k in range(n + 1)])
def test_at_most_k_ones(n: int, k: int) -> None:
    m = all_functions(n)
    m = m[m.sum(axis=1) <= k]
    assert m.shape[0] == sum(math.comb(n, r) for r in range(k + 1))
    assert dims(m) == (k, k, k)


@pytest.mark.parametrize("d", range(1, 6))
def test_all_functions(d: int) -> None:
    c = finite(all_functions(d))
    assert (c.size, *dims(all_functions(d))) == (2**d, d, d, d)
    # The dual is the d coordinate functions (Ghazi et al. 2021, §2.3).
    assert dual_littlestone_dimension(c) == dual_vc_dimension(c) == math.floor(math.log2(d))


# ---- exhaustive recursion (X = {0..N-1}, the definitions of Ghazi et al. 2021) -------------

GGKM_THRESHOLDS = {  # N: (#F, VC, Ldim, dual VC, dual Ldim)
    1: (2, 1, 1, 0, 0),
    2: (3, 1, 1, 1, 1),
    3: (4, 1, 2, 1, 1),
    4: (5, 1, 2, 1, 2),
    6: (7, 1, 2, 1, 2),
    7: (8, 1, 3, 1, 2),
    8: (9, 1, 3, 1, 3),
    15: (16, 1, 4, 1, 3),
    16: (17, 1, 4, 1, 4),
}
GGKM_INTERVALS = {
    2: (4, 2, 2, 1, 1),
    3: (7, 2, 2, 1, 1),
    4: (11, 2, 3, 2, 2),
    5: (16, 2, 3, 2, 2),
    6: (22, 2, 4, 2, 2),
    7: (29, 2, 4, 2, 2),
    8: (37, 2, 4, 2, 3),
}


def ggkm_row(cls) -> tuple[int, int, int, int, int]:
    return (
        cls.size,
        vc_dimension(cls),
        littlestone_dimension(cls),
        dual_vc_dimension(cls),
        dual_littlestone_dimension(cls),
    )


@pytest.mark.parametrize(
    ("kind", "n", "row"),
    [("thresholds", n, r) for n, r in GGKM_THRESHOLDS.items()]
    + [("intervals", n, r) for n, r in GGKM_INTERVALS.items()],
)
def test_ggkm_table_closed_forms_and_matrix(kind: str, n: int, row: tuple) -> None:
    cls = parse_class_spec(f"{kind}:{n}")
    assert ggkm_row(cls) == row
    assert ggkm_row(finite(cls.matrix())) == row


@pytest.mark.parametrize("n", range(2, 9))
def test_ggkm_points_and_negated_points(n: int) -> None:
    pts = parse_class_spec(f"points:{n}")
    assert ggkm_row(pts) == ggkm_row(finite(pts.matrix())) == (n + 1, 1, 1, 1, 1)
    only = finite(drop_row(pts.matrix(), np.zeros(n, dtype=bool)))
    assert ggkm_row(only) == (n, 1, 1, 1, 1)
    if n < 3:
        return  # the table's neg-pt rows start at N = 3 (for N = 2, -delta_0 = delta_1)
    eye = np.eye(n, dtype=bool)
    neg = finite(np.vstack([eye, ~eye]))
    assert ggkm_row(neg) == ((6, 2, 2, 1, 1) if n == 3 else (2 * n, 3, 3, 1, 1))


# ---- closed forms vs the exact matrix computation -----------------------------------------


@pytest.mark.parametrize("kind", ["thresholds", "points", "intervals"])
@pytest.mark.parametrize("n", range(1, 15))
def test_closed_forms_equal_matrix_computation(kind: str, n: int) -> None:
    cls = parse_class_spec(f"{kind}:{n}")
    closed = all_dimensions(cls)
    exact = all_dimensions(finite(cls.matrix(), cls.spec))
    assert closed == exact


def test_intervals_ldim_matches_reference_recursion_further() -> None:
    for n in (19, 20, 21, 26, 27):
        m = parse_class_spec(f"intervals:{n}").matrix()
        assert littlestone_dimension(finite(m)) == intervals_ldim(n)
    assert [intervals_ldim(n) for n in (26, 27, 38, 39)] == [7, 8, 8, 9]


def test_huge_structured_classes_need_no_enumeration() -> None:
    # beyond the specs' limit too: the class objects compute exactly on any domain
    big = all_dimensions(Intervals(2**63))
    assert big["size"] == 2**63 * (2**63 + 1) // 2 + 1
    assert (big["littlestone"], big["vc"], big["dual_littlestone"], big["dual_vc"]) == (124, 2, 63, 2)
    t = all_dimensions(Thresholds(2**63))
    assert (t["littlestone"], t["threshold"], t["dual_littlestone"]) == (63, 2**63, 63)
    assert all_dimensions(Points(2**63))["littlestone"] == 1


# ---- properties on random classes ---------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(small_matrices())
def test_fast_ldim_equals_reference_and_bounds(m: np.ndarray) -> None:
    c = finite(m)
    ldim = littlestone_dimension(c)
    assert ldim == littlestone_dimension_reference(m)
    vc = vc_dimension(c)
    assert vc == vc_reference(m)
    assert vc <= ldim <= math.floor(math.log2(c.size))
    tdim = threshold_dimension(c)
    assert tdim == tdim_reference(m)
    # Sharp forms of Shelah/Hodges (Alon, Livni, Malliaris, Moran 2019, App. A).
    assert tdim >= math.floor(math.log2(ldim + 1))
    assert ldim >= math.floor(math.log2(tdim)) if tdim else True
    dual = c.dual()
    assert dual_littlestone_dimension(c) == littlestone_dimension_reference(dual.matrix())
    assert dual_vc_dimension(c) == vc_reference(dual.matrix())


@settings(max_examples=40, deadline=None)
@given(small_matrices(max_rows=16, max_cols=5, min_rows=2))
def test_witness_tree_is_shattered_with_depth_ldim(m: np.ndarray) -> None:
    c = finite(m)
    tree = witness_tree(c)
    rows = {tuple(r) for r in m.tolist()}

    def depth(t) -> int:
        return 0 if t is None else 1 + min(depth(t["0"]), depth(t["1"]))

    def paths(t, prefix):
        if t is None:
            yield prefix
            return
        for y in (0, 1):
            yield from paths(t[str(y)], [*prefix, (t["x"], y)])

    assert depth(tree) == littlestone_dimension(c)
    for path in paths(tree, []):
        assert any(all(r[x] == y for x, y in path) for r in rows)


@settings(max_examples=40, deadline=None)
@given(small_matrices(max_rows=20, max_cols=6, min_rows=2))
def test_every_split_respects_the_recursion(m: np.ndarray) -> None:
    bs = BitsetClass(columns_from_matrix(np.unique(m, axis=0)), np.unique(m, axis=0).shape[0])
    d = bs.ldim(bs.full)
    for col in bs.columns:
        one, zero = bs.full & col, bs.full & ~col
        assert 1 + min(bs.ldim(one), bs.ldim(zero)) <= d
        assert not (bs.ldim(one) == d and bs.ldim(zero) == d)  # at most one side keeps Ldim


def test_ldim_conventions() -> None:
    bs = BitsetClass(columns_from_matrix(all_functions(3)), 8)
    assert bs.ldim(0) == -1  # the empty class
    assert bs.ldim(1) == 0  # one function
    assert bs.ldim(bs.full) == 3


def test_budgets_raise_too_expensive_not_a_guess() -> None:
    c = finite(all_functions(8))
    with pytest.raises(TooExpensiveError) as info:
        vc_dimension(c, max_work=10)
    assert "VC" in info.value.reason
    with pytest.raises(TooExpensiveError):
        threshold_dimension(c, max_nodes=3)


def test_all_dimensions_reports_null_with_reason(monkeypatch) -> None:
    import privstream.learning.dimensions as dimensions

    def too_expensive(cls):
        raise TooExpensiveError("search budget exceeded")

    monkeypatch.setattr(dimensions, "threshold_dimension", too_expensive)
    out = dimensions.all_dimensions(parse_class_spec("thresholds:4"))
    assert out["threshold"] is None and out["reasons"] == {"threshold": "search budget exceeded"}
    assert out["littlestone"] == 2


def test_reference_recursion_tiny_cases() -> None:
    assert littlestone_dimension_reference(np.zeros((0, 3), dtype=bool)) == -1
    assert littlestone_dimension_reference(np.array(list(itertools.product([0, 1], repeat=3)))) == 3
