"""Empirical privacy audit of the quality estimate on the release path, end to end.

The mechanism audited is the whole release path in process (validation, the release agent on an
injected clock, the ledger, the publisher) with ``quality_epsilon`` set on a time-window stream:
window 1 scores window 0's release, and the neighbouring streams differ in one example of window 1.
What is recorded is what the public sees of the estimate: the release scored, its public size and
the DP figures (the noisy error count and the noisy size). The audit
(``learning.audit.harness.audit``: many runs, an event chosen on one half, Clopper-Pearson bounds
on the other) must find a lower bound on ε at or below ``quality_epsilon``, and must catch the
broken variant that treats the window's size as public (the true n published beside the count).
"""

from __future__ import annotations

import contextlib
import json
from unittest import mock

import pytest

import privstream.agents.releases.quality as quality_module
from privstream.learning.quality import estimate_error
from privstream.stream_app.settings import StreamConfig
from tests.agents.path_audit import check_path_audit, twin_runs, unchanged
from tests.agents.twins import T0, Observed, Step, example

EPSILON = 1.0
STREAM = StreamConfig(
    name="s",
    hypothesis_class="thresholds:8",
    release={
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 1000.0,
        "expected_size": 4,
        "quality_epsilon": EPSILON,
        "window": {"kind": "time", "seconds": 60.0},
    },
)

#: Window 0 holds two examples in both streams; window 1 one more example in d1.
BASE = [Step(T0 + 5, [example(1, at=T0 + 1), example(6, at=T0 + 2)])]
PAIR = (
    [*BASE, Step(T0 + 65, [example(2, at=T0 + 61)]), Step(T0 + 125)],
    [*BASE, Step(T0 + 65, [example(2, at=T0 + 61), example(7, at=T0 + 62)]), Step(T0 + 125)],
)


def size_taken_as_public(*args, **kwargs):
    """The broken variant: the window's size is taken as public (the true n goes out)."""
    return estimate_error(*args, **{**kwargs, "size_public": True})


def estimates_seen(observed: Observed) -> str:
    """What the public sees of the estimates, the DP figures included."""
    return json.dumps(
        [
            [e["release"], e["size"], estimate["noisy_errors"], estimate["noisy_size"]]
            for m, dp in zip(observed.messages, observed.dp, strict=True)
            for e, estimate in zip(m["release"].get("evaluations", []), dp["evaluations"], strict=True)
        ]
    )


def size_public(twin) -> contextlib.AbstractContextManager[object]:
    return mock.patch.object(quality_module, "estimate_error", size_taken_as_public)


# The broken variant's leak is certain (the size published is 1 in one world, 2 in the other): 100
# runs per stream bound it above ε; the honest path gets 400.
@pytest.mark.parametrize(("broken", "samples"), [(False, 400), (True, 100)])
def test_quality_estimate_path_audit(broken, samples):
    mechanism = twin_runs(STREAM, estimates_seen, size_public if broken else unchanged)
    name = "size-public" if broken else "quality"
    check_path_audit(mechanism, PAIR, EPSILON, seed=11, samples=samples, name=name, broken=broken)
