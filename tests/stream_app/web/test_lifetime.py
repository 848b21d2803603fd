"""The public lifetime figures: the ledger's per-example lifetime spend, what the release plan
commits, the lifetime budget, releases per level of the release tree, no draining total."""

from __future__ import annotations

from types import SimpleNamespace

from privstream.agents.ledger_port import PrivacyCost
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.web.public import LIFETIME_RULES, StreamFigures, lifetime, stream_overview

STREAM = StreamConfig(
    name="s",
    hypothesis_class="thresholds:16",
    release={"epsilon": 0.25, "epsilon_budget": 1.0, "top_level": 2},
)


class TreeLedger:
    """A ledger after the release tree charged levels 0..2 over 4 windows at ε = 0.25 each, a
    sanitizer beside level 0: the lifetime spend of an example is the sum over the nodes covering
    its window, not the total of the charges."""

    def __init__(self, refusals: int = 0) -> None:
        nodes = [(0, 4), (1, 2), (2, 1)]  # (level, how many nodes)
        self._entries = [
            SimpleNamespace(mechanism="learner:generic", level=j) for j, count in nodes for _ in range(count)
        ]
        self._entries += [SimpleNamespace(mechanism="sanitizer:hierarchical", level=0) for _ in range(4)]
        self._refusals = refusals

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> SimpleNamespace:
        return SimpleNamespace(spent_per_example=PrivacyCost(0.75, 0.0))

    def spent(self, stream_id: str) -> PrivacyCost:  # the total: what a draining budget would show
        return PrivacyCost(0.25 * len(self._entries), 0.0)

    def release_counts(
        self, stream_id: str, visible_at: float | None = None
    ) -> dict[tuple[str, int | None], int]:
        counts: dict[tuple[str, int | None], int] = {}
        for entry in self._entries:
            counts[(entry.mechanism, entry.level)] = counts.get((entry.mechanism, entry.level), 0) + 1
        return counts

    def refusals(self, stream_id: str, visible_at: float | None = None) -> int:
        return self._refusals


def test_the_figures_are_the_ledgers_lifetime_spend_per_example_and_the_releases_per_level() -> None:
    figures = lifetime(STREAM, TreeLedger())
    assert figures is not None
    assert figures["lifetime_epsilon_spent"] == 0.75  # the ledger's lifetime figure, not the total 3.75
    assert figures["lifetime_epsilon_budget"] == 1.0 and figures["lifetime_epsilon_committed"] == 0.75
    assert figures["lifetime_epsilon_uncommitted"] == 0.25
    assert figures["releases_per_level"] == {"0": 4, "1": 2, "2": 1}
    assert figures["releases"] == 7 and figures["sanitized_releases"] == 4
    assert figures["rule"] == LIFETIME_RULES["example"] and figures["accounting"] == "lifetime"
    assert not figures["exhausted"]
    assert not any("remaining" in key for key in figures)  # no draining total
    assert stream_overview(STREAM, TreeLedger())["status"] == "releasing"


def test_refusals_mark_the_stream_exhausted() -> None:
    overview = stream_overview(STREAM, TreeLedger(refusals=2))
    assert overview["lifetime"]["exhausted"] and overview["status"].startswith("budget exhausted")


def test_a_stream_without_releases_or_ledger_has_no_figures() -> None:
    assert lifetime(StreamConfig(name="o", hypothesis_class="thresholds:16"), TreeLedger()) is None
    assert lifetime(STREAM, None) is None
    assert stream_overview(STREAM, None)["status"] == "online only"


def test_a_plan_that_commits_the_whole_budget_reads_as_committed_not_as_used_up() -> None:
    """Levels 0..3 at ε 0.25 commit the budget of 1 to each example; once a level-3 node is released
    its examples have spent all of it, yet the stream goes on releasing (later windows start at 0):
    the figures say committed and spent, never "remaining 0"."""
    stream = StreamConfig(
        name="s", hypothesis_class="thresholds:16", release={"epsilon_budget": 1.0, "top_level": 3}
    )
    figures = lifetime(stream, StreamFigures(PrivacyCost(1.0, 0.0), {0: 8, 1: 4, 2: 2, 3: 1}))
    assert figures is not None
    assert figures["lifetime_epsilon_committed"] == figures["lifetime_epsilon_budget"] == 1.0
    assert figures["lifetime_epsilon_spent"] == 1.0 and figures["lifetime_epsilon_uncommitted"] == 0.0
    assert not any("remaining" in key for key in figures) and not figures["exhausted"]
    assert stream_overview(stream, StreamFigures(PrivacyCost(1.0, 0.0)))["status"] == "releasing"
