"""The generic private learner: exact blocks, exact privacy, the sampler, accuracy, errors."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.audit import audit_spec, privacy_loss
from privstream.learning.domain import as_points
from privstream.learning.errors import DomainError, LabelError, PrivacyParameterError
from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.learning.hypothesis_classes import (
    FiniteClass,
    HypothesisClass,
    Intervals,
    Points,
    Thresholds,
    interval_hypothesis,
    parse_class_spec,
)
from privstream.learning.private_learners import (
    GenericLearner,
    LearnerResult,
    PrivateLearner,
    error_levels,
    generic_sample_size,
    make_learner,
    output_law,
)
from privstream.learning.private_learners.generic import error_levels as levels_module
from privstream.learning.randomness import seeded
from tests.learning.conftest import small_matrices

STRUCTURED = ("thresholds", "points", "intervals")


def brute_errors(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> list[int]:
    """Errors of every row of the class's truth table (the reference)."""
    return [int((row[xs].astype(np.uint8) != ys).sum()) for row in hclass.matrix()]


def assert_levels_exact(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray) -> None:
    """Counts equal brute force, and each level's member map lists exactly its hypotheses once."""
    levels = error_levels(hclass, xs, ys)
    errs = brute_errors(hclass, xs, ys)
    ref = Counter(errs)
    assert levels.counts == tuple(ref.get(e, 0) for e in range(len(xs) + 1))
    assert levels.class_size == hclass.size
    by_level: dict[int, set] = {}
    for i, e in enumerate(errs):
        by_level.setdefault(e, set()).add(hclass.hypothesis(i))
    for e, count in enumerate(levels.counts):
        members = [levels.member(e, r) for r in range(count)]
        assert len(set(members)) == count
        assert set(members) == by_level.get(e, set())


@st.composite
def samples(draw, max_domain: int = 9, max_n: int = 7):
    """A domain size and a sample biased towards the edge points 0 and N-1 and duplicates."""
    n_dom = draw(st.integers(1, max_domain))
    point = st.one_of(st.just(0), st.just(n_dom - 1), st.integers(0, n_dom - 1))
    pairs = draw(st.lists(st.tuples(point, st.integers(0, 1)), max_size=max_n))
    xs = np.array([x for x, _ in pairs], dtype=np.int64)
    ys = np.array([y for _, y in pairs], dtype=np.uint8)
    return n_dom, xs, ys


# -- exact blocks -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STRUCTURED)
@settings(max_examples=150, deadline=None)
@given(data=samples())
def test_structured_levels_match_brute_force(kind, data) -> None:
    n_dom, xs, ys = data
    assert_levels_exact(parse_class_spec(f"{kind}:{n_dom}"), xs, ys)


@settings(max_examples=150, deadline=None)
@given(matrix=small_matrices(max_rows=20, max_cols=12), data=st.data())
def test_file_class_levels_match_brute_force(matrix, data) -> None:
    hclass = FiniteClass(matrix, spec="random")
    n_dom = hclass.domain_size
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n_dom - 1), st.integers(0, 1)), max_size=40))
    xs = np.array([x for x, _ in pairs], dtype=np.int64)
    ys = np.array([y for _, y in pairs], dtype=np.uint8)
    assert_levels_exact(hclass, xs, ys)


@pytest.mark.parametrize("spec", ["thresholds:5", "points:5", "intervals:5"])
def test_shared_functions_counted_once(spec) -> None:
    """All-zero (points) and empty (intervals) functions share a block with equal-error functions."""
    hclass = parse_class_spec(spec)
    xs = np.array([0, 4, 4, 2], dtype=np.int64)
    ys = np.array([0, 1, 0, 1], dtype=np.uint8)
    assert_levels_exact(hclass, xs, ys)
    empty = error_levels(hclass, xs[:0], ys[:0])  # n = 0: one level holding the whole class
    assert empty.counts == (hclass.size,)


def test_dense_fallback_for_other_classes() -> None:
    """A class that is neither structured nor a file class goes through its truth table."""

    class Parity(HypothesisClass):
        spec, domain_size, size = "parity:3", 8, 8

        def version_space(self):  # pragma: no cover - not needed here
            raise NotImplementedError

        def version_space_from_state(self, state):  # pragma: no cover
            raise NotImplementedError

        def hypothesis(self, index):
            from privstream.learning.hypotheses import hypothesis_from_table

            return hypothesis_from_table([bin(index & x).count("1") % 2 for x in range(8)])

    xs = np.array([1, 2, 3, 7, 7], dtype=np.int64)
    ys = np.array([1, 0, 1, 1, 0], dtype=np.uint8)
    assert_levels_exact(Parity(), xs, ys)


