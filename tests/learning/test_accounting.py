"""Composition and accounting: exact values.

Reference values marked "dp-accounting 0.6.0" were computed with Google's dp_accounting
(RdpAccountant with the same orders) during development; our implementation is independent.
"""

from __future__ import annotations

import math

import pytest

from privstream.learning.accounting import (
    DEFAULT_RDP_ORDERS,
    PrivacyGuarantee,
    advanced_composition,
    basic_composition,
    parallel_composition,
    rdp_composition,
    rdp_discrete_laplace,
    rdp_pure_dp,
    rdp_to_dp,
    tightest_composition,
    zcdp_for_dp,
    zcdp_to_dp,
)
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    LaplaceMechanism,
    StableHistogram,
)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": -0.1},
        {"epsilon": math.nan},
        {"epsilon": math.inf},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": 1.0, "delta": -1e-9},
        {"epsilon": 1.0, "rho": -1.0},
        {"epsilon": 1.0, "rdp": ((1.0, 0.1),)},
        {"epsilon": True},
    ],
)
def test_guarantee_validation(kwargs) -> None:
    with pytest.raises(PrivacyParameterError):
        PrivacyGuarantee(**kwargs)


def test_guarantee_is_frozen_data() -> None:
    g = PrivacyGuarantee(1, 0)
    assert isinstance(g.epsilon, float) and g.is_pure
    with pytest.raises(AttributeError):
        g.epsilon = 2.0  # type: ignore[misc]
    assert g.neighbouring == "replace-one"
    assert PrivacyGuarantee(1.0, 1e-6).rdp_at(2.0) is None  # (ε, δ>0) alone has no Rényi bound


def test_basic_composition() -> None:
    g = basic_composition([PrivacyGuarantee(0.5, 1e-6), PrivacyGuarantee(0.25), PrivacyGuarantee(1.25, 2e-6)])
    assert (g.epsilon, g.delta, g.rho) == (2.0, 3e-6, None)
    with_rho = basic_composition([PrivacyGuarantee(1.0, rho=0.5), PrivacyGuarantee(0.5, rho=0.125)])
    assert with_rho.rho == 0.625
    with pytest.raises(PrivacyParameterError):
        basic_composition([])
    with pytest.raises(PrivacyParameterError):
        basic_composition([PrivacyGuarantee(1.0), PrivacyGuarantee(1.0, neighbouring="add-remove")])


def test_parallel_composition_is_the_worst_window() -> None:
    windows = [PrivacyGuarantee(0.5, 1e-6), PrivacyGuarantee(1.0), PrivacyGuarantee(0.2, 1e-5)]
    g = parallel_composition(windows)
    assert (g.epsilon, g.delta) == (1.0, 1e-5)


def test_advanced_composition_exact_value() -> None:
    g = advanced_composition(PrivacyGuarantee(0.1, 1e-7), k=100, delta_slack=1e-6)
    expected = math.sqrt(2 * 100 * math.log(1e6)) * 0.1 + 100 * 0.1 * math.expm1(0.1)
    assert g.epsilon == pytest.approx(expected, rel=1e-15)
    assert g.epsilon == pytest.approx(6.308230950513408, rel=1e-12)
    assert g.delta == pytest.approx(100 * 1e-7 + 1e-6, rel=1e-15)
    with pytest.raises(PrivacyParameterError):
        advanced_composition(PrivacyGuarantee(0.1), k=0, delta_slack=1e-6)
    with pytest.raises(PrivacyParameterError):
        advanced_composition(PrivacyGuarantee(0.1), k=3, delta_slack=0.0)


def test_zcdp_conversion_round_trip() -> None:
    assert zcdp_to_dp(0.5, 1e-5) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)), rel=1e-15)
    for eps, delta in [(1.0, 1e-5), (0.1, 1e-9), (5.0, 0.01)]:
        rho = zcdp_for_dp(eps, delta)
        assert zcdp_to_dp(rho, delta) == pytest.approx(eps, rel=1e-12)


