"""The audit harness and the audit of every mechanism (privstream.learning.audit).

Every audit runs the production code path with a seeded source and reports an honest lower
confidence bound on ε (confidence 0.999: a correct mechanism is flagged with probability <= 1e-3
per audit for a fresh seed; the seeds are fixed, so runs are reproducible). Each mechanism must
pass at its claim, and each deliberately broken variant must be caught. Where the output law is
computable, the privacy claim is also checked exactly (hockey-stick divergence <= δ).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit import (
    AUDITABLE_MECHANISMS,
    AuditSpec,
    audit,
    clopper_pearson,
    hockey_stick,
    privacy_loss,
    run_audit,
)
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.privacy_errors import PrivacyParameterError
from privstream.learning.randomness import RandomSource, seeded

# Fixed list (other modules may register more mechanisms, e.g. the private learners).
OWN_MECHANISMS = (
    "discrete_laplace",
    "laplace",
    "discrete_gaussian",
    "gaussian",
    "exponential",
    "permute_and_flip",
    "stable_histogram_counts",
    "stable_histogram_singleton",
    "above_threshold",
)
BROKEN = [(name, variant) for name in OWN_MECHANISMS for variant in AUDITABLE_MECHANISMS[name]().broken]


# -- statistics ------------------------------------------------------------------------------------


def test_clopper_pearson_matches_reference_values() -> None:
    # reference: scipy.stats.beta.ppf (lower: (α; k, n-k+1), upper: (1-α; k+1, n-k))
    cases = [
        ((50, 100, 0.0005), (0.3355819371905234, 0.664418062809478)),
        ((3, 1000, 0.0005), (0.00014984252803814014, 0.013858069267406474)),
        ((997, 1000, 0.0005), (0.9861419307325937, 0.9998501574719618)),
        ((1, 20000, 0.025), (1.2658895979755804e-06, 0.0002785503321745113)),
    ]
    for (k, n, alpha), (lo, hi) in cases:
        got = clopper_pearson(k, n, alpha)
        assert got[0] == pytest.approx(lo, rel=1e-9)
        assert got[1] == pytest.approx(hi, rel=1e-9)


def test_clopper_pearson_edges() -> None:
    assert clopper_pearson(0, 10, 0.025) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-12))
    assert clopper_pearson(10, 10, 0.025) == (pytest.approx(0.025 ** (1 / 10), rel=1e-12), 1.0)
    lo, hi = clopper_pearson(7, 30, 0.01)
    lo2, hi2 = clopper_pearson(23, 30, 0.01)
    assert lo == pytest.approx(1 - hi2, rel=1e-12) and hi == pytest.approx(1 - lo2, rel=1e-12)
    with pytest.raises(PrivacyParameterError):
        clopper_pearson(11, 10, 0.1)


def test_exact_divergences() -> None:
    p, q = {"a": 0.5, "b": 0.5}, {"a": 0.25, "b": 0.75}
    assert privacy_loss(p, q) == pytest.approx(math.log(2), rel=1e-15)
    assert privacy_loss({"a": 1.0}, {"b": 1.0}) == math.inf
    assert hockey_stick(p, q, math.log(2)) == 0.0
    assert hockey_stick(p, q, 0.0) == pytest.approx(0.25, rel=1e-15)
    assert hockey_stick({"a": 0.01, "b": 0.99}, {"b": 1.0}, 1.0) == pytest.approx(0.01, rel=1e-12)


# -- the harness on a mechanism with a known law ---------------------------------------------------


def randomized_response(eps: float):
    """Report the bit with probability e^ε/(1+e^ε): exactly ε-DP, via exact coins."""

    def build(rng: RandomSource):
        keep = Fraction(math.exp(eps) / (1 + math.exp(eps)))
        return lambda bit: bit if rng.bernoulli(keep) else 1 - bit

    return build


def test_audit_is_tight_and_honest_on_randomized_response() -> None:
    result = audit(randomized_response(1.0)(seeded(1)), (0, 1), PrivacyGuarantee(1.0), samples=40_000)
    assert result.passed
    assert 0.9 < result.epsilon_lower_bound <= 1.0  # tight: the best event attains ε
    assert result.epsilon_estimate == pytest.approx(1.0, abs=0.06)
    over_claim = audit(randomized_response(1.0)(seeded(2)), (0, 1), PrivacyGuarantee(0.8), samples=40_000)
    assert not over_claim.passed  # a claim of 0.8 for a 1.0-DP mechanism is caught
    assert "VIOLATION" in over_claim.summary()
    record = json.loads(json.dumps(over_claim.to_dict()))
    assert record["passed"] is False and record["claimed_epsilon"] == 0.8


def test_audit_subtracts_delta() -> None:
    # outputs "leak" with probability 0.01 on d0 only: (0, 0.01)-DP but not (ε, 0)-DP for any ε
    def build(rng: RandomSource):
        return lambda d: "leak" if d == 0 and rng.uniform_int(100) == 0 else "quiet"

    pure = audit(build(seeded(3)), (0, 1), PrivacyGuarantee(1.0), samples=40_000)
    assert not pure.passed and pure.event == frozenset({"leak"})
    approx = audit(build(seeded(3)), (0, 1), PrivacyGuarantee(1.0, 0.02), samples=40_000)
    assert approx.passed and approx.epsilon_lower_bound == 0.0


def test_audit_validates_its_arguments() -> None:
    with pytest.raises(PrivacyParameterError):
        audit(lambda d: d, (0, 1), PrivacyGuarantee(1.0), samples=2)
    with pytest.raises(PrivacyParameterError):
        audit(lambda d: d, (0, 1), PrivacyGuarantee(1.0), confidence=1.0)
    with pytest.raises(KeyError):
        run_audit(AUDITABLE_MECHANISMS["laplace"](), variant="nonexistent")


# -- the registry ----------------------------------------------------------------------------------


def test_registry_names_every_mechanism_with_pairs_and_broken_variants() -> None:
    for name in OWN_MECHANISMS:
        spec = AUDITABLE_MECHANISMS[name]()
        assert isinstance(spec, AuditSpec) and spec.name == name
        assert len(spec.pair) == 2 and spec.pair[0] != spec.pair[1]
        assert spec.broken, f"{name} has no positive control"
        assert spec.description


@pytest.mark.parametrize("name", [n for n in OWN_MECHANISMS if AUDITABLE_MECHANISMS[n]().exact])
def test_exact_privacy_on_the_worst_case_pair(name: str) -> None:
    spec = AUDITABLE_MECHANISMS[name]()
    assert spec.exact is not None
    p, q = spec.exact()
    assert math.fsum(p.values()) == pytest.approx(1.0, abs=1e-12)
    assert math.fsum(q.values()) == pytest.approx(1.0, abs=1e-12)
    eps, delta = spec.claimed.epsilon, spec.claimed.delta
    for a, b in ((p, q), (q, p)):
        assert hockey_stick(a, b, eps) <= delta + 1e-12


def test_exact_checks_are_not_vacuous() -> None:
    """The worst-case pairs nearly attain the claims, so a weaker mechanism would fail them."""
    p, q = AUDITABLE_MECHANISMS["discrete_laplace"]().exact()  # type: ignore[misc]
    assert privacy_loss(p, q) == pytest.approx(1.0, rel=1e-9)
    p, q = AUDITABLE_MECHANISMS["exponential"]().exact()  # type: ignore[misc]
    assert 0.85 < privacy_loss(p, q) <= 1.0
    p, q = AUDITABLE_MECHANISMS["permute_and_flip"]().exact()  # type: ignore[misc]
    assert 0.99 < privacy_loss(p, q) <= 1.0
    p, q = AUDITABLE_MECHANISMS["above_threshold"]().exact()  # type: ignore[misc]
    assert 0.7 < privacy_loss(p, q) <= 1.0
    p, q = AUDITABLE_MECHANISMS["stable_histogram_singleton"]().exact()  # type: ignore[misc]
    assert hockey_stick(p, q, 1.0) == pytest.approx(StableHistogram(1.0, 1e-3).tight_delta, rel=1e-9)


@pytest.mark.parametrize("name", OWN_MECHANISMS)
def test_mechanism_passes_its_audit(name: str) -> None:
    result = run_audit(AUDITABLE_MECHANISMS[name](), seed=1)
    assert result.passed, result.summary()


@pytest.mark.parametrize(("name", "variant"), BROKEN, ids=[f"{n}-{v}" for n, v in BROKEN])
def test_broken_variant_is_caught(name: str, variant: str) -> None:
    result = run_audit(AUDITABLE_MECHANISMS[name](), variant=variant, seed=2)
    assert not result.passed, result.summary()
    assert result.epsilon_lower_bound > result.claimed_epsilon
