"""The sanitizers' audit specs (privstream.learning.sanitizers.audit_specs).

The contract suite (tests/contract/test_audits.py) audits every registered spec: the production
sanitizer passes at its claim and every broken variant is caught. Here: the fooling sanitizer's
broken variant leaves a witness that the noise hides, which is why its audit needs thousands of
runs (the changed point shows only in the rounds whose secret subsample holds it).
"""

from __future__ import annotations

from privstream.learning.audit import audit_spec
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers.audit_specs import FOOLING_PAIR


def test_fooling_noiseless_check_leaves_a_witness() -> None:
    """Without noise the count 1 (of m = 2) is impossible under the all-zero data and appears under F1."""
    spec = audit_spec("fooling")
    release = spec.broken["noiseless_check"](seeded(3))
    f0, f1 = FOOLING_PAIR
    under_f0 = {spec.discretise(release(f0)) for _ in range(300)}
    under_f1 = [spec.discretise(release(f1)) for _ in range(300)]
    assert under_f0 <= {0, 2} and 1 in under_f1
    correct = spec.build(seeded(4))
    assert {spec.discretise(correct(f0)) for _ in range(100)} - {0, 2}  # the noise hides it


def test_mwem_specs_share_the_pair_and_differ_in_composition() -> None:
    pure, zcdp = audit_spec("mwem"), audit_spec("mwem-zcdp")
    assert pure.pair == zcdp.pair
    assert (pure.claimed.epsilon, pure.claimed.delta) == (1.0, 0.0)
    assert (zcdp.claimed.epsilon, zcdp.claimed.delta) == (0.8, 1e-3)
