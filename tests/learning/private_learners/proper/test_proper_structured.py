"""The proper learner on structured classes of any size: closed forms against the matrix path.

Property tests compare the structured computation (closed forms, compressed matrices, boxes of
members) with ReduceTree on the whole class as a matrix on small N; the hold-out checks run
``intervals:65536`` and ``thresholds:2^32`` at n = 20,000; private n (``expected_size``) and its
add/remove audit."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.audit import audit_spec, run_audit
from privstream.learning.errors import LearningInputError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.private_learners.generic.error_levels import error_levels, version_space
from privstream.learning.private_learners.proper.audit_specs import ADD_REMOVE_PAIR
from privstream.learning.private_learners.proper.irreducibility import ClassLattice, lattice_of
from privstream.learning.private_learners.proper.learner import (
    ProperLearner,
    practical_parameters,
    random_split,
)
from privstream.learning.private_learners.proper.minimax_cover import aligned_candidates, structured_cover
from privstream.learning.private_learners.proper.sparse_selection import selection_law as explicit_law
from privstream.learning.private_learners.proper.structured_reduce import (
    block_set,
    chain_order,
    isolating_order,
    lattice_block_set,
    product_order,
)
from privstream.learning.private_learners.proper.structured_selection import (
    BlockSet,
    coordinates,
    member_at,
    selection_law,
)
from privstream.learning.randomness import seeded

SMALL = ("thresholds:15", "thresholds:31", "points:9", "points:20", "intervals:12", "intervals:16")


def _members(bs: BlockSet) -> tuple[set[tuple[int, ...]], set[Hypothesis]]:
    coords = set()
    for lo, hi in bs.boxes:
        coords.update(itertools.product(*[range(a, b + 1) for a, b in zip(lo, hi, strict=True)]))
    return coords, set(bs.improper)


def _labels(spec: str, xs: np.ndarray, rng: np.random.Generator, kind: int) -> np.ndarray:
    n = parse_class_spec(spec).domain_size
    if kind == 2:
        return rng.integers(0, 2, xs.size)  # noise
    if spec.startswith("points"):
        return (xs == rng.integers(0, n)).astype(np.int64)
    if spec.startswith("thresholds") or kind == 0:
        return (xs >= rng.integers(0, n + 1)).astype(np.int64)
    a = int(rng.integers(0, n))
    return ((xs >= a) & (xs < a + int(rng.integers(1, n)))).astype(np.int64)


# -- closed forms of the irreducibility order ------------------------------------------------------


def test_order_closed_forms_match_the_lattice() -> None:
    """Chains (any set of cuts), products of chains (interval version spaces), isolating classes."""
    chain = lattice_of(parse_class_spec("thresholds:40"))
    for lo, size in itertools.product(range(0, 6), range(1, 34)):
        rows = np.zeros(chain.rows, dtype=bool)
        rows[lo : lo + size] = True
        assert chain.order(chain.mask(rows)) == chain_order(size), size
    intervals = parse_class_spec("intervals:14")
    lat = lattice_of(intervals)
    table = intervals.matrix()
    for p, q in itertools.product(range(1, 8), range(1, 8)):
        # a in [6 - p + 1, 6], b in [7, 7 + q - 1]: the version space of positives 6..6 and fences
        a_ok = np.array(
            [coordinates(intervals, intervals.hypothesis(i)) for i in range(intervals.size)], dtype=object
        )
        rows = np.array([c[0] <= 6 < c[1] and 6 - p < c[0] and c[1] <= 6 + q for c in a_ok])
        assert rows.sum() == p * q
        assert lat.order(lat.mask(rows)) == product_order(p, q), (p, q)
    assert table.shape[0] == intervals.size
    points = lattice_of(parse_class_spec("points:12"))
    for size in range(1, 13):
        rows = np.zeros(points.rows, dtype=bool)
        rows[np.arange(size) * 13 // 13] = True
        rows[-1] = size % 2 == 0  # with and without the all-zero function
        assert points.order(points.mask(rows)) == isolating_order(int(rows.sum()))


# -- ReduceTree per block: structured == matrix ------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SMALL),
    st.integers(0, 10**6),
    st.integers(1, 14),
    st.integers(0, 2),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([None, Fraction(1, 20), Fraction(1, 6)]),
    st.sampled_from([None, 0]),
)
def test_block_sets_equal_reduce_tree_on_the_matrix(spec, seed, n0, kind, k_prime, alpha_delta, cap) -> None:
    """Closed forms (Lemmas A and B), compressed matrices, the shared lattice: all equal ReduceTree on
    the whole class, except where the structured path abstains (then Ŝ = ∅)."""
    hclass = parse_class_spec(spec)
    lattice = lattice_of(hclass)
    d = lattice.ldim(lattice.full)
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, hclass.domain_size, n0)
    ys = _labels(spec, xs, rng, kind)
    ad = Fraction(1, (d + 2) * n0 + 1) if alpha_delta is None else alpha_delta  # None: version-space regime
    reference = _members(
        lattice_block_set(hclass, lattice, xs, ys, n0=n0, k_prime=k_prime, alpha_delta=ad, d=d)
    )
    for shared in (None, lattice):
        got, how = block_set(
            hclass, xs, ys, n0=n0, k_prime=k_prime, alpha_delta=ad, d=d, cap=cap, lattice=shared
        )
        if how == "abstain":
            assert got == BlockSet()
        else:
            assert _members(got) == reference, (how, xs, ys)
        if how in ("chain", "product"):  # the version-space regime: Ŝ = V (Lemma A)
            assert reference[0] == {coordinates(hclass, h) for h in _consistent(hclass, xs, ys)}


def _consistent(hclass, xs, ys) -> list[Hypothesis]:
    return [
        h
        for h in (hclass.hypothesis(i) for i in range(hclass.size))
        if np.array_equal(h.predict(xs), ys.astype(np.uint8))
    ]


def test_closed_forms_need_no_matrix_on_huge_domains() -> None:
    big = parse_class_spec("intervals:4294967296")
    xs = np.array([10, 2**31, 2**31 + 5, 3 * 2**30])
    ys = np.array([0, 1, 1, 0])
    got, how = block_set(big, xs, ys, n0=4, k_prime=1, alpha_delta=Fraction(1, 10**6), d=big.littlestone())
    assert how == "product" and got.boxes == (((11, 2**31 + 6), (2**31, 3 * 2**30)),)
    assert got.size() == (2**31 - 10) * (3 * 2**30 - 2**31 - 5)
    points = parse_class_spec("points:65536")
    got, how = block_set(
        points, np.arange(10), np.zeros(10), n0=10, k_prime=1, alpha_delta=Fraction(1, 10**4), d=1
    )
    assert how == "isolating" and got.boxes == (((65536,), (65536,)),)  # {all-zero} (Lemma B)
    got, how = block_set(big, xs, np.zeros(4), n0=4, k_prime=1, alpha_delta=Fraction(1, 10**6), d=62)
    assert how == "abstain" and got == BlockSet()  # no positive: no closed form, too large for a matrix


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["intervals:1", "intervals:5", "intervals:12", "thresholds:9", "points:7"]),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 1)), max_size=8),
    st.booleans(),
)
def test_the_version_space_is_level_zero_in_its_order(spec, rows, realizable) -> None:
    hclass = parse_class_spec(spec)
    xs = np.array([x % hclass.domain_size for x, _ in rows], dtype=np.int64)
    ys = np.array([y for _, y in rows], dtype=np.uint8)
    if realizable:  # half the samples labelled by a member, so the version space is not empty
        ys = hclass.hypothesis(len(rows) * 7 % hclass.size).predict(xs).astype(np.uint8)
    levels, vs = error_levels(hclass, xs, ys), version_space(hclass, xs, ys)
    assert vs.size == levels.counts[0]
    assert [vs.member(r) for r in range(vs.size)] == [levels.member(0, r) for r in range(vs.size)]


def test_the_version_space_regime_never_computes_the_full_levels(monkeypatch) -> None:
    """The full levels of intervals cost O(k²) in the k distinct points (hours at 10^7); a block in
    the version-space regime needs only level 0, found in O(n log n)."""
    from privstream.learning.private_learners.proper import structured_reduce

    def refuse(*args: object) -> None:
        raise AssertionError("block_set computed every error level")

    monkeypatch.setattr(structured_reduce, "error_levels", refuse)
    big = parse_class_spec("intervals:4294967296")
    xs = np.arange(200_000, dtype=np.int64) * 20_000
    ys = ((xs >= 1_000_000_000) & (xs < 3_000_000_000)).astype(np.uint8)
    got, how = block_set(big, xs, ys, n0=200_000, k_prime=1, alpha_delta=Fraction(1, 10**8), d=62)
    # a in (the last negative below, the first positive], b in (the last positive, the next negative]
    assert how == "product" and got.boxes == (((999_980_001, 2_999_980_001), (1_000_000_000, 3_000_000_000)),)
    got, how = block_set(
        big,
        xs,
        np.zeros(xs.shape[0], dtype=np.uint8),
        n0=200_000,
        k_prime=1,
        alpha_delta=Fraction(1, 10**8),
        d=62,
    )
    assert how == "abstain"  # no positive: about 4·10^13 in-gap intervals, beyond any matrix


# -- selection and cover -----------------------------------------------------------------------------


def test_box_selection_law_is_the_sparse_selection_law() -> None:
    hclass = parse_class_spec("intervals:8")
    rng = np.random.default_rng(3)
    sets, explicit = [], []
    for _ in range(12):
        a0, a1 = sorted(rng.integers(0, 4, 2).tolist())
        b0, b1 = sorted(rng.integers(4, 9, 2).tolist())
        improper = (hypothesis_from_runs(8, 0, (1, 2, 5, 6)),) if rng.random() < 0.3 else ()
        bs = BlockSet(boxes=(((a0, b0), (a1, b1)),), improper=improper)
        sets.append(bs)
        members = {member_at(hclass, c) for c in _members(bs)[0]} | set(improper)
        explicit.append(members)
    law = selection_law(hclass, sets, epsilon=1.0, delta=1e-3, ell=40)
    reference = explicit_law(explicit, epsilon=1.0, delta=1e-3, ell=40, default=hclass.hypothesis(0))
    assert set(law) == set(reference)
    assert all(math.isclose(law[h], reference[h], rel_tol=1e-9, abs_tol=1e-15) for h in law)


@pytest.mark.parametrize("spec", ["points:7", "thresholds:9", "intervals:9", "intervals:12"])
def test_aligned_candidates_dominate_every_member(spec) -> None:
    """Why the structured cover's LP needs only aligned candidates: for every member h some candidate
    errs on a subset of h's errors against f̂, so its optimum is the minimax value over the class."""
    hclass = parse_class_spec(spec)
    matrix = hclass.matrix()
    rng = np.random.default_rng(5)
    for _ in range(20):
        table = rng.random(hclass.domain_size) < 0.4
        if spec.startswith("points"):
            table[:] = False
            table[rng.choice(hclass.domain_size, 2, replace=False)] = True  # the improper SOAs of points
        f_hat = hypothesis_from_runs(
            hclass.domain_size, int(table[0]), (np.flatnonzero(table[1:] != table[:-1]) + 1).tolist()
        )
        candidates = np.stack([h.truth_table() != table for h in aligned_candidates(hclass, f_hat)])
        for row in matrix != table:
            assert (candidates <= row).all(axis=1).any()
        cover, value = structured_cover(hclass, f_hat)
        assert cover and all(coordinates(hclass, h) is not None for h in cover)  # members only
        mixture = np.mean([h.truth_table() != table for h in cover], axis=0)
        assert value <= 1 and mixture.max() >= value - 1e-7  # the LP's value is a mixture's (or all rows')
    member = hclass.hypothesis(3)
    assert structured_cover(hclass, member) == ((member,), 0.0)


