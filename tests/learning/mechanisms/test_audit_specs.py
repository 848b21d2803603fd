"""The mechanisms' audit specs (privstream.learning.mechanisms.audit_specs): their pairs are worst cases.

The contract suite (tests/contract/test_audits.py) audits every spec and checks every exact law
against the claim; here the exact laws show that the pairs nearly attain the claims, so a weaker
mechanism would fail them.
"""

from __future__ import annotations

import pytest

from privstream.learning.audit import audit_spec, hockey_stick, privacy_loss
from privstream.learning.mechanisms import StableHistogram


def exact_laws(name: str):
    spec = audit_spec(name)
    assert spec.exact is not None
    return spec.exact()


def test_exact_checks_are_not_vacuous() -> None:
    """The worst-case pairs nearly attain the claims, so a weaker mechanism would fail them."""
    assert privacy_loss(*exact_laws("discrete_laplace")) == pytest.approx(1.0, rel=1e-9)
    assert 0.85 < privacy_loss(*exact_laws("exponential")) <= 1.0
    assert 0.99 < privacy_loss(*exact_laws("permute_and_flip")) <= 1.0
    assert 0.7 < privacy_loss(*exact_laws("above_threshold")) <= 1.0
    p, q = exact_laws("stable_histogram_singleton")
    assert hockey_stick(p, q, 1.0) == pytest.approx(StableHistogram(1.0, 1e-3).tight_delta, rel=1e-9)