@pytest.mark.parametrize("n_dom", [2**63, 2**64 + 3])
@pytest.mark.parametrize("kind", STRUCTURED)
@settings(max_examples=25, deadline=None)
@given(
    offsets=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1)), max_size=12), r_frac=st.fractions(0, 1)
)
def test_huge_domains_are_exact(kind, n_dom, offsets, r_frac) -> None:
    """int64 / uint64 limits and Python ints: counts sum to |H|, members have their level's errors
    (beyond the specs' limit: the learner computes exactly on any domain)."""
    hclass = {"thresholds": Thresholds, "points": Points, "intervals": Intervals}[kind](n_dom)
    pts = [min(n_dom - 1, (o * 2**58) if o % 2 else n_dom - 1 - o) for o, _ in offsets]
    xs = as_points(np.array(pts, dtype=object), n_dom)
    ys = np.array([y for _, y in offsets], dtype=np.uint8)
    levels = error_levels(hclass, xs, ys)
    assert levels.class_size == hclass.size
    for e, count in levels.nonempty():
        for r in {0, count - 1, int(r_frac * (count - 1))}:
            h = levels.member(e, r)
            assert int((h.predict(xs).astype(np.uint8) != ys).sum()) == e


@pytest.mark.parametrize("flush", [1 << 32, 1])
def test_interval_limb_path_equals_direct_path(flush, monkeypatch) -> None:
    """The 16-bit-limb summation (used when |H| >= 2^64) agrees with the plain uint64 sums,
    also when its accumulators are flushed into Python ints after every chunk."""
    monkeypatch.setattr(levels_module, "_FLUSH_PRODUCTS", flush)
    monkeypatch.setattr(levels_module, "_CHUNK_ELEMENTS", 8)
    rng = np.random.default_rng(5)
    for _ in range(20):
        k = int(rng.integers(1, 30))
        size_a = rng.integers(0, 2**20, size=k + 1).astype(np.uint64)
        size_b = rng.integers(0, 2**20, size=k + 1).astype(np.uint64)
        walk = np.concatenate(([0], np.cumsum(rng.integers(-2, 3, size=k)))).astype(np.int64)
        spread = int(walk.max() - walk.min())  # |W[b] - W[a]| <= spread keeps levels in [0, n]
        ones, n = spread, 2 * spread
        direct = levels_module._pair_level_sums(size_a, size_b, walk, ones, n, class_size=2**50)
        limbs = levels_module._pair_level_sums(size_a, size_b, walk, ones, n, class_size=2**64)
        ref = [0] * (n + 1)
        for a, b in itertools.combinations(range(k + 1), 2):
            ref[ones - int(walk[b] - walk[a])] += int(size_a[a]) * int(size_b[b])
        assert direct == limbs == tuple(ref)


# -- sample size ------------------------------------------------------------------------------


def test_sample_size_matches_spec_example() -> None:
    assert generic_sample_size(1025, 0.25, 0.25, 1.0) == 289  # bayes_overview.md §A.3
    # Realizable ERM-style term dominates for eps >= 1/2; the EM term below.
    assert generic_sample_size(1025, 0.25, 0.25, 0.1) == math.ceil(16 * math.log(8 * 1025) / 0.1)


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(1, 2**200),
    alpha=st.floats(0.01, 0.99),
    beta=st.floats(0.01, 0.99),
    eps=st.floats(0.01, 10),
)
def test_sample_size_is_the_derived_formula_and_monotone(size, alpha, beta, eps) -> None:
    n = generic_sample_size(size, alpha, beta, eps)
    log_term = math.log(2 * size / beta)
    assert n == math.ceil(max(8 * log_term / alpha, 4 * log_term / (alpha * eps)))
    # Both failure bounds of the derivation are met at n.
    assert size * math.exp(-n * alpha / 8) <= beta / 2 * (1 + 1e-9)
    assert size * math.exp(-eps * n * alpha / 4) <= beta / 2 * (1 + 1e-9)
    assert generic_sample_size(size, alpha, beta, eps / 2) >= n
    assert generic_sample_size(2 * size, alpha, beta, eps) >= n


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_sample_size_rejects_bad_class_size(bad) -> None:
    with pytest.raises(ValueError, match="class_size"):
        generic_sample_size(bad, 0.25, 0.25, 1.0)


