"""Irreducibility (GGKM Def 4.1) by its recursive order: spec fixtures, brute force, Lemma 4.5."""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.errors import LearningInputError
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners.proper.irreducibility import (
    INFINITE,
    ClassLattice,
    lattice_of,
    reducing_array,
    reducing_cells,
)

ALL3 = np.array(list(itertools.product([0, 1], repeat=3)), dtype=bool)  # all 8 functions on 3 points

# (spec, |F|, Ldim, ord), each computed by exhaustive recursion over the definitions of Ghazi et al. 2021.
FIXTURES = [
    ("thresholds:1", 2, 1, 0),
    ("thresholds:2", 3, 1, 1),
    ("thresholds:3", 4, 2, 0),
    ("thresholds:4", 5, 2, 0),
    ("thresholds:6", 7, 2, 1),
    ("thresholds:7", 8, 3, 0),
    ("thresholds:8", 9, 3, 0),
    ("thresholds:15", 16, 4, 0),
    ("thresholds:16", 17, 4, 0),
    ("intervals:2", 4, 2, 0),
    ("intervals:3", 7, 2, 1),
    ("intervals:4", 11, 3, 0),
    ("intervals:5", 16, 3, 0),
    ("intervals:6", 22, 4, 0),
    ("intervals:7", 29, 4, 0),
    ("intervals:8", 37, 4, 1),
    ("points:4", 5, 1, 3),
    ("points:8", 9, 1, 7),  # points + all-zero: N - 1
]


@pytest.mark.parametrize(("spec", "size", "ldim", "order"), FIXTURES)
def test_spec_fixtures(spec: str, size: int, ldim: int, order: int) -> None:
    lat = lattice_of(parse_class_spec(spec))
    assert lat.rows == size
    assert lat.ldim(lat.full) == ldim
    assert lat.order(lat.full) == order


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_points_without_zero_and_all_functions_and_negpt(n: int) -> None:
    lat = ClassLattice(np.eye(n, dtype=bool))
    assert lat.order(lat.full) == n - 2  # points N without the all-zero function
    d = min(n, 4)
    cube = ClassLattice(np.array(list(itertools.product([0, 1], repeat=d)), dtype=bool))
    assert (cube.ldim(cube.full), cube.order(cube.full)) == (d, 0)
    if n >= 3:
        negpt = ClassLattice(np.vstack([np.eye(n, dtype=bool), ~np.eye(n, dtype=bool)]))
        assert (negpt.ldim(negpt.full), negpt.order(negpt.full)) == (2 if n == 3 else 3, 0)


def test_empty_and_singletons_are_infinitely_irreducible() -> None:
    lat = ClassLattice(ALL3)
    assert lat.order(0) == INFINITE and lat.order(1 << 5) == INFINITE
    assert lat.is_irreducible(0, 10**30) and lat.is_irreducible(1, 10**30)
    assert lat.is_irreducible(lat.full, 0)  # every class is 0-irreducible


# -- brute force over all complete trees (GGKM21, Definition 4.1), the lattice's test oracle -------


def _ldim_ref(rows: frozenset[tuple[bool, ...]]) -> int:
    return _ldim_cached(tuple(sorted(rows)))


@cache
def _ldim_cached(rows: tuple[tuple[bool, ...], ...]) -> int:
    if not rows:
        return -1
    if len(rows) == 1:
        return 0
    best = 0
    for x in range(len(rows[0])):
        one = tuple(r for r in rows if r[x])
        zero = tuple(r for r in rows if not r[x])
        if one and zero:
            best = max(best, 1 + min(_ldim_cached(one), _ldim_cached(zero)))
    return best


def _irreducible_bruteforce(rows: frozenset[tuple[bool, ...]], k: int, n_points: int) -> bool:
    """Def 4.1: every complete depth-k tree has a path keeping Ldim (trees enumerated)."""
    full = _ldim_ref(rows)

    def some_path(cls: frozenset[tuple[bool, ...]], depth: int, tree: tuple[int, ...], node: int) -> bool:
        if depth == 0:
            return _ldim_ref(cls) == full
        x = tree[node]
        return any(
            some_path(frozenset(r for r in cls if r[x] == b), depth - 1, tree, 2 * node + 1 + b)
            for b in (0, 1)
        )

    return all(some_path(rows, k, tree, 0) for tree in itertools.product(range(n_points), repeat=2**k - 1))


