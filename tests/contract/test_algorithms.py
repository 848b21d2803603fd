"""The contract (:mod:`privstream.testing.checks`) over every registered algorithm.

Parametrised over the registry at collection time (:func:`privstream.testing.registered`):
registering an algorithm puts it under every check, with nothing else to write. The audits' runs
are tuned per spec in ``tests/contract/test_audits.py``, so ``audit_holds`` is not repeated here.

A check an algorithm fails today is listed in :data:`KNOWN_GAPS` with its reason; the suite then
asserts that it still fails, so an entry must be removed the day it is fixed.
"""

from __future__ import annotations

import pytest

from privstream.testing.checks import CHECKS, applies
from privstream.testing.releases import Algorithm, registered

#: (algorithm id, check) -> why it fails today. Every entry is asserted to still fail.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


#: Checks run elsewhere for the built-ins.
RUN_ELSEWHERE = {"audit_holds"}

CASES = [
    (algorithm, check)
    for algorithm in registered()
    for check in CHECKS
    if applies(check, algorithm) and check not in RUN_ELSEWHERE
]


@pytest.mark.parametrize(("algorithm", "check"), CASES, ids=[f"{a.id}-{c}" for a, c in CASES])
def test_contract(algorithm: Algorithm, check: str) -> None:
    gap = KNOWN_GAPS.get((algorithm.id, check))
    if gap is None:
        CHECKS[check](algorithm)
        return
    try:
        CHECKS[check](algorithm)
    except AssertionError:
        return  # the known gap is still open
    pytest.fail(f"{algorithm.id} now passes {check}: remove it from KNOWN_GAPS ({gap})")


def test_known_gaps_name_registered_algorithms_and_checks() -> None:
    cases = {(a.id, c) for a, c in CASES}
    stale = sorted(set(KNOWN_GAPS) - cases)
    assert not stale, f"KNOWN_GAPS entries for no registered algorithm or check: {stale}"
    assert all(reason.strip() for reason in KNOWN_GAPS.values())