# -- exact output law and exact privacy -------------------------------------------------------


def exact_law(
    hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, epsilon: float, sensitivity: float = 1
) -> dict:
    """P(h) for every hypothesis, computed from the blocks: Pr[level e] / c_e (no sampling)."""
    return output_law(hclass, xs, ys, epsilon, sensitivity=sensitivity)


@pytest.mark.parametrize("kind", [*STRUCTURED, "finite"])
@settings(max_examples=60, deadline=None)
@given(data=samples(max_domain=7, max_n=6), eps=st.sampled_from([0.1, 1.0, 3.0]), seed=st.integers(0, 99))
def test_output_law_is_the_closed_form(kind, data, eps, seed) -> None:
    n_dom, xs, ys = data
    if kind == "finite":
        rows = np.random.default_rng(seed).integers(0, 2, size=(6, n_dom))
        hclass: HypothesisClass = FiniteClass(rows, spec="random")
    else:
        hclass = parse_class_spec(f"{kind}:{n_dom}")
    law = exact_law(hclass, xs, ys, eps)
    errs = brute_errors(hclass, xs, ys)
    weights = {hclass.hypothesis(i): math.exp(-eps * e / 2) for i, e in enumerate(errs)}
    total = math.fsum(weights.values())
    assert law.keys() == weights.keys()
    for h, w in weights.items():
        assert law[h] == pytest.approx(w / total, rel=1e-12)


def all_samples(n_dom: int, n: int) -> list[tuple[tuple[int, int], ...]]:
    return list(itertools.product(itertools.product(range(n_dom), (0, 1)), repeat=n))


def max_privacy_loss(hclass: HypothesisClass, n: int, epsilon: float, sensitivity: float = 1) -> float:
    """max over all replace-one neighbours S, S' of size n and all h of |ln P_S(h) - ln P_S'(h)|."""
    laws = {}
    for sample in all_samples(hclass.domain_size, n):
        xs = np.array([x for x, _ in sample], dtype=np.int64)
        ys = np.array([y for _, y in sample], dtype=np.uint8)
        laws[sample] = exact_law(hclass, xs, ys, epsilon, sensitivity)
    worst = 0.0
    for sample, law in laws.items():
        for i, entry in itertools.product(range(n), itertools.product(range(hclass.domain_size), (0, 1))):
            other = laws[(*sample[:i], entry, *sample[i + 1 :])]
            worst = max(worst, max(abs(math.log(law[h]) - math.log(other[h])) for h in law))
    return worst


TINY_CLASSES = ["thresholds:3", "points:3", "intervals:3", "finite"]


def tiny_class(spec: str) -> HypothesisClass:
    if spec == "finite":  # bayes_overview.md §C.1: |X| = 4, a random 6-row class
        return FiniteClass(np.random.default_rng(3).integers(0, 2, size=(6, 4)), spec="random")
    return parse_class_spec(spec)


@pytest.mark.parametrize("spec", TINY_CLASSES)
def test_exact_privacy_on_every_neighbouring_pair(spec) -> None:
    """All samples of size 3 (non-realizable ones included) and all their replace-one neighbours."""
    hclass = tiny_class(spec)
    for eps in (0.5, 2.0):
        loss = max_privacy_loss(hclass, 3, eps)
        assert loss <= eps + 1e-12
        assert loss > eps / 2  # the check is not vacuous: the loss comes close to the bound


@pytest.mark.parametrize("spec", ["thresholds:3", "finite"])
def test_exact_privacy_check_catches_understated_sensitivity(spec) -> None:
    """exp(-ε·errors) (sensitivity claimed 1/2) leaks more than the ε it would claim."""
    assert max_privacy_loss(tiny_class(spec), 2, 1.0, sensitivity=0.5) > 1.0 + 0.1


def test_sampler_follows_the_exact_law() -> None:
    """Seeded draws through ``fit`` against the exact law (chi-square, 5 cells, 4 df)."""
    hclass = parse_class_spec("thresholds:4")
    xs = np.array([0, 1, 1, 3], dtype=np.int64)
    ys = np.array([0, 1, 0, 1], dtype=np.uint8)
    law = exact_law(hclass, xs, ys, 1.0)
    rng, runs = seeded(2024), 4000
    learner = GenericLearner()
    draws = Counter(learner.fit(hclass, xs, ys, epsilon=1.0, rng=rng).hypothesis for _ in range(runs))
    assert set(draws) <= set(law)
    chi2 = sum((draws.get(h, 0) - runs * p) ** 2 / (runs * p) for h, p in law.items())
    assert chi2 < 23.5  # the 1 - 1e-4 quantile of chi-square with 4 degrees of freedom


