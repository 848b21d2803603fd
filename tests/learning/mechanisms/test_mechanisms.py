"""Mechanisms: parameter validation, exact privacy maps, output laws, exact privacy checks.

Statistical checks use fixed seeds; their false-alarm rate is 1e-4 (chi-square) or stated inline.
The empirical privacy audits of every mechanism are in tests/contract/test_audits.py.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from privstream.learning.accounting import PrivacyGuarantee, zcdp_to_dp
from privstream.learning.mechanisms import (
    AboveThreshold,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    PrivacyParameterError,
    StableHistogram,
)
from privstream.learning.mechanisms.audit_specs import permute_and_flip_law
from privstream.learning.randomness import SecureRandomSource, seeded
from tests.learning.test_randomness import assert_law, dlap_pmf

# -- validation ------------------------------------------------------------------------------------

BAD_EPSILONS = [0, -1.0, float("nan"), float("inf"), True, "1", None]


@pytest.mark.parametrize("bad", BAD_EPSILONS)
@pytest.mark.parametrize(
    "make",
    [
        lambda e: DiscreteLaplaceMechanism(e),
        lambda e: LaplaceMechanism(e),
        lambda e: DiscreteGaussianMechanism(e, 1e-5),
        lambda e: GaussianMechanism(e, 1e-5),
        lambda e: ExponentialMechanism(e),
        lambda e: PermuteAndFlip(e),
        lambda e: StableHistogram(e, 1e-6),
        lambda e: AboveThreshold(0, e),
    ],
)
def test_epsilon_is_validated(make, bad) -> None:
    with pytest.raises(PrivacyParameterError):
        make(bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -1e-9, float("nan")])
def test_delta_is_validated(bad) -> None:
    for make in (DiscreteGaussianMechanism, GaussianMechanism, StableHistogram):
        with pytest.raises(PrivacyParameterError, match="delta"):
            make(1.0, bad)


def test_sensitivity_and_dimension_are_validated() -> None:
    with pytest.raises(PrivacyParameterError):
        DiscreteLaplaceMechanism(1.0, sensitivity=1.5)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1.0, sensitivity=0.0)
    with pytest.raises(PrivacyParameterError):
        GaussianMechanism(1.0, 1e-5, dimension=0)
    with pytest.raises(PrivacyParameterError):
        ExponentialMechanism(1.0, sensitivity=-1)
    with pytest.raises(PrivacyParameterError):
        AboveThreshold(1.5, 1.0)  # type: ignore[arg-type]
    assert issubclass(PrivacyParameterError, ValueError)


def test_default_randomness_is_secure() -> None:
    for m in (DiscreteLaplaceMechanism(1.0), ExponentialMechanism(1.0), StableHistogram(1.0, 1e-6)):
        assert isinstance(m.rng, SecureRandomSource)


# -- privacy maps (exact values) -------------------------------------------------------------------


def test_laplace_privacy_maps() -> None:
    m = DiscreteLaplaceMechanism(0.5, sensitivity=3)
    assert m.scale == Fraction(6)
    g = m.guarantee()
    assert (g.epsilon, g.delta, g.rho, g.mechanism) == (0.5, 0.0, 0.125, "discrete_laplace")
    assert len(g.rdp) > 0 and all(v <= 0.5 for _, v in g.rdp)

    c = LaplaceMechanism(0.5, sensitivity=2.0, granularity=2**-10)
    # shift in grid units = ceil(2 / 2^-10) = 2048; scale = 2048 / 0.5 grid units = 4.0 output units
    assert c.grid_scale == Fraction(4096)
    assert c.scale == 4.0
    assert c.guarantee().epsilon == 0.5
    vec = LaplaceMechanism(1.0, sensitivity=1.0, dimension=3, granularity=2**-4)
    assert vec.grid_scale == Fraction(16 + 2)  # ceil(Δ/g) + dim - 1 rounding slack
    assert vec.guarantee().rdp == ()  # the 1-D Rényi curve is not claimed for vectors


def test_default_grid_is_fine_relative_to_the_noise() -> None:
    m = LaplaceMechanism(1.0, sensitivity=1.0)
    assert m.granularity == Fraction(1, 2**40)
    assert m.scale == pytest.approx(1.0, rel=1e-11)
    assert m.scale >= 1.0  # never less noise than Δ/ε


def test_gaussian_privacy_maps() -> None:
    m = DiscreteGaussianMechanism(1.0, 1e-5, sensitivity=2)
    g = m.guarantee()
    assert (g.epsilon, g.delta) == (1.0, 1e-5)
    assert g.rho == m.rho
    assert zcdp_to_dp(m.rho, 1e-5) <= 1.0 < zcdp_to_dp(math.nextafter(m.rho, 1.0), 1e-5)
    assert m.variance == Fraction(4) / (2 * Fraction(m.rho))  # σ² = Δ²/(2ρ), exactly
    c = GaussianMechanism(1.0, 1e-5, sensitivity=1.0, granularity=2**-8)
    assert c.grid_variance == Fraction(256**2) / (2 * Fraction(c.rho))
    assert c.sigma == pytest.approx(1 / math.sqrt(2 * c.rho), rel=1e-12)
    v = GaussianMechanism(1.0, 1e-5, sensitivity=1.0, dimension=5, granularity=2**-8)
    assert v.grid_variance == Fraction(256 + 3) ** 2 / (2 * Fraction(v.rho))  # Δ/g + ceil(sqrt(5))


def test_selection_privacy_maps() -> None:
    assert ExponentialMechanism(0.8).guarantee() == PrivacyGuarantee(
        0.8, 0.0, rho=0.8 * 0.8 / 8, mechanism="exponential"
    )
    assert PermuteAndFlip(0.8).guarantee() == PrivacyGuarantee(
        0.8, 0.0, rho=0.8 * 0.8 / 2, mechanism="permute_and_flip"
    )
    assert AboveThreshold(3, 0.5, sensitivity=2).guarantee().epsilon == 0.5
    svt = AboveThreshold(3, 0.5, sensitivity=2)
    assert (svt.threshold_scale, svt.query_scale) == (Fraction(8), Fraction(16))


def test_histogram_threshold_is_the_least_safe_integer() -> None:
    for eps, delta in [(1.0, 1e-6), (0.5, 1e-3), (2.0, 1e-9), (0.1, 0.2)]:
        h = StableHistogram(eps, delta)
        with localcontext() as ctx:
            ctx.prec = 50
            q = (-Decimal(eps) / 2).exp()

            def p(threshold: int, q: Decimal = q) -> Decimal:
                return q ** (threshold - 1) / (1 + q)

            assert p(h.threshold) <= Decimal(delta)
            assert h.threshold == 2 or p(h.threshold - 1) > Decimal(delta)
            assert Decimal(h.tight_delta) >= p(h.threshold)  # rounded up
            assert h.tight_delta == pytest.approx(float(p(h.threshold)), rel=1e-14)
        assert h.guarantee() == PrivacyGuarantee(eps, delta, mechanism="stable_histogram")
    assert StableHistogram(1.0, 1e-6).threshold == 28


# -- Laplace / Gaussian outputs --------------------------------------------------------------------


def test_discrete_laplace_release_law() -> None:
    m = DiscreteLaplaceMechanism(0.5, rng=seeded(1))  # scale 2
    draws = [m.release(10) - 10 for _ in range(30_000)]
    assert_law(draws, {z: dlap_pmf(Fraction(2), z) for z in range(-80, 81)})
    vec = DiscreteLaplaceMechanism(1.0, dimension=3, rng=seeded(2)).release([1, 2, 3])
    assert isinstance(vec, list) and len(vec) == 3 and all(isinstance(v, int) for v in vec)
    with pytest.raises(PrivacyParameterError):
        m.release(1.5)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        m.release([1, 2])


def test_laplace_release_is_on_the_grid_and_has_the_right_scale() -> None:
    g = 2**-6
    m = LaplaceMechanism(1.0, sensitivity=1.0, granularity=g, rng=seeded(3))
    draws = [m.release(0.3) for _ in range(20_000)]
    assert all((d / g).is_integer() for d in draws)
    # value 0.3 is rounded to the grid point 19/64; E|noise| = scale·(1+o(1)) for a fine grid
    centre = 19 * g
    mean_abs = sum(abs(d - centre) for d in draws) / len(draws)
    assert abs(mean_abs - m.scale) < 0.04  # sd of the mean ≈ 1/sqrt(20000) ≈ 0.007
    assert abs(sum(draws) / len(draws) - centre) < 0.07
    with pytest.raises(PrivacyParameterError):
        m.release(float("nan"))


def test_gaussian_release_spread() -> None:
    m = DiscreteGaussianMechanism(1.0, 1e-3, rng=seeded(4))
    draws = [m.release(0) for _ in range(12_000)]
    var = sum(d * d for d in draws) / len(draws)
    assert abs(var / float(m.variance) - 1) < 0.06  # sd of the ratio ≈ sqrt(2/12000) ≈ 0.013
    c = GaussianMechanism(1.0, 1e-3, rng=seeded(5))
    cd = [c.release(2.5) for _ in range(6_000)]
    sd = math.sqrt(sum((d - 2.5) ** 2 for d in cd) / len(cd))
    assert abs(sd / c.sigma - 1) < 0.05  # sd of the ratio ≈ sqrt(1/12000) ≈ 0.009
    out = GaussianMechanism(1.0, 1e-3, dimension=2, rng=seeded(5)).release([0.0, 1.0])
    assert isinstance(out, list) and len(out) == 2


# -- exponential mechanism ---------------------------------------------------------------------------


def dense_law(scores: list[int], eps: float, sensitivity: float = 1.0) -> list[float]:
    w = [math.exp(eps * s / (2 * sensitivity)) for s in scores]
    return [x / sum(w) for x in w]


def test_block_law_equals_the_dense_law() -> None:
    em = ExponentialMechanism(0.7, sensitivity=2)
    blocks = [(3, -4), (1, 0), (2, -1), (5, -9)]
    dense = [s for size, s in blocks for _ in range(size)]
    law = dense_law(dense, 0.7, 2)
    grouped, start = [], 0
    for size, _ in blocks:
        grouped.append(sum(law[start : start + size]))
        start += size
    assert em.block_probabilities(blocks) == pytest.approx(grouped, rel=1e-12)
    assert em.probabilities(dense) == pytest.approx(law, rel=1e-12)


@pytest.mark.parametrize("precision", [64, 1])
def test_block_sampler_matches_the_exact_law(precision: int) -> None:
    # precision=1 makes the proposal coarse (the blocks at -20 and -30 get weight 1 out of ~50):
    # only the exact acceptance step removes that bias, so a sampler that skips it fails here
    em = ExponentialMechanism(1.0, rng=seeded(precision), precision=precision)
    blocks = [(3, -4), (1, 0), (2, -1), (5, -3), (0, 7), (1, -20), (3, -30)]
    draws = [em.select_block(blocks) for _ in range(12_000)]
    law = em.block_probabilities(blocks)
    assert 4 not in draws  # an empty block is never chosen, even with the best score
    assert_law(draws, dict(enumerate(law)))


def test_block_sampler_with_huge_blocks() -> None:
    # 2^64 members at score -60 outweigh one member at score 0 (2^64 e^-30 ≈ 1.7e6)
    em = ExponentialMechanism(1.0, rng=seeded(8))
    blocks = [(2**64, -60), (1, 0), (10**6, -20), (2**63 + 5, -70)]
    law = em.block_probabilities(blocks)
    draws = [em.select_block(blocks) for _ in range(5000)]
    assert_law(draws, dict(enumerate(law)))
    for _ in range(50):
        i, member = em.select_member(blocks)
        assert 0 <= member < blocks[i][0]


def test_member_offsets_are_uniform() -> None:
    em = ExponentialMechanism(1.0, rng=seeded(12))
    draws = [em.select_member([(4, 0)])[1] for _ in range(8000)]
    assert_law(draws, {k: 0.25 for k in range(4)})


def test_dense_selection_accepts_exact_rational_and_float_scores() -> None:
    em = ExponentialMechanism(2.0, rng=seeded(6))
    scores = [Fraction(1, 3), -0.5, 0]
    draws = [em.select(scores) for _ in range(10_000)]
    assert_law(draws, dict(enumerate(em.probabilities(scores))))


@pytest.mark.parametrize(
    "blocks",
    [[], [(0, 1)], [(-1, 0)], [(1.5, 0)], [(1, float("nan"))], [(1,)], [(True, 0)], [(1, "a")]],
)
def test_block_validation(blocks) -> None:
    with pytest.raises(PrivacyParameterError):
        ExponentialMechanism(1.0).select_block(blocks)


def test_exponential_mechanism_exact_privacy_on_all_small_neighbours() -> None:
    """max_h |ln P_S(h) - ln P_S'(h)| <= ε over every replace-one neighbour of a tiny problem.

    Domain {0..3} x {0,1}, n = 3, a 6-hypothesis class (spec C.1 and blm_almm 5.1.6); non-realizable
    labellings included. Scores are -errors (sensitivity 1).
    """
    hyps = [(0, 0, 0, 0), (1, 1, 1, 1), (0, 0, 1, 1), (0, 1, 1, 1), (1, 0, 0, 1), (0, 1, 0, 0)]
    eps = 1.0
    em = ExponentialMechanism(eps)
    points = [(x, y) for x in range(4) for y in (0, 1)]

    def law(sample: tuple) -> list[float]:
        return em.probabilities([-sum(h[x] != y for x, y in sample) for h in hyps])

    worst = 0.0
    for sample in itertools.product(points, repeat=3):
        p = law(sample)
        for i, replacement in itertools.product(range(3), points):
            q = law((*sample[:i], replacement, *sample[i + 1 :]))
            worst = max(worst, max(abs(math.log(a / b)) for a, b in zip(p, q, strict=True)))
    assert worst <= eps + 1e-12
    assert worst > 0.5 * eps  # the check is not vacuous


def test_exponential_mechanism_utility_bound() -> None:
    """Pr[s_max - s >= 2Δ(ln|H| + a)/ε] <= e^-a, from the exact law [S Lemma 3.2]."""
    em = ExponentialMechanism(0.5)
    blocks = [(1, 0), (50, -3), (10**6, -40), (2**40, -120)]
    size = sum(b[0] for b in blocks)
    law = em.block_probabilities(blocks)
    for a in (1, 2, 5):
        cut = 2 * (math.log(size) + a) / 0.5
        bad = sum(p for p, (_, s) in zip(law, blocks, strict=True) if -s >= cut)
        assert bad <= math.exp(-a)


# -- permute-and-flip ------------------------------------------------------------------------------


def test_permute_and_flip_law_for_two_candidates() -> None:
    # Pr[pick the worse one] = Pr[visited first] · exp(-ε d/2) = e^{-ε d/2}/2
    pf = PermuteAndFlip(1.0, rng=seeded(13))
    draws = [pf.select([0, -2]) for _ in range(20_000)]
    p = math.exp(-1.0) / 2
    assert_law(draws, {1: p, 0: 1 - p})
    assert permute_and_flip_law([0, -2], 1.0) == pytest.approx([1 - p, p], rel=1e-12)
    assert pf.select([5]) == 0
    with pytest.raises(PrivacyParameterError):
        pf.select([])


def test_permute_and_flip_sampler_matches_the_exact_law() -> None:
    pf = PermuteAndFlip(0.8, sensitivity=2, rng=seeded(18))
    scores = [0, -1, -3, -3, -6, 2]
    draws = [pf.select(scores) for _ in range(15_000)]
    law = permute_and_flip_law(scores, 0.8, 2)
    assert math.fsum(law) == pytest.approx(1.0, abs=1e-12)
    assert_law(draws, dict(enumerate(law)))


def test_permute_and_flip_exact_privacy_on_all_small_neighbours() -> None:
    """max |ln P_S(i) - ln P_S'(i)| <= ε over all score vectors in {-3..0}^4 and every neighbour
    that moves each score by at most Δ = 1 (McKenna-Sheldon 2020, Thm 1)."""
    eps = 1.0
    vectors = list(itertools.product(range(-3, 1), repeat=4))
    laws = {v: permute_and_flip_law(v, eps) for v in itertools.product(range(-4, 2), repeat=4)}
    worst = 0.0
    for v in vectors:
        for shift in itertools.product((-1, 0, 1), repeat=4):
            w = tuple(a + d for a, d in zip(v, shift, strict=True))
            p, q = laws[v], laws[w]
            worst = max(worst, max(abs(math.log(a / b)) for a, b in zip(p, q, strict=True)))
    assert worst <= eps + 1e-12
    assert worst > 0.9 * eps


# -- stable histogram ------------------------------------------------------------------------------


def test_histogram_releases_only_occurring_frequent_items_in_sorted_order() -> None:
    h = StableHistogram(1.0, 1e-6, rng=seeded(14))
    items = ["b"] * 200 + ["a"] * 150 + ["rare"] * 2
    for _ in range(50):
        out = h.release(items)
        assert list(out) == ["a", "b"]  # rare suppressed (w.p. >= 1 - 1e-6); sorted keys
        assert all(v >= h.threshold for v in out.values())
    mixed = h.release([1] * 100 + ["x"] * 100)  # non-comparable keys: still a fixed order
    assert list(mixed) == [1, "x"]  # by (type name, repr)
    assert h.release([]) == {}


def test_histogram_release_probability_matches_monte_carlo() -> None:
    h = StableHistogram(1.0, 0.2, rng=seeded(15))  # large δ so that count-1 bins show up
    n = 20_000
    hits = sum("z" in h.release(["z", "v", "v"]) for _ in range(n))
    p = h.release_probability(1)
    assert p == pytest.approx(h.tight_delta, rel=1e-9)
    assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)  # 4-sigma band, false alarm ~6e-5
    assert h.release_probability(h.threshold + 50) > 0.999


# -- sparse vector ---------------------------------------------------------------------------------


def test_above_threshold_reports_the_first_large_answer_and_stops() -> None:
    svt = AboveThreshold(50, 2.0, rng=seeded(16))
    consumed = []

    def answers():
        for a in [0, 1, 500, 2, 3]:
            consumed.append(a)
            yield a

    assert svt.run(answers()) == 2
    assert consumed == [0, 1, 500]  # lazily consumed, nothing after the report
    assert AboveThreshold(10**6, 1.0, rng=seeded(1)).run([0, 1, 2]) is None
    with pytest.raises(PrivacyParameterError):
        svt.run([0.5])  # type: ignore[list-item]


def test_above_threshold_frequencies_for_one_query() -> None:
    # Pr[a + ν >= T + ρ] with ν - ρ symmetric: exactly 1/2 + Pr[ν = ρ]/2 when a = T
    svt = AboveThreshold(0, 1.0, rng=seeded(17))
    n = 20_000
    hits = sum(svt.run([0]) == 0 for _ in range(n))
    p_equal = sum(dlap_pmf(Fraction(2), z) * dlap_pmf(Fraction(4), z) for z in range(-200, 201))
    p = 0.5 + p_equal / 2
    assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_histogram_rejects_unsafe_thresholds() -> None:
    least = StableHistogram(1.0, 1e-6).threshold
    assert StableHistogram(1.0, 1e-6, threshold=least + 5).threshold == least + 5  # safer is fine
    with pytest.raises(PrivacyParameterError):
        StableHistogram(1.0, 1e-6, threshold=least - 1)
    with pytest.raises(PrivacyParameterError):
        StableHistogram(1.0, 1e-6, threshold=2.5)  # type: ignore[arg-type]


def histogram_law(h: StableHistogram, counts: dict[str, int]) -> dict[tuple, float]:
    """Exact joint law of the released (key, value) pairs; noise tails below 1e-16 omitted."""
    t = float(h.scale)
    q = math.exp(-1 / t)
    reach = math.ceil(37 * t)
    per_key = []
    for key, c in sorted(counts.items()):
        if c == 0:
            continue
        law = {(key, v): (1 - q) / (1 + q) * q ** abs(v - c) for v in range(h.threshold, c + reach)}
        law[None] = 1.0 - h.release_probability(c)
        per_key.append(law)
    joint: dict[tuple, float] = {(): 1.0}
    for law in per_key:
        joint = {
            (*out, o) if o is not None else out: p * po for out, p in joint.items() for o, po in law.items()
        }
    return joint


def worst_histogram_divergence(h: StableHistogram, keys: str) -> float:
    """max over replace-one pairs of datasets of size 3 over ``keys`` of the hockey-stick divergence."""
    vectors = [
        dict(zip(keys, c, strict=True)) for c in itertools.product(range(4), repeat=len(keys)) if sum(c) == 3
    ]
    laws = {tuple(v.values()): histogram_law(h, v) for v in vectors}
    factor = math.exp(h.epsilon)
    worst = 0.0
    for v in vectors:
        for src, dst in itertools.permutations(keys, 2):
            if v[src] == 0:
                continue
            w = dict(v)
            w[src] -= 1
            w[dst] += 1
            p, q = laws[tuple(v.values())], laws[tuple(w.values())]
            worst = max(worst, math.fsum(max(0.0, pv - factor * q.get(o, 0.0)) for o, pv in p.items()))
    return worst


@pytest.mark.parametrize(("eps", "delta", "keys"), [(2.0, 0.05, "abc"), (0.9, 0.39, "ab")])
def test_stable_histogram_exact_privacy_on_all_small_neighbours(eps: float, delta: float, keys: str) -> None:
    """Hockey-stick divergence <= δ for every replace-one pair of datasets of size 3.

    (0.9, 0.39) is a case where p > 1 - e^{-ε/2}: the reverse direction of the proof is the one
    that binds there. One threshold lower would not be (ε, δ)-DP: the check has teeth.
    """
    h = StableHistogram(eps, delta)
    worst = worst_histogram_divergence(h, keys)
    assert h.tight_delta <= delta
    assert h.tight_delta - 1e-12 <= worst <= h.tight_delta + 1e-12  # attained by a singleton pair
    lower = StableHistogram(eps, delta)
    lower.threshold = h.threshold - 1  # deliberately unsafe
    assert worst_histogram_divergence(lower, keys) > delta