def test_order_agrees_with_definition_on_all_subclasses_of_the_cube() -> None:
    lat = ClassLattice(ALL3)
    rows_all = [tuple(bool(b) for b in r) for r in ALL3]
    checked = 0
    for mask in range(1, 256):
        rows = frozenset(rows_all[i] for i in range(8) if mask >> i & 1)
        for k in (1, 2):
            assert lat.is_irreducible(mask, k) == _irreducible_bruteforce(rows, k, 3), (mask, k)
            checked += 1
        if mask % 9 == 0:  # depth 3: 2187 trees per class, a sample of the classes
            assert lat.is_irreducible(mask, 3) == _irreducible_bruteforce(rows, 3, 3), mask
    assert checked == 510


# -- reducing arrays and the Lemma 4.5 witness -----------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_reducing_arrays_are_decision_list_partitions(k: int) -> None:
    xs = list(range(k))
    for diag in itertools.product([0, 1], repeat=k):
        arr = reducing_array(diag)
        assert len(arr) == k + 1
        for j in range(1, k + 1):  # Def 4.3 (0-based: arr[j] is b^(j+1))
            assert arr[j][:j] == (*arr[j - 1][: j - 1], 1 - arr[j - 1][j - 1])
        cells = reducing_cells(xs, diag)
        for f in itertools.product([0, 1], repeat=k):  # every function lies in exactly one cell
            assert sum(all(f[x] == b for x, b in cell) for cell in cells) == 1


def _random_class(seed: int, rows: int, points: int) -> ClassLattice:
    rng = np.random.default_rng(seed)
    m = np.unique(rng.integers(0, 2, (rows, points)).astype(bool), axis=0)
    return ClassLattice(m)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 14), st.integers(2, 6))
def test_witness_satisfies_eq6(seed: int, rows: int, points: int) -> None:
    lat = _random_class(seed, rows, points)
    rng = np.random.default_rng(seed + 1)
    for _ in range(4):
        v = lat.mask(rng.random(lat.rows) < 0.7) or lat.full
        order = lat.order(v)
        if order == INFINITE:
            continue
        k = int(order) + 1
        assert lat.is_irreducible(v, k - 1) and not lat.is_irreducible(v, k)
        xs, diag = lat.witness(v, k)
        assert len(xs) == k
        full = lat.ldim(v)
        for cell in reducing_cells(xs, diag):  # (6): every cell nonempty with smaller Ldim
            assert 0 <= lat.ldim(lat.restrict(v, cell)) < full


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(3, 12), st.integers(2, 6))
def test_monotonicity_and_soa_stability(seed: int, rows: int, points: int) -> None:
    """Lemmas 4.2 and 4.3 on random H ⊂ G with Ldim(H) = Ldim(G)."""
    lat = _random_class(seed, rows, points)
    rng = np.random.default_rng(seed)
    g = lat.full
    h = lat.mask(rng.random(lat.rows) < 0.6) & g
    if h == 0 or lat.ldim(h) != lat.ldim(g):
        return
    for k in (1, 2, 3):
        if lat.is_irreducible(h, k):
            assert lat.is_irreducible(g, k)  # Lemma 4.2
    if lat.is_irreducible(h, 1):
        assert np.array_equal(lat.soa(h), lat.soa(g))  # Lemma 4.3


def test_local_realizability_and_soa_facts() -> None:
    """A |X|-irreducible class contains its SOA; the SOA of a singleton is itself; SOA fixtures."""
    thr3 = lattice_of(parse_class_spec("thresholds:3"))
    assert thr3.soa(thr3.full).astype(int).tolist() == [0, 1, 1]
    pts = ClassLattice(np.eye(4, dtype=bool))
    assert pts.soa(pts.full).astype(int).tolist() == [0, 0, 0, 0]  # improper
    assert pts.soa(0b100).astype(int).tolist() == [0, 0, 1, 0]
    iv3 = lattice_of(parse_class_spec("intervals:3"))
    assert iv3.soa(iv3.full).astype(int).tolist() == [0, 1, 0]
    cube = ClassLattice(ALL3)
    for mask in range(1, 256):
        if cube.is_irreducible(mask, 3):
            soa = cube.soa(mask)
            assert any(np.array_equal(soa, ALL3[i]) for i in cube.members(mask).tolist())


def test_matrix_path_refuses_huge_classes_clearly() -> None:
    with pytest.raises(LearningInputError, match="exceeds the limit"):
        lattice_of(parse_class_spec("intervals:1024"))
    with pytest.raises(ValueError, match="ord"):
        ClassLattice(ALL3).witness(ClassLattice(ALL3).full, 3)