# -- the learner: same release for the same seed -----------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(SMALL[:5]),
    st.integers(0, 10**6),
    st.integers(0, 400),
    st.integers(0, 1),
    st.sampled_from([None, 300]),
)
def test_structured_path_gives_the_matrix_paths_release(spec, seed, n, kind, expected) -> None:
    hclass = parse_class_spec(spec)
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, hclass.domain_size, n)
    ys = _labels(spec, xs, rng, kind).astype(np.uint8)
    kwargs = {"epsilon": 1.0, "delta": 1e-6, "alpha": 0.2, "expected_size": expected}
    auto = ProperLearner().fit(hclass, xs, ys, rng=seeded(seed), **kwargs)
    matrix = ProperLearner(path="matrix").fit(hclass, xs, ys, rng=seeded(seed), **kwargs)
    assert auto.hypothesis == matrix.hypothesis
    assert auto.parameters["path"] == "structured" and matrix.parameters["path"] == "matrix"
    assert auto.proper and coordinates(hclass, auto.hypothesis) is not None


def test_file_classes_keep_the_matrix_path() -> None:
    hclass = FiniteClass(np.eye(6, dtype=bool), spec="points6-no-zero")
    xs = np.arange(600) % 6
    res = ProperLearner().fit(hclass, xs, (xs == 2).astype(np.uint8), epsilon=1.0, delta=1e-6, rng=seeded(1))
    assert res.parameters["path"] == "matrix" and res.proper
    with pytest.raises(LearningInputError):
        ProperLearner(path="structured").fit(hclass, xs, (xs == 2).astype(np.uint8), epsilon=1.0, delta=1e-6)