def test_rdp_pure_dp_is_randomized_response() -> None:
    eps = 1.3
    for alpha in (1.5, 2.0, 10.0, 200.0):
        p = math.exp(eps) / (1 + math.exp(eps))
        rr = math.log(p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (alpha - 1)
        value = rdp_pure_dp(eps, alpha)
        assert value == pytest.approx(min(rr, eps), rel=1e-12)
        assert value <= min(eps, alpha * eps * eps / 2) + 1e-15  # Bun-Steinke Prop 3.3 is looser
    assert rdp_pure_dp(0.0, 2.0) == 0.0
    with pytest.raises(PrivacyParameterError):
        rdp_pure_dp(1.0, 1.0)


def test_rdp_discrete_laplace_matches_direct_summation() -> None:
    for shift, scale, alpha in [(1, 1.0, 2.0), (3, 2.5, 1.5), (2, 0.7, 8.0)]:
        log_q = -1 / scale
        log_c = math.log((1 - math.exp(log_q)) / (1 + math.exp(log_q)))
        terms = [
            math.exp(log_c + log_q * (alpha * abs(z) + (1 - alpha) * abs(z - shift)))
            for z in range(-300, 300)
        ]
        direct = math.log(math.fsum(terms)) / (alpha - 1)
        assert rdp_discrete_laplace(shift, scale, alpha) == pytest.approx(direct, rel=1e-10)
    assert rdp_discrete_laplace(0, 1.0, 2.0) == 0.0


def test_rdp_discrete_laplace_tends_to_mironov_laplace() -> None:
    eps = 0.7
    for alpha in (1.5, 4.0, 32.0):
        mironov = math.log(
            alpha / (2 * alpha - 1) * math.exp((alpha - 1) * eps)
            + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * eps)
        ) / (alpha - 1)
        fine = rdp_discrete_laplace(2**30, 2**30 / eps, alpha)
        assert fine == pytest.approx(mironov, rel=1e-8)


def test_rdp_to_dp_uses_the_improved_conversion() -> None:
    # single order: ε = rdp + log1p(-1/α) - (log δ + log α)/(α - 1)
    value = rdp_to_dp([3.0], [0.4], 1e-5)
    assert value == pytest.approx(0.4 + math.log(2 / 3) - (math.log(1e-5) + math.log(3)) / 2, rel=1e-15)
    assert value < 0.4 + math.log(1e5) / 2  # never worse than Mironov's Prop 3
    with pytest.raises(PrivacyParameterError):
        rdp_to_dp([1.0], [0.1], 1e-5)


def test_rdp_composition_of_laplace_matches_dp_accounting() -> None:
    # 10 Laplace releases at ε = 1, δ = 1e-6. dp-accounting 0.6.0 RdpAccountant: 9.999327713743067
    g = PrivacyGuarantee(1.0, rdp=tuple((a, rdp_discrete_laplace(10**9, 1e9, a)) for a in DEFAULT_RDP_ORDERS))
    assert rdp_composition([g] * 10, 1e-6).epsilon == pytest.approx(9.999327713743067, rel=1e-9)
    # our grid Laplace mechanism's own curve gives the same answer to ~1e-9
    lap = LaplaceMechanism(1.0).guarantee()
    assert rdp_composition([lap] * 10, 1e-6).epsilon == pytest.approx(9.999327713743067, rel=1e-8)


def test_rdp_composition_of_gaussians_matches_dp_accounting() -> None:
    # 5 Gaussians with noise multiplier 2 (ρ = 1/8), δ = 1e-5. dp-accounting 0.6.0: 5.377728336819822
    g = PrivacyGuarantee(1.0, 1e-5, rho=1 / 8)
    result = rdp_composition([g] * 5, 1e-5)
    assert result.epsilon == pytest.approx(5.377728336819822, rel=1e-12)
    assert (result.delta, result.rho) == (1e-5, 0.625)


def test_rdp_composition_beats_basic_for_many_gaussians() -> None:
    g = DiscreteGaussianMechanism(0.5, 1e-6).guarantee()
    many = [g] * 100
    rdp = rdp_composition(many, 1e-6)
    assert rdp.epsilon < basic_composition(many).epsilon / 3
    best = tightest_composition(many, 1e-6)
    assert best.epsilon == rdp.epsilon and best.mechanism == "rdp_composition"
    assert tightest_composition([g], 1e-6).epsilon <= g.epsilon


def test_rdp_composition_adds_approximate_only_mechanisms_by_basic_composition() -> None:
    hist = StableHistogram(1.0, 1e-6).guarantee()  # (ε, δ) only
    lap = DiscreteLaplaceMechanism(0.5).guarantee()
    mixed = rdp_composition([hist, lap, lap], 1e-7)
    lap_only = rdp_composition([lap, lap], 1e-7)
    assert mixed.epsilon == pytest.approx(lap_only.epsilon + 1.0, rel=1e-15)
    assert mixed.delta == pytest.approx(1e-7 + 1e-6, rel=1e-15)
    only_hist = rdp_composition([hist, hist], 1e-7)
    assert (only_hist.epsilon, only_hist.delta) == (2.0, 2e-6)


def test_advanced_composition_wins_for_many_small_pure_releases() -> None:
    g = PrivacyGuarantee(0.01)
    adv = advanced_composition(g, 1000, 1e-6)
    assert adv.epsilon < basic_composition([g] * 1000).epsilon
    assert tightest_composition([g] * 1000, 1e-6).epsilon <= adv.epsilon
