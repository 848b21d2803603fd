"""The GGKM proper learner: ReduceTree invariants, sparse selection, properness, privacy, accuracy."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.audit import audit_spec, hockey_stick, privacy_loss
from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners import make_learner
from privstream.learning.private_learners.proper.irreducibility import (
    ClassLattice,
    lattice_of,
    reducing_cells,
)
from privstream.learning.private_learners.proper.learner import (
    ProperLearner,
    paper_parameters,
    poly_pri_learn,
    practical_parameters,
    proper_sample_size,
)
from privstream.learning.private_learners.proper.reduce_tree import reduce_tree, row_mistakes, selection_bound
from privstream.learning.private_learners.proper.sparse_selection import (
    inner_epsilon,
    selection_error,
    selection_law,
    sparse_select,
)
from privstream.learning.randomness import seeded


def _consecutive(xs: np.ndarray, ys: np.ndarray, params) -> list[tuple[np.ndarray, np.ndarray]]:
    n0 = params.block_size
    return [(xs[j * n0 : (j + 1) * n0], ys[j * n0 : (j + 1) * n0]) for j in range(params.blocks)]


def _random_class(seed: int, rows: int, points: int) -> ClassLattice:
    rng = np.random.default_rng(seed)
    return ClassLattice(np.unique(rng.integers(0, 2, (rows, points)).astype(bool), axis=0))


def _block(lat: ClassLattice, seed: int, n0: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    target = lat.matrix[rng.integers(lat.rows)]
    xs = rng.integers(0, lat.domain_size, n0)
    ys = target[xs].astype(np.uint8)
    flip = rng.random(n0) < noise
    ys[flip] ^= 1
    return xs, ys


# -- ReduceTree (GGKM21, Algorithm 1) --------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(2, 16),
    st.integers(2, 6),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([Fraction(1, 20), Fraction(1, 10), Fraction(1, 6)]),
    st.sampled_from([0.0, 0.0, 0.5]),
)
def test_reduce_tree_invariants(
    seed: int, rows: int, points: int, k_prime: int, alpha_delta: Fraction, noise: float
) -> None:
    lat = _random_class(seed, rows, points)
    n0 = 30
    xs, ys = _block(lat, seed, n0, noise)
    mist = row_mistakes(lat.counts_matrix, xs, ys)
    res = reduce_tree(lat, mist, n0, k_prime, alpha_delta)
    d = res.ldim
    # Partition (eq. 17): after every step each row of F is consistent with exactly one leaf.
    for leaves in res.snapshots:
        union = 0
        for v in leaves:
            assert union & res.nodes[v].rows == 0
            union |= res.nodes[v].rows
        assert union == lat.full
    # ŵ* strictly decreasing, ŵ*_1 <= d (Lemma 5.1 proof)
    assert res.w_star[0] <= d
    assert all(a > b for a, b in itertools.pairwise(res.w_star))
    # Lemma 5.2 height bound; k_v <= k_t; (15) for every expansion
    assert max(nd.height for nd in res.nodes) <= k_prime * (2 ** (res.t_final + 1) - 1)
    for e in res.expansions:
        assert 1 <= e.k_v <= k_prime * 2**e.t
        full = lat.ldim(e.subclass)
        for cell in reducing_cells(e.points, e.diagonal):
            assert 0 <= lat.ldim(lat.restrict(e.subclass, cell)) < full
    # Lemma 5.5
    assert len(res.s_hat) <= selection_bound(k_prime, d)
    # (16): each element is the SOA of a nonempty k'-irreducible restricted class of some v in L'
    t = res.t_final + 1
    bound = math.floor(Fraction(6 * (d + 3 - t) - 4, 6) * alpha_delta * n0)
    low = lat.mask(mist <= bound)
    expected = set()
    for v in res.leaves_prime:
        g = low & res.nodes[v].rows
        if g and lat.is_irreducible(g, k_prime):
            expected.add(np.packbits(lat.soa(g)).tobytes())
    assert set(res.s_hat) == expected
    if noise == 0.0:
        assert res.s_hat  # realizable block: Ŝ nonempty (Lemma 5.1 consequence)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 12), st.integers(2, 5))
def test_claim_5_9_empirical_error_bound(seed: int, rows: int, points: int) -> None:
    """k' >= ceil(n0 (d+2) α_Δ) ⇒ every f in Ŝ has err_T(f) < (d+2)α_Δ, on any block."""
    lat = _random_class(seed, rows, points)
    n0, alpha_delta = 20, Fraction(1, 20)
    d = lat.ldim(lat.full)
    k_prime = math.ceil(n0 * (d + 2) * alpha_delta)
    xs, ys = _block(lat, seed, n0, 0.3)
    res = reduce_tree(lat, row_mistakes(lat.counts_matrix, xs, ys), n0, k_prime, alpha_delta)
    for table in res.s_hat.values():
        assert np.count_nonzero(table[xs] != ys.astype(bool)) < (d + 2) * alpha_delta * n0