# -- the hold-out checks: large domains at n = 20,000 ---------------------------------------------


def _uniform_error(h: Hypothesis, target: Hypothesis) -> float:
    """Exact error under the uniform marginal, from the run-length forms (no truth table)."""
    n = h.domain_size
    cuts = sorted({0, n, *h.change_points()[1], *target.change_points()[1]})
    wrong = sum(b - a for a, b in itertools.pairwise(cuts) if h.predict(a) != target.predict(a))
    return wrong / n


@pytest.mark.parametrize(
    ("spec", "target"),
    [
        ("intervals:65536", (0, (16384, 40960))),
        ("thresholds:4294967296", (0, (1234567890,))),
        ("points:65536", (0, (17, 18))),
    ],
)
@pytest.mark.parametrize("expected", [None, 20_000])
def test_hold_out_large_domains_at_20000(spec, target, expected) -> None:
    """A proper release with error <= 0.1 (observed 10^-4 to 6·10^-4; 0.1 s per fit)."""
    hclass = parse_class_spec(spec)
    truth = hypothesis_from_runs(hclass.domain_size, *target)
    for seed in range(2):
        xs = np.random.default_rng(seed).integers(0, hclass.domain_size, 20_000)
        res = ProperLearner().fit(
            hclass,
            xs,
            truth.predict(xs),
            epsilon=1.0,
            delta=1e-6,
            alpha=0.1,
            beta=0.1,
            rng=seeded(seed),
            expected_size=expected,
        )
        assert res.proper and coordinates(hclass, res.hypothesis) is not None
        assert _uniform_error(res.hypothesis, truth) <= 0.1
        assert res.parameters["path"] == "structured" and not res.accuracy_guarantee_holds


