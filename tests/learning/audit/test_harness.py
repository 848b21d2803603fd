"""The audit harness (privstream.learning.audit.harness) and its registry.

The statistics are checked against reference values, the Monte Carlo audit on mechanisms with a
known law. Every registered spec is audited by the contract suite (tests/contract/test_audits.py).
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from fractions import Fraction

import pytest

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit import (
    AUDITS,
    audit,
    audit_spec,
    audit_spec_factory,
    clopper_pearson,
    hockey_stick,
    privacy_loss,
    run_audit,
)
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.randomness import RandomSource, seeded

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
        run_audit(audit_spec("laplace"), variant="nonexistent")


# -- the registry ----------------------------------------------------------------------------------


def test_registry_names_importable_spec_functions() -> None:
    for name, target in AUDITS.items():
        module, sep, attr = target.partition(":")
        assert sep and module.startswith("privstream.learning.") and attr.endswith("audit_spec"), name
    assert audit_spec("generic", epsilon=0.5).claimed.epsilon == 0.5
    with pytest.raises(ValueError, match="unknown audit 'svm'; auditable: above_threshold"):
        audit_spec_factory("svm")


def test_the_harness_and_the_registry_import_no_mechanism_and_no_learner() -> None:
    code = (
        "import sys, privstream.learning.audit; "
        "print(sorted(m for m in sys.modules if m.startswith('privstream.learning.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = ast.literal_eval(out)
    assert not [
        m for m in loaded if ".mechanisms" in m or "learners" in m or ".sanitizers" in m or ".consistent" in m
    ], loaded