def test_reduce_tree_edge_cases() -> None:
    single = ClassLattice(np.array([[True, False, True]]))
    res = reduce_tree(single, np.array([0]), 5, 1, Fraction(1, 10))  # d = 0
    assert res.t_final == 0 and len(res.s_hat) == 1
    lat = lattice_of(parse_class_spec("thresholds:7"))
    all_wrong = np.full(lat.rows, 10)  # nothing has low error: Ŝ = ∅, t_final = 0
    res = reduce_tree(lat, all_wrong, 10, 1, Fraction(1, 20))
    assert res.t_final == 0 and res.s_hat == {}


def test_improper_to_proper_fixture() -> None:
    """Points N=8 without ∅, P(0)=0.01, target δ_0, α_Δ=0.1: every block gives Ŝ = {all zeros}."""
    lat = ClassLattice(np.eye(8, dtype=bool))
    rng = np.random.default_rng(4)
    p = np.array([0.01] + [0.99 / 7] * 7)
    for k_prime in (1, 3):
        for _ in range(10):
            xs = rng.choice(8, 400, p=p)
            ys = (xs == 0).astype(np.uint8)
            res = reduce_tree(lat, row_mistakes(lat.counts_matrix, xs, ys), 400, k_prime, Fraction(1, 10))
            assert [t.astype(int).tolist() for t in res.s_hat.values()] == [[0] * 8]


# -- sparse selection (GGKM21, Proposition 5.6, as docs/algorithms/proper.md applies it) -----------


def test_sparse_selection_law_is_the_exponential_mechanism_with_a_phantom() -> None:
    sets = [{"a"}] * 30 + [{"a", "b"}] * 10 + [{"c"}] * 3 + [set()] * 2
    eps, delta, ell = 1.0, 1e-3, 2
    law = selection_law(sets, epsilon=eps, delta=delta, ell=ell, default="z")
    e = inner_epsilon(eps, delta)
    w = {
        "a": math.exp(e * 40 / 2),
        "b": math.exp(e * 10 / 2),
        "c": math.exp(e * 3 / 2),
        "z": math.ceil(ell / delta) * math.exp(e / 2),
    }
    total = sum(w.values())
    for key, weight in w.items():
        assert law[key] == pytest.approx(weight / total, rel=1e-12)
    rng = seeded(11)
    draws = [
        sparse_select(sets, epsilon=eps, delta=delta, ell=ell, default="z", rng=rng) for _ in range(3000)
    ]
    for key in "abz":
        k = draws.count(key)
        sd = math.sqrt(3000 * law[key] * (1 - law[key])) + 1
        assert abs(k - 3000 * law[key]) < 5 * sd


def test_sparse_selection_exact_privacy_over_all_neighbours() -> None:
    """H_ε(p‖q) <= δ for every replacement of one set, in both directions (exact laws)."""
    eps, delta, ell = 1.0, 0.05, 2
    universe = [frozenset(s) for r in range(ell + 1) for s in itertools.combinations("abc", r)]
    base = [frozenset("a")] * 6 + [frozenset("ab")] * 3 + [frozenset("b")] * 2
    worst_loss = 0.0
    for i in range(len(base)):
        p = selection_law(base, epsilon=eps, delta=delta, ell=ell, default="z")
        for s in universe:
            other = [*base[:i], s, *base[i + 1 :]]
            q = selection_law(other, epsilon=eps, delta=delta, ell=ell, default="z")
            assert hockey_stick(p, q, eps) <= delta + 1e-12
            assert hockey_stick(q, p, eps) <= delta + 1e-12
            common = {o for o in p if o in q}
            worst_loss = max(worst_loss, privacy_loss({o: p[o] for o in common}, {o: q[o] for o in common}))
    assert worst_loss <= eps + 1e-12
    # the phantom matters: without it an element held by one set has unbounded loss
    with pytest.raises(Exception, match="epsilon"):
        inner_epsilon(0.001, 0.5)


