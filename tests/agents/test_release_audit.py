"""Empirical privacy audit of the time-window release path, end to end.

The mechanism audited is the whole release path in process (validation, the release agent on an
injected clock, the ledger, the publisher): one run feeds a stream and records every public
artefact of it. The neighbouring streams differ in one example, alone in its window (the case that
leaked: an empty window was never released). The audit (``learning.audit.harness.audit``: many
runs, an event chosen on one half, Clopper-Pearson bounds on the other) must find a lower bound on
ε at or below the certificate's ε, and must catch the broken variant that skips empty windows.
"""

from __future__ import annotations

import json

import pytest

from privstream.agents.releases import ReleaseAgent
from privstream.stream_app.settings import StreamConfig
from tests.agents.path_audit import as_agent, check_path_audit, twin_runs, unchanged
from tests.agents.twins import T0, Observed, Step, example

EPSILON = 1.0
STREAM = StreamConfig(
    name="s",
    hypothesis_class="thresholds:8",
    release={
        "learner": "generic",
        "epsilon": EPSILON,
        "epsilon_budget": 1000.0,
        "expected_size": 4,
        "window": {"kind": "time", "seconds": 60.0},
    },
)

#: Window 0 holds two examples in both streams; window 1 holds the one example of d1 only.
BASE = [Step(T0 + 5, [example(1, at=T0 + 1), example(6, at=T0 + 2)])]
PAIR = (
    [*BASE, Step(T0 + 65), Step(T0 + 125)],
    [*BASE, Step(T0 + 65, [example(7, at=T0 + 61)]), Step(T0 + 125)],
)


class SkipsEmptyWindows(ReleaseAgent):
    """The broken variant: windows without examples are never released."""

    def _schedule_node(self, policy, state, level, index, closed_at):
        if index not in self.store.pending_time_windows("s"):
            return
        super()._schedule_node(policy, state, level, index, closed_at)


def everything_public(observed: Observed) -> str:
    """Everything public, the DP outputs included: the transcript a subscriber sees."""
    return json.dumps(
        [
            [
                m["release"]["certificate"]["window"]["window_id"],
                m["published_at"],
                m["release"]["certificate"]["ledger_entry_id"],
                dp["hypothesis"],
            ]
            for m, dp in zip(observed.messages, observed.dp, strict=True)
        ],
        sort_keys=True,
    )


# The broken variant's leak is certain (window 1 is published in one world only): 100 runs per
# stream bound it above ln(0.86/0.14) = 1.8 > ε; the honest path gets 400.
@pytest.mark.parametrize(("broken", "samples"), [(False, 400), (True, 100)])
def test_time_window_path_audit(broken, samples):
    mechanism = twin_runs(STREAM, everything_public, as_agent(SkipsEmptyWindows) if broken else unchanged)
    name = SkipsEmptyWindows.__name__ if broken else ReleaseAgent.__name__
    check_path_audit(mechanism, PAIR, EPSILON, seed=7, samples=samples, name=name, broken=broken)