# -- the learner: interface, canonical output, accuracy, errors -------------------------------


def test_interface_and_result() -> None:
    learner = make_learner("generic")
    assert isinstance(learner, PrivateLearner) and isinstance(learner, GenericLearner)
    hclass = parse_class_spec("thresholds:1024")
    xs = np.arange(0, 1024, 4, dtype=np.int64)
    res = learner.fit(hclass, xs, (xs >= 300).astype(np.uint8), epsilon=0.5, delta=1e-6, rng=seeded(1))
    assert isinstance(res, LearnerResult)
    assert (res.mechanism, res.epsilon, res.delta, res.proper, res.sample_size) == (
        "generic-exponential",
        0.5,
        0.0,
        True,
        256,
    )
    assert res.theorem_sample_size == generic_sample_size(1025, 0.25, 0.25, 0.5)
    assert res.accuracy_guarantee_holds is (res.theorem_sample_size <= 256)
    assert json.loads(json.dumps(res.parameters)) == res.parameters
    assert res.parameters["alpha"] == res.parameters["beta"] == 0.25


def test_unknown_learner_lists_known_names() -> None:
    with pytest.raises(ValueError, match="unknown private learner 'nope'; known learners: generic"):
        make_learner("nope")


def test_empty_sample_is_uniform_and_allowed() -> None:
    hclass = parse_class_spec("points:3")
    res = GenericLearner().fit(
        hclass, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8), epsilon=1.0, rng=seeded(0)
    )
    assert res.sample_size == 0 and not res.accuracy_guarantee_holds
    law = exact_law(hclass, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8), 1.0)
    assert all(p == pytest.approx(1 / 4) for p in law.values()) and len(law) == 4


@pytest.mark.parametrize("spec", ["thresholds:6", "points:6", "intervals:6", "finite"])
def test_releases_are_canonical(spec) -> None:
    """Every release equals the class's own hypothesis object and serialises identically."""
    hclass = tiny_class(spec) if spec == "finite" else parse_class_spec(spec)
    canonical = {hclass.hypothesis(i): hclass.hypothesis(i).to_dict() for i in range(hclass.size)}
    rng = seeded(9)
    xs = np.array([0, hclass.domain_size - 1], dtype=np.int64)
    ys = np.array([0, 0], dtype=np.uint8)
    seen = set()
    for _ in range(300):
        h = GenericLearner().fit(hclass, xs, ys, epsilon=0.1, rng=rng).hypothesis
        assert h.to_dict() == canonical[h]
        assert hypothesis_from_dict(h.to_dict()) == h
        seen.add(h)
    assert len(seen) > hclass.size // 2


def clopper_pearson_upper(failures: int, runs: int, confidence: float) -> float:
    """One-sided upper confidence bound on a binomial rate (bisection on the exact CDF)."""
    lo, hi = failures / runs, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        cdf = sum(math.comb(runs, i) * mid**i * (1 - mid) ** (runs - i) for i in range(failures + 1))
        lo, hi = (mid, hi) if cdf > 1 - confidence else (lo, mid)
    return hi


@pytest.mark.parametrize(
    ("spec", "target"),
    [("thresholds:1024", (307,)), ("intervals:2^20", (1000, 420_000)), ("points:2^20", (12345,))],
)
def test_accuracy_at_the_theorem_sample_size(spec, target) -> None:
    """Realizable data, n = theorem n (α = β = 1/4, ε = 1): the failure rate is provably <= β."""
    hclass = parse_class_spec(spec)
    n_dom = hclass.domain_size
    grid = np.arange(n_dom, dtype=np.int64)
    if spec.startswith("thresholds"):
        truth = grid >= target[0]
    elif spec.startswith("intervals"):
        truth = (grid >= target[0]) & (grid < target[1])
    else:
        truth = grid == target[0]
    n = generic_sample_size(hclass.size, 0.25, 0.25, 1.0)
    data_rng, rng, runs, failures = np.random.default_rng(11), seeded(12), 40, 0
    errors = []
    for _ in range(runs):
        xs = data_rng.integers(0, n_dom, size=n)
        if spec.startswith("points"):  # half the mass on the target point, so errors are possible
            xs = np.where(data_rng.random(n) < 0.5, target[0], xs)
        res = GenericLearner().fit(hclass, xs, truth[xs].astype(np.uint8), epsilon=1.0, rng=rng)
        assert res.accuracy_guarantee_holds
        table = res.hypothesis.truth_table()
        err = float(np.mean(table != truth))
        if spec.startswith("points"):
            err = 0.5 * float(table[target[0]] != truth[target[0]]) + 0.5 * err
        errors.append(err)
        failures += err > 0.25
    assert clopper_pearson_upper(failures, runs, 0.999) <= 0.25
    assert np.mean(errors) < 0.05