def test_selection_error_bound_and_sample_size_formulas() -> None:
    assert selection_error(100, math.log(3), 1.0, 1e-6, 0.1) == pytest.approx(
        2 * math.log(2 * 3 * math.exp(inner_epsilon(1.0, 1e-6) / 2) / 1e-7) / inner_epsilon(1.0, 1e-6),
        rel=1e-3,
    )
    p = paper_parameters(0.25, 0.1, 1.0, 1e-6, 1, d_vc=1)
    assert p["condition_holds"] and 500 < p["C"] < 700 and 1e9 < p["n"] < 2e9  # the paper's constants
    p4 = paper_parameters(0.25, 0.1, 1.0, 1e-6, 4, d_vc=1)
    assert 1e10 < p4["n"] < 1e11
    sizes = [proper_sample_size(a, 0.1, 1.0, 1e-6, 2) for a in (0.4, 0.2, 0.1)]
    assert sizes == sorted(sizes) and sizes[0] > 10**9
    pp = practical_parameters(10_000, 1, 1.0, 1e-6, 0.25, 0.1)
    assert pp.blocks * pp.block_size + pp.generic_size <= 10_000
    assert selection_error(pp.blocks, pp.log_ell, 1.0, 1e-6, 0.05) < 0.5 * pp.blocks


# -- the learner -----------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(1, 24),
    st.integers(1, 8),
    st.integers(1, 300),
    st.sampled_from([0.0, 0.2, 0.5]),
    st.sampled_from([1, 2]),
)
def test_every_output_is_a_member(
    seed: int, rows: int, points: int, n: int, noise: float, k_prime: int
) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 2, (rows, points)).astype(bool)
    hclass = FiniteClass(m, spec="random")
    target = hclass.matrix()[rng.integers(hclass.size)]
    xs = rng.integers(0, points, n)
    ys = target[xs].astype(np.uint8) ^ (rng.random(n) < noise).astype(np.uint8)
    res = ProperLearner(k_prime=k_prime).fit(hclass, xs, ys, epsilon=1.0, delta=1e-6, rng=seeded(seed))
    assert res.proper
    table = res.hypothesis.truth_table().astype(bool)
    assert any(np.array_equal(table, row) for row in hclass.matrix())


def test_improper_selection_is_never_released() -> None:
    """Points N=8 without ∅: f̂ = all zeros ∉ F; the release is a member, chosen by the cover."""
    hclass = FiniteClass(np.eye(8, dtype=bool), spec="points8-no-zero")
    rng = np.random.default_rng(1)
    p = np.array([0.3] + [0.1] * 7)
    xs = rng.choice(8, 4000, p=p)
    ys = (xs == 0).astype(np.uint8)
    learner = ProperLearner(blocks=40, alpha_delta=0.1)
    lat, d = learner.lattice(hclass)
    params, _ = learner.parameters_for(4000, d, 1.0, 1e-6, 0.25, 0.25)
    outcome = poly_pri_learn(
        lat, _consecutive(xs, ys, params), params, epsilon=1.0, delta=1e-6, rng=seeded(2), d=d
    )
    res = learner.fit(hclass, xs, ys, epsilon=1.0, delta=1e-6, rng=seeded(2))
    assert res.proper and int(res.hypothesis.truth_table().sum()) == 1
    assert outcome.f_hat.shape == (8,)
    with pytest.raises(ValueError, match="δ > 0"):
        learner.fit(hclass, xs, ys, epsilon=1.0, delta=0.0)


def test_make_learner_and_result_fields() -> None:
    learner = make_learner("proper", k_prime=2)
    hclass = parse_class_spec("thresholds:15")
    xs = np.arange(1500) % 15
    res = learner.fit(hclass, xs, (xs >= 6).astype(np.uint8), epsilon=1.0, delta=1e-6, rng=seeded(0))
    assert res.proper and res.epsilon == 1.0 and res.delta == 1e-6
    assert res.parameters["mode"] == "practical" and res.parameters["k_prime"] == 2
    assert not res.accuracy_guarantee_holds and res.theorem_sample_size > 10**9
    params, needed = learner.parameters_for(res.theorem_sample_size, 4, 1.0, 1e-6, 0.25, 0.25)
    assert params.mode == "paper" and needed == res.theorem_sample_size  # truthful switch


