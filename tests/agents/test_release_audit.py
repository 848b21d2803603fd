"""Empirical privacy audit of the time-window release path, end to end.

The mechanism audited is the whole release path in process (validation, the release agent on an
injected clock, the ledger, the publisher): one run feeds a stream and records every public
artefact of it. The neighbouring streams differ in one example, alone in its window (the case that
leaked: an empty window was never released). The audit (``learning.audit.harness.audit``: many
runs, an event chosen on one half, Clopper-Pearson bounds on the other) must find a lower bound on
ε at or below the certificate's ε, and must catch the broken variant that skips empty windows.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from privstream.agents.releases import ReleaseAgent
from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import audit
from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import T0, Step, TwinRun, example

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
    """The broken variant: today's bug, windows without examples are never released."""

    def _schedule_node(self, policy, state, level, index, closed_at):
        if index not in self.store.pending_time_windows("s"):
            return
        super()._schedule_node(policy, state, level, index, closed_at)


def release_path(agent_class: type[ReleaseAgent]):
    def build(rng):
        def run(steps):
            seed = rng.getrandbits(62)
            twin = TwinRun(STREAM, rng_seed=seed)
            if agent_class is not ReleaseAgent:
                twin.agent.__class__ = agent_class
            observed = asyncio.run(twin.run(steps))
            # Everything public, the DP outputs included: the transcript a subscriber sees.
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

        return run

    return build


# The broken variant's leak is certain (window 1 is published in one world only): 100 runs per
# stream bound it above ln(0.86/0.14) = 1.8 > ε; the honest path gets 400.
@pytest.mark.parametrize(
    ("variant", "caught", "samples"), [(ReleaseAgent, False, 400), (SkipsEmptyWindows, True, 100)]
)
def test_time_window_path_audit(variant, caught, samples):
    from privstream.learning.randomness import seeded

    result = audit(
        release_path(variant)(seeded(7)),
        PAIR,
        PrivacyGuarantee(EPSILON, 0.0),
        samples=samples,
        confidence=0.999,
        name=variant.__name__,
    )
    print(
        f"{variant.__name__}: epsilon lower bound {result.epsilon_lower_bound:.3f} "
        f"(claimed {EPSILON}), estimate {result.epsilon_estimate:.3f}"
    )
    assert (not result.passed) is caught
    if not caught:
        assert result.epsilon_lower_bound <= EPSILON
