"""The hierarchical sanitizer's audit specs beyond the contract suite: PrivTree's exact laws.

The contract suite (tests/contract/test_audits.py) runs both specs (``hierarchical`` and
``hierarchical-partition``) and their broken variants by Monte Carlo. PrivTree alone has exact
output laws (privstream/learning/sanitizers/hierarchical/audit_specs.py), so its ε on the pair is
computed here, and the missing depth bias, which shows only in rare events (exact loss 2x the claim
at probability ~1e-3, 10^5 runs per dataset to catch by sampling: a slow test), is caught exactly.
"""

from __future__ import annotations

from privstream.learning.audit import audit_spec, privacy_loss
from privstream.learning.sanitizers.hierarchical.audit_specs import partition_laws


def test_hierarchical_partition_is_within_its_claim_exactly_on_a_near_worst_case_pair() -> None:
    spec = audit_spec("hierarchical-partition")
    assert spec.exact is not None
    p, q = spec.exact()
    assert 0.75 < privacy_loss(p, q) <= spec.claimed.epsilon


def test_hierarchical_partition_without_depth_bias_exceeds_the_claim_exactly() -> None:
    p, q = partition_laws("no_depth_bias")
    assert privacy_loss(p, q) > 1.9  # claimed ε_p = 1