BAD_EPSILONS = [0, -1.0, float("nan"), float("inf"), True, "1"]


@pytest.mark.parametrize("eps", BAD_EPSILONS)
def test_bad_epsilon(eps) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        GenericLearner().fit(parse_class_spec("thresholds:4"), [1], [1], epsilon=eps)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": 1.0}, "delta"),
        ({"delta": -0.1}, "delta"),
        ({"alpha": 0.0}, "alpha"),
        ({"beta": 1.0}, "beta"),
    ],
)
def test_bad_parameters(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        GenericLearner().fit(parse_class_spec("thresholds:4"), [1], [1], epsilon=1.0, **kwargs)


@pytest.mark.parametrize(
    ("xs", "ys", "error", "match"),
    [
        ([1, 2], [0, 2], LabelError, "label 2 is not 0 or 1"),
        ([1], [0.5], LabelError, "not 0 or 1"),
        ([4], [1], DomainError, r"outside the domain \[0, 4\)"),
        ([-1], [1], DomainError, "outside the domain"),
        ([1.5], [1], DomainError, "integers"),
        ([1, 2], [1], LabelError, "2 points"),
    ],
)
def test_bad_samples(xs, ys, error, match) -> None:
    with pytest.raises(error, match=match):
        GenericLearner().fit(parse_class_spec("thresholds:4"), np.array(xs), np.array(ys), epsilon=1.0)


def test_intervals_release_windows_of_any_size() -> None:
    """30,000 distinct points (k(k+1)/2 > 2e8 blocks, which the O(k²) enumeration refused) and zero
    examples are released like any window; the release is the class's own canonical hypothesis."""
    hclass = parse_class_spec("intervals:2^32")
    rng = np.random.default_rng(21)
    xs = rng.choice(2**32, 30_000, replace=False)
    truth = (xs >= 10**9) & (xs < 3 * 10**9)
    res = GenericLearner().fit(hclass, xs, truth.astype(np.uint8), epsilon=1.0, rng=seeded(4))
    first, changes = res.hypothesis.change_points()
    assert not first and len(changes) == 2 and res.sample_size == 30_000
    assert abs(changes[0] - 10**9) < 10**6 and abs(changes[1] - 3 * 10**9) < 10**6
    assert res.hypothesis == interval_hypothesis(2**32, *changes)
    empty = GenericLearner().fit(
        hclass, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8), epsilon=1.0, rng=seeded(5)
    )
    assert empty.sample_size == 0 and empty.hypothesis.domain_size == 2**32


# -- the audit spec (audited with every registered spec: tests/contract/test_audits.py) ------------


def test_audit_spec_has_an_exact_worst_case() -> None:
    import privstream.learning.private_learners.generic.audit_spec as generic_audit

    spec = audit_spec("generic")
    assert spec.build is not None and set(spec.broken) == {"sensitivity_understated", "no_noise"}
    p, q = spec.exact()
    eps = generic_audit.AUDIT_EPSILON
    worst_case = math.log((8 * math.exp(eps / 2) + 1) / (8 * math.exp(-eps / 2) + 1))
    assert privacy_loss(p, q) == pytest.approx(worst_case)
    assert privacy_loss(p, q) <= eps


def test_intervals_audit_spec_has_an_exact_worst_case() -> None:
    """``generic-intervals``: the interval sampler's production path on intervals:8, S = [(0, 1)]
    vs S' = [(0, 0)]; exact loss ln((8ρ + 29)/(ρ(8 + 29ρ))), ρ = e^{-ε/2} (audited, with its
    broken variants, in tests/contract/test_audits.py)."""
    spec = audit_spec("generic-intervals")
    assert set(spec.broken) == {"sensitivity_understated", "no_noise"}
    p, q = spec.exact()
    rho = math.exp(-0.5)
    assert privacy_loss(p, q) == pytest.approx(math.log((8 * rho + 29) / (rho * (8 + 29 * rho))))
    assert len(p) == 37 and privacy_loss(p, q) <= 1.0
