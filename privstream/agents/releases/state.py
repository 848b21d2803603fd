"""What the release agent keeps per stream and per release in flight (in memory; the ledger and the
state store hold what must survive a crash)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from privstream.agents.interfaces import WindowData
from privstream.agents.ledger_port import Reservation
from privstream.agents.releases.policy import Product, ReleasePolicy
from privstream.agents.timing import Slots
from privstream.learning.guarantees import Guarantee
from privstream.schemas import ReleaseEvaluation, WindowInfo


@dataclass
class StreamState:
    """One stream's schedule and release state in this worker's run."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one node's fits at a time, in order
    recovered: bool = False
    exhausted: bool = False
    next_time_window: int | None = None  # time windows: the first one not closed yet (the schedule)
    releases: int = 0
    scheduled: set[str] = field(default_factory=set)
    slots: Slots | None = None  # the publication slots (None: no deadlines)
    published: asyncio.Future[None] | None = None  # the last scheduled node's publication
    # The hypothesis releases prepared and not scored yet, by node id (quality estimates: the next
    # window scores them; after a restart the ledger's bytes stand in).
    scorable: dict[str, bytes] = field(default_factory=dict)
    # The deadline of the node whose input is being loaded and defaults computed (under the lock,
    # before its fits), None between; ``prepared`` is set then. Ingest holds off meanwhile.
    preparing: float | None = None
    prepared: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Ready:
    """A product's release of a node: what is ready for its deadline (filled in while the publisher
    waits for the deadline; ``available`` once there is something to publish, or an outcome)."""

    product: Product
    available: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: str = "pending"  # "ready", then "released"; or "refused", "failed", "lost"
    reservation: Reservation | None = None
    deadline: float | None = None
    body: bytes | None = None  # the bytes to publish: the default, replaced by the fit's in time
    completed: bool = False  # already stored by the ledger (a replay, or another worker's)
    published: bool = False
    evaluations: tuple[ReleaseEvaluation, ...] = ()  # the quality estimates the release carries

    def settle(self, outcome: str, body: bytes | None = None) -> None:
        self.outcome = outcome
        if body is not None:
            self.body = body
        self.available.set()


@dataclass
class Fit:
    """What the learner's fit of a product needs once its default is ready (the second phase)."""

    ready: Ready
    data: WindowData
    required: Guarantee  # what the learner may spend on its rows (its (ε, δ)), checked on its result

    @property
    def epsilon(self) -> float:
        return self.required.epsilon

    @property
    def delta(self) -> float:
        return self.required.delta


@dataclass(frozen=True, kw_only=True)
class NodeJob:
    """One node's releases to prepare: its stream, its public description and deadline, how to
    load its input (once, if at all) and the releases, one per product, to fill in."""

    policy: ReleasePolicy
    state: StreamState
    window_id: str
    info: WindowInfo
    window: Callable[[], Awaitable[WindowData]]
    deadline: float | None
    level: int
    readies: list[Ready]

    @property
    def stream_id(self) -> str:
        return self.policy.stream_id

    @property
    def log_extra(self) -> dict[str, Any]:
        """The fields every log line about the node carries."""
        return {"stream_id": self.policy.stream_id, "window_id": self.window_id, "ledger_entry_id": None}