def test_parameters_beyond_the_matrix_use_the_version_space_regime() -> None:
    hclass = parse_class_spec("intervals:65536")
    d = hclass.littlestone()
    p = practical_parameters(
        20_000, d, 1.0, 1e-6, 0.1, 0.1, class_size=hclass.size, version_space_regime=True
    )
    assert (d + 2) * p.alpha_delta * p.block_size < 1
    assert p.log_ell == pytest.approx(math.log(hclass.size))  # ℓ = |F| < Π_t (2^t + 1)
    xs = np.arange(2000) * 31
    with pytest.raises(LearningInputError, match="version-space regime"):
        ProperLearner(alpha_delta=0.01).fit(hclass, xs, (xs > 999).astype(np.uint8), epsilon=1.0, delta=1e-6)


# -- private n -------------------------------------------------------------------------------------


def test_parameters_under_private_n_depend_on_the_expected_size_only() -> None:
    hclass = parse_class_spec("thresholds:4294967296")
    results = []
    for n in (0, 1, 700, 20_000, 50_000):
        xs = np.random.default_rng(n).integers(0, hclass.domain_size, n)
        results.append(
            ProperLearner().fit(
                hclass,
                xs,
                (xs >= 2**31).astype(np.uint8),
                epsilon=1.0,
                delta=1e-6,
                rng=seeded(2),
                expected_size=20_000,
            )
        )
    for r in results:
        assert r.parameters == results[0].parameters
        assert (r.theorem_sample_size, r.accuracy_guarantee_holds) == (results[0].theorem_sample_size, False)
    assert [r.sample_size for r in results] == [0, 1, 700, 20_000, 50_000]
    assert results[0].parameters["expected_size"] == 20_000
    assert results[0].parameters["neighbours"] == "add/remove-one"
    assert _uniform_error(results[3].hypothesis, hypothesis_from_runs(2**32, 0, (2**31,))) <= 0.01


