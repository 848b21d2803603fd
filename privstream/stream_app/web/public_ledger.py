"""The public pages' view of the ledger: the charges scheduled by now, and a stream's lifetime figures.

:class:`PublicLedger` asks the ledger for what is visible at the current time only (a release is
public from its deadline), and :func:`lifetime` turns its counts into the budget, the committed
and the spent ε of ``/streams/{id}/budget`` (:data:`LIFETIME_RULES` says how, in words);
:mod:`~privstream.stream_app.web.public` serves them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from privstream.agents.ledger_port import Charge, LifetimeFigures, PrivacyCost
from privstream.stream_app.settings import StreamConfig

__all__ = [
    "LIFETIME_RULES",
    "LedgerReader",
    "PublicLedger",
    "StreamFigures",
    "budget",
    "lifetime",
    "stream_overview",
    "streams_overview",
]


class LedgerReader(Protocol):
    """The ledger's read side, as the public pages use it (``visible_at``: the charges scheduled
    at or before it only)."""

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> LifetimeFigures: ...

    def entries(self, stream_id: str, visible_at: float | None = None) -> list[Charge]: ...

    def refusals(self, stream_id: str, visible_at: float | None = None) -> int: ...

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None: ...

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ) -> Charge | None: ...

    def release_counts(
        self, stream_id: str, visible_at: float | None = None
    ) -> dict[tuple[str, int | None], int]: ...

    def published_page(
        self, stream_id: str, limit: int, before: int | None = None, visible_at: float | None = None
    ) -> list[Charge]: ...


@dataclass(frozen=True)
class StreamFigures:
    """What the public pages show of a stream's ledger: the largest lifetime spend of an example,
    the hypothesis releases per level (a charge without a node counts as a window, level 0), the
    sanitized releases and the refused charges."""

    spent: PrivacyCost
    releases_per_level: dict[int, int] = field(default_factory=dict)
    sanitized_releases: int = 0
    refusals: int = 0


class PublicLedger:
    """The reads behind the public pages, each bounded: figures per stream, a page of releases,
    the latest release (every read of a public page goes through here), each counting only the
    releases scheduled by ``clock()`` (module docstring).

    >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
    >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (2.0, 0.0)})
    >>> for w in range(3):
    ...     ledger.mark_published(ledger.charge("s", f"w{w}", "learner:generic", 0.5, 0.0, b"{}").entry_id)
    >>> public = PublicLedger(ledger)
    >>> public.figures("s").releases_per_level, [c.window_id for c in public.releases("s", limit=2)]
    ({0: 3}, ['w1', 'w2'])
    >>> [c.window_id for c in public.releases("s", limit=2, before=public.releases("s", 2)[0].public_id)]
    ['w0']
    """

    def __init__(self, ledger: LedgerReader, clock: Callable[[], float] = time.time):
        self.ledger = ledger
        self.clock = clock

    def figures(self, stream_id: str) -> StreamFigures:
        """The stream's figures from aggregates of the ledger (never a read of every release)."""
        now = self.clock()
        per_level: dict[int, int] = {}
        sanitized = 0
        for (mechanism, level), count in self.ledger.release_counts(stream_id, visible_at=now).items():
            if mechanism.startswith("learner:"):  # a charge without a node counts as a window
                per_level[level or 0] = per_level.get(level or 0, 0) + count
            elif mechanism.startswith("sanitizer:"):
                sanitized += count
        return StreamFigures(
            self.ledger.lifetime(stream_id, visible_at=now).spent_per_example,
            dict(sorted(per_level.items())),
            sanitized,
            self.ledger.refusals(stream_id, visible_at=now),  # a refusal is public at its deadline
        )

    def releases(self, stream_id: str, limit: int, before: str | None = None) -> list[Charge]:
        """The stream's published releases older than the one whose public id is ``before`` (all
        if None): the most recent ``limit`` of them, oldest first (none if ``before`` names no
        release of the stream)."""
        entry = None
        if before is not None:
            stream, _, rest = before.partition("/")
            window_id, _, mechanism = rest.partition("/")
            charge = self.ledger.lookup(stream_id, window_id, mechanism) if stream == stream_id else None
            if charge is None:
                return []
            entry = charge.entry_id
        page = self.ledger.published_page(stream_id, limit, entry, visible_at=self.clock())
        return [c for c in page if c.release]

    def latest(self, stream_id: str, mechanism_prefix: str) -> Charge | None:
        return self.ledger.latest_published(stream_id, mechanism_prefix, visible_at=self.clock())

    def best(self, stream_id: str) -> Charge | None:
        """The hypothesis release the SDK's ``subscribe`` gives by default: the newest of the highest
        level of the release tree published so far (one aggregate, then one bounded read per level
        the stream has, from the top; a release without a node counts as level 0).

        >>> from privstream.agents.ledger_port import NodeRange
        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (2.0, 0.0)})
        >>> for level, index in [(0, 0), (0, 1), (1, 0), (0, 2)]:
        ...     node = NodeRange.of(level, index)
        ...     r = ledger.reserve("s", f"L{level}-{index}", "learner:x", 0.1, 0.0, node)
        ...     ledger.mark_published(ledger.complete(r.entry_id, b"{}").entry_id)
        >>> PublicLedger(ledger).best("s").window_id
        'L1-0'
        """
        now = self.clock()
        counts = self.ledger.release_counts(stream_id, visible_at=now)
        levels = {level for (mechanism, level), _ in counts.items() if mechanism.startswith("learner:")}
        for level in sorted((j for j in levels if j is not None), reverse=True):
            found = self.ledger.latest_published(stream_id, "learner:", level=level, visible_at=now)
            if found is not None:
                return found
        return self.ledger.latest_published(stream_id, "learner:", visible_at=now) if None in levels else None