def test_audit_spec_pair_is_within_the_pure_claim() -> None:
    """The pair's exact loss is below ε with no δ needed (the contract suite audits the spec)."""
    p, q = audit_spec("proper").exact()  # type: ignore[misc]
    assert privacy_loss(p, q) < 1.0


def test_exact_privacy_of_poly_pri_learn_on_all_neighbours_of_a_small_sample() -> None:
    """ReduceTree is deterministic, so PolyPriLearn's law is the sparse selection's law of the blocks."""
    lat = lattice_of(parse_class_spec("thresholds:3"))
    learner = ProperLearner(blocks=12, alpha_delta=0.2, shuffle=False)
    params, _ = learner.parameters_for(15, 2, 1.0, 1e-2, 0.25, 0.25, class_size=lat.rows)
    xs = np.array([0, 2] * 6)
    ys = (xs >= 1).astype(np.uint8)
    ell = params.ell
    assert ell == selection_bound(params.k_prime, 2, lat.rows) == 4  # |F| = 4 < Π_t (2^t + 1) = 15

    def law(bx: np.ndarray, by: np.ndarray) -> dict:
        out = poly_pri_learn(
            lat, _consecutive(bx, by, params), params, epsilon=1.0, delta=1e-2, rng=seeded(0), d=2
        )
        return selection_law(list(out.sets), epsilon=1.0, delta=1e-2, ell=ell, default=b"")

    base = law(xs, ys)
    for i, x, y in itertools.product(range(len(xs)), range(3), (0, 1)):
        nx, ny = xs.copy(), ys.copy()
        nx[i], ny[i] = x, y
        other = law(nx, ny)
        assert hockey_stick(base, other, 1.0) <= 1e-2 + 1e-12
        assert hockey_stick(other, base, 1.0) <= 1e-2 + 1e-12


# -- accuracy (practical parameters, fixed seeds) --------------------------------------------------


def _errors(spec: str, target, n: int, seeds: range, **params) -> list[float]:
    hclass = parse_class_spec(spec) if isinstance(spec, str) else spec
    grid = np.arange(hclass.domain_size)
    truth = target(grid)
    learner = ProperLearner(**params)
    out = []
    for s in seeds:
        rng = np.random.default_rng(s)
        xs = rng.integers(0, hclass.domain_size, n)
        res = learner.fit(hclass, xs, target(xs), epsilon=1.0, delta=1e-6, beta=0.1, rng=seeded(s))
        out.append(float(np.mean(res.hypothesis.predict(grid) != truth)))
    return out


def _q90(errors: list[float]) -> float:
    return sorted(errors)[math.ceil(0.9 * len(errors)) - 1]


@pytest.mark.parametrize("n", [1000, 10_000])
def test_accuracy_points_1024(n: int) -> None:
    errs = _errors("points:1024", lambda x: (x == 5).astype(np.uint8), n, range(5))
    assert _q90(errs) <= 1 / 1024  # the all-zero function (or δ_5): error <= P(5)


def test_accuracy_thresholds_and_intervals_small() -> None:
    errs = _errors("thresholds:63", lambda x: (x >= 20).astype(np.uint8), 10_000, range(3))
    assert _q90(errs) <= 0.05
    errs = _errors("intervals:16", lambda x: ((x >= 4) & (x < 11)).astype(np.uint8), 10_000, range(3))
    assert _q90(errs) <= 0.15


@pytest.mark.parametrize("ldim", [1, 2, 3])
def test_accuracy_random_file_classes(ldim: int) -> None:
    rng = np.random.default_rng(100 + ldim)
    for _ in range(1000):  # a random class on 12 points with the wanted Ldim (<= floor(log2 rows))
        m = np.unique(rng.integers(0, 2, (2**ldim + 1, 12)).astype(bool), axis=0)
        lat = ClassLattice(m)
        if lat.ldim(lat.full) == ldim:
            break
    hclass = FiniteClass(m, spec=f"random-ldim{ldim}")
    target_row = hclass.matrix()[0]
    errs = _errors(hclass, lambda x: target_row[x].astype(np.uint8), 10_000, range(3))
    assert _q90(errs) <= 0.25


def test_exponential_mechanism_is_the_only_sampler() -> None:
    """The learner draws through the project's exact samplers (no float softmax here)."""
    assert ExponentialMechanism(1.0).guarantee().epsilon == 1.0