@pytest.mark.parametrize(
    "spec", ["thresholds:4294967296", "intervals:65536", "points:65536", "intervals:64", "thresholds:15"]
)
@pytest.mark.parametrize("expected", [None, 1000])
def test_zero_examples_give_a_proper_release(spec, expected) -> None:
    hclass = parse_class_spec(spec)
    empty = np.zeros(0, dtype=np.int64)
    res = ProperLearner().fit(
        hclass, empty, empty.astype(np.uint8), epsilon=1.0, delta=1e-6, rng=seeded(0), expected_size=expected
    )
    assert res.proper and coordinates(hclass, res.hypothesis) is not None and res.sample_size == 0


def test_random_split_is_independent_per_example() -> None:
    p = practical_parameters(3000, 4, 1.0, 1e-6, 0.1, 0.1, class_size=17, expected=True)
    a = random_split(4000, p, seeded(3))
    b = random_split(4001, p, seeded(3))
    assert np.array_equal(a, b[:4000])  # one more example changes one block (or B) only
    share_b = p.generic_size / 3000
    assert abs(np.mean(a == -1) - share_b) <= 5 * math.sqrt(share_b * (1 - share_b) / 4000)
    assert set(np.unique(a).tolist()) <= set(range(p.blocks)) | {-1, -2}


def test_add_remove_audit_passes_and_catches_the_positional_split() -> None:
    spec = audit_spec("proper-add-remove")
    assert spec.pair == ADD_REMOVE_PAIR and len(spec.pair[1][0]) == len(spec.pair[0][0]) + 1
    assert run_audit(spec, samples=600, seed=1).passed
    bad = run_audit(spec, variant="positional", samples=600, seed=2)
    assert not bad.passed, bad.summary()


def test_lattices_are_not_built_for_large_structured_classes() -> None:
    """The structured path never calls lattice_of on a class beyond the matrix limits."""
    learner = ProperLearner()
    xs = np.arange(3000) * 7
    learner.fit(
        parse_class_spec("thresholds:65536"),
        xs,
        (xs >= 9000).astype(np.uint8),
        epsilon=1.0,
        delta=1e-6,
        rng=seeded(1),
    )
    assert learner._lattices == {}
    assert isinstance(ClassLattice, type)