#: How the lifetime bound follows from the charges, in words a reviewer can check.
LIFETIME_RULES = {
    "example": "parallel composition over the disjoint nodes of a level, sequential composition over "
    "the levels: an example's lifetime cost is the sum of the charges of the nodes covering "
    "its window",
    "user": "individual privacy filter (Feldman & Zrnic 2021): each user is charged only by the releases "
    "that include them, and excluded once their lifetime budget would be passed",
}


def lifetime(
    stream: StreamConfig | None, ledger: LedgerReader | PublicLedger | StreamFigures | None
) -> dict[str, Any] | None:
    """The stream's lifetime figures (public: the ledger holds only DP releases, and which nodes
    are charged is a function of the public schedule).

    * ``lifetime_epsilon_budget``: the configured bound per example (per user at the user level);
    * ``lifetime_epsilon_committed``: what the release plan will charge each example over its
      life, the sum of the levels' ε (at the user level: the budget, which the filter enforces);
    * ``lifetime_epsilon_spent``: the largest lifetime ε an example has spent so far; it reaches the
      committed ε once a top-level node is released, while examples of later windows start at 0;
    * ``lifetime_epsilon_uncommitted``: budget minus committed, what a configuration with more
      levels or a larger ε could still use;
    * ``releases_per_level``: the hypothesis releases by level of the release tree;
    * ``exhausted``: the ledger has refused releases of this stream (a lowered budget, or a ledger
      shared with an older configuration: a valid configuration never runs out).

    >>> stream = StreamConfig(name="s", hypothesis_class="thresholds:16",
    ...                       release={"epsilon": 0.5, "epsilon_budget": 2.0, "top_level": 1})
    >>> figures = lifetime(stream, StreamFigures(PrivacyCost(1.0, 0.0), {0: 2, 1: 1}))
    >>> [figures[f"lifetime_epsilon_{k}"] for k in ("budget", "committed", "spent", "uncommitted")]
    [2.0, 1.0, 1.0, 1.0]
    >>> figures["releases_per_level"], figures["exhausted"]
    ({'0': 2, '1': 1}, False)
    """
    if stream is None or stream.release is None or ledger is None:
        return None
    stream_id, config = stream.name, stream.release
    figures = ledger if isinstance(ledger, StreamFigures) else _public(ledger).figures(stream_id)
    spent = figures.spent
    committed = (
        PrivacyCost(config.epsilon_budget, config.delta_budget)
        if config.privacy_unit == "user"
        else PrivacyCost(*config.lifetime_cost)
    )
    return {
        "stream_id": stream_id,
        "accounting": "lifetime",
        "privacy_unit": config.privacy_unit,
        "lifetime_epsilon_budget": config.epsilon_budget,
        "lifetime_delta_budget": config.delta_budget,
        "lifetime_epsilon_committed": committed.epsilon,
        "lifetime_delta_committed": committed.delta,
        "lifetime_epsilon_spent": spent.epsilon,
        "lifetime_delta_spent": spent.delta,
        "lifetime_epsilon_uncommitted": max(config.epsilon_budget - committed.epsilon, 0.0),
        "lifetime_delta_uncommitted": max(config.delta_budget - committed.delta, 0.0),
        "rule": LIFETIME_RULES[config.privacy_unit],
        "top_level": config.top_level,
        "level_epsilon": config.learner_epsilons,
        "sanitizer_level_epsilon": config.sanitizer_epsilons,
        "quality_epsilon": config.quality_epsilon,
        "releases": sum(figures.releases_per_level.values()),
        "releases_per_level": {str(level): n for level, n in sorted(figures.releases_per_level.items())},
        "sanitized_releases": figures.sanitized_releases,
        "refusals": figures.refusals,
        "exhausted": figures.refusals > 0,
    }


def _public(ledger: LedgerReader | PublicLedger) -> PublicLedger:
    return ledger if isinstance(ledger, PublicLedger) else PublicLedger(ledger)


#: The figures of ``/streams/{id}/budget``, under the route's name.
budget = lifetime


def stream_overview(
    stream: StreamConfig, ledger: LedgerReader | PublicLedger | StreamFigures | None
) -> dict[str, Any]:
    """``/streams/{id}``: a stream's public configuration, status and lifetime figures."""
    entry: dict[str, Any] = {
        "stream_id": stream.name,
        "hypothesis_class": stream.hypothesis_class,
        "features": stream.features,
        "classes": stream.classes if stream.kind == "vector" else None,
        "feature_bounds": stream.feature_bounds,
        "feature_names": stream.feature_labels if stream.kind == "vector" else None,
        "release": stream.release.model_dump(mode="json") if stream.release else None,
    }
    figures = lifetime(stream, ledger)
    if figures is None:
        entry["status"] = "online only"
    else:
        entry["status"] = "budget exhausted: refusing releases" if figures["exhausted"] else "releasing"
        entry["lifetime"] = figures
    return entry


def streams_overview(
    streams: Sequence[StreamConfig], ledger: LedgerReader | PublicLedger | StreamFigures | None
) -> list[dict[str, Any]]:
    """``/streams``: every configured stream (:func:`stream_overview`)."""
    return [stream_overview(stream, ledger) for stream in streams]
