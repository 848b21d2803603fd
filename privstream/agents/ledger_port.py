"""The agents' view of the privacy ledger: its protocol, values and errors (no storage types).

The service's durable implementations are in :mod:`privstream.stream_app.store` (``SqliteLedger``,
``PostgresLedger``); the agents depend only on what is here (agents never import the service).

**The release path: reserve, compute, complete.** A release of a node of the
release tree is charged *before* its learner runs: :meth:`PrivacyLedger.reserve` checks the
lifetime budget, spends it, draws a secret 32-byte seed and stores all of it in one transaction.
The learner then runs with randomness derived from that seed
(:func:`privstream.learning.randomness.derived`), so a retry after a crash reproduces the release
bit for bit instead of drawing fresh noise; :meth:`PrivacyLedger.complete` stores the release
bytes (first bytes win), and the outbox (:meth:`PrivacyLedger.unpublished`) lists completed
releases not yet published. :meth:`PrivacyLedger.incomplete` lists reservations whose release was
never stored (a worker died while its learner ran): recompute them with their stored seeds.

**Lifetime accounting at the example level.** Level-0 windows of a stream are
disjoint, and a node ``(j, m)`` covers windows ``[m·2^j, (m+1)·2^j)`` (:class:`NodeRange`). An
example of window ``w`` is touched by every charge whose node covers ``w``, so its lifetime cost
is the sum of those charges (parallel composition over disjoint nodes, sequential over levels);
the ledger refuses a charge iff it would take some covered window past the stream's lifetime
budget. A charge without a node range (the one-shot :meth:`PrivacyLedger.charge`, or a charge
written by schema version 1) counts against *every* window of the stream: the safe reading.

>>> node = NodeRange.of(level=2, index=3)        # node (2, 3): windows 12..15
>>> node, node.windows, node.covers(15), node.covers(16)
(NodeRange(level=2, first_window=12, last_window=15), 4, True, False)
>>> [str(n) for n in node.children()]
['L1[12..13]', 'L1[14..15]']

**User level: the individual privacy filter (Feldman & Zrnic, NeurIPS 2021).** One per-user
ledger serves the whole deployment. A user-level reservation names the users present in the
node; the ledger charges the reservation's (epsilon, delta) to each of them whose lifetime spend
plus the charge fits their budget, and excludes the others (they are left out of the node before
the learner sees it). Users absent from a node pay nothing. The included set is stored with the
reservation (a retry sees the same set); how many users were excluded is private (an operator
metric, never published).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "BudgetExhaustedError",
    "Charge",
    "ChargeReceipt",
    "ConfigMismatchError",
    "LedgerBusyError",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerIdentity",
    "LedgerMismatchError",
    "LedgerMissingError",
    "LedgerUnavailableError",
    "LifetimeFigures",
    "NodeRange",
    "PrivacyCost",
    "PrivacyLedger",
    "Reservation",
    "UnknownEntryError",
    "UnknownStreamError",
    "public_entry_id",
]


# --------------------------------------------------------------------------- errors


class LedgerError(Exception):
    """Base class of every error the ledger raises (no database driver's exception escapes it)."""


class LedgerMissingError(LedgerError):
    """The ledger (file, or schema in its database) does not exist and creating it was not requested."""


class LedgerCorruptError(LedgerError):
    """The file or database is not a valid privstream ledger (garbage, foreign schema, wrong
    version, damage)."""


class LedgerBusyError(LedgerError):
    """Another process held the ledger's write lock for longer than the busy timeout."""


class LedgerUnavailableError(LedgerError):
    """The ledger's database server could not be reached, or the connection kept breaking, for
    longer than the ledger's retry time.

    If a ``charge`` raises it, the charge was either stored whole or not at all, and its caller
    cannot tell which: charge the same key again once the database is back (charges are
    idempotent) and publish the bytes that call returns.
    """


class LedgerMismatchError(LedgerError):
    """The ledger is not the one the rest of the deployment has seen: the state store (or the
    public topic) holds history it lacks, it is another ledger, or an older copy of it. A worker
    refuses to start on it; the message names the setting or command that resolves it."""


class ConfigMismatchError(LedgerError):
    """A stream's privacy configuration differs from the one the ledger accepted for it (and is not
    a mere lowering of its budget): it must be accepted first, explicitly and audited
    (``privstream ledger accept-config``)."""

    def __init__(self, stream_id: str, differences: Mapping[str, tuple[object, object]]) -> None:
        self.stream_id = stream_id
        self.differences = dict(differences)
        changes = "; ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in sorted(self.differences.items()))
        super().__init__(
            f"stream {stream_id!r}: its privacy configuration differs from the one the ledger accepted "
            f"({changes}); accept it with `privstream ledger accept-config --stream {stream_id} "
            "--reason ...` (audited), or restore the configuration"
        )


class UnknownStreamError(LedgerError):
    """The stream has no budget in the ledger (configure one with ``set_budget``)."""


class UnknownEntryError(LedgerError):
    """No charge (or reservation) has this entry id."""


class BudgetExhaustedError(LedgerError):
    """A charge was refused: it would exceed the stream's epsilon or delta budget.

    For a charge of a node, ``spent`` is the largest lifetime spend of a window the node covers
    (the spend the charge would have raised past the budget). The refusal is recorded in the
    ledger (see :meth:`PrivacyLedger.refusals`) before this is raised.
    """

    def __init__(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        requested: PrivacyCost,
        spent: PrivacyCost,
        budget: PrivacyCost,
    ) -> None:
        self.stream_id = stream_id
        self.window_id = window_id
        self.mechanism = mechanism
        self.requested = requested
        self.spent = spent
        self.budget = budget
        super().__init__(
            f"stream {stream_id!r}: refusing to charge window {window_id!r} (mechanism {mechanism!r}) "
            f"epsilon={requested.epsilon:g}, delta={requested.delta:g}: it would exceed the stream's "
            f"budget (spent epsilon={spent.epsilon:g} of {budget.epsilon:g}, "
            f"delta={spent.delta:g} of {budget.delta:g})"
        )


# --------------------------------------------------------------------------- values


def public_entry_id(stream_id: str, window_id: str, mechanism: str) -> str:
    """The id a release is published under (its certificate's ``ledger_entry_id``): a function of
    the stream, the node and the product only. The ledger's own entry ids come from one counter for
    every stream, so their order follows when each stream's charges were made, which can depend on
    other streams' learners; they stay internal.

    >>> public_entry_id("clicks", "t60-L0-29446560", "learner:generic")
    'clicks/t60-L0-29446560/learner:generic'
    """
    return f"{stream_id}/{window_id}/{mechanism}"


class PrivacyCost(NamedTuple):
    """An (epsilon, delta) pair: a charge's cost, a stream's spend, budget or remainder."""

    epsilon: float
    delta: float


@dataclass(frozen=True, slots=True)
class NodeRange:
    """Which level-0 windows a charge covers: ``first_window..last_window`` (both inclusive).

    ``level`` is the node's level in the release tree (0: a window). The ledger accepts any range
    (it sums the charges covering each window); the release agent charges aligned dyadic nodes,
    built with :meth:`of`.

    >>> NodeRange(0, 5, 4)
    Traceback (most recent call last):
    ...
    ValueError: a node range needs 0 <= level and first_window <= last_window, got (0, 5, 4)
    """

    level: int
    first_window: int  # inclusive
    last_window: int  # inclusive

    def __post_init__(self) -> None:
        for name in ("level", "first_window", "last_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.level < 0 or self.first_window > self.last_window:
            raise ValueError(
                "a node range needs 0 <= level and first_window <= last_window, got "
                f"({self.level}, {self.first_window}, {self.last_window})"
            )

    @classmethod
    def of(cls, level: int, index: int) -> NodeRange:
        """Node ``(level, index)`` of the release tree: windows ``[index·2^level, (index+1)·2^level)``."""
        return cls(level, index << level, ((index + 1) << level) - 1)

    @property
    def windows(self) -> int:
        """How many level-0 windows the node covers."""
        return self.last_window - self.first_window + 1

    def covers(self, window: int) -> bool:
        return self.first_window <= window <= self.last_window

    def children(self) -> tuple[NodeRange, NodeRange]:
        """The two nodes one level down that this (aligned) node is merged from."""
        if self.level == 0:
            raise ValueError("a level-0 node (a window) has no children")
        half = self.windows // 2
        return (
            NodeRange(self.level - 1, self.first_window, self.first_window + half - 1),
            NodeRange(self.level - 1, self.first_window + half, self.last_window),
        )

    def __str__(self) -> str:
        return f"L{self.level}[{self.first_window}..{self.last_window}]"


@dataclass(frozen=True, slots=True)
class LifetimeFigures:
    """A stream's lifetime accounting (example level), public: a function of the schedule only.

    ``spent_per_example`` is the largest lifetime cost of an example: the max over level-0 windows
    of the sum of the charges covering the window (epsilon and delta maximised separately, so the
    pair is an upper bound). ``releases_per_level`` counts the stream's charges by node level
    (charges without a node range under the key ``None``); ``refusals`` counts refused charges.

    >>> figures = LifetimeFigures(PrivacyCost(1.0, 0.0), PrivacyCost(0.75, 0.0), {0: 4, 1: 2}, 0)
    >>> figures.remaining, figures.releases
    (PrivacyCost(epsilon=0.25, delta=0.0), 6)
    """

    budget: PrivacyCost
    spent_per_example: PrivacyCost
    releases_per_level: Mapping[int | None, int] = field(default_factory=dict)
    refusals: int = 0

    @property
    def remaining(self) -> PrivacyCost:
        """Budget minus the per-example spend, never negative (a lowered budget leaves 0)."""
        return PrivacyCost(
            max(self.budget.epsilon - self.spent_per_example.epsilon, 0.0),
            max(self.budget.delta - self.spent_per_example.delta, 0.0),
        )

    @property
    def releases(self) -> int:
        return sum(self.releases_per_level.values())


class LedgerIdentity(NamedTuple):
    """Which ledger this is and how far it has come (stated in every certificate).

    ``ledger_id`` is random, drawn once when the ledger is created; ``epoch`` is raised by one
    each time a worker starts on the ledger; ``entries`` is the highest entry id it has written.
    A copy restored from an older backup has a lower epoch or fewer entries than the deployment
    has seen.
    """

    ledger_id: str
    epoch: int
    entries: int


@dataclass(frozen=True, slots=True)
class Charge:
    """One charged release: its ledger entry (``entry_id`` goes into the release certificate).

    ``node`` is the range of windows it covers (``None``: a one-shot charge, which counts against
    every window); ``included_users`` the number of users a user-level release charged (``None``
    at the example level; the set itself stays in the ledger); ``scheduled_at`` the release's
    deadline (Unix seconds; ``None``: published when computed), from which it is public.
    """

    entry_id: int
    stream_id: str
    window_id: str
    mechanism: str
    epsilon: float
    delta: float
    release: bytes
    charged_at: datetime
    published_at: datetime | None
    node: NodeRange | None = None
    included_users: int | None = None
    scheduled_at: float | None = None

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(self.epsilon, self.delta)

    @property
    def published(self) -> bool:
        return self.published_at is not None

    @property
    def public_id(self) -> str:
        """The id the release is published under (:func:`public_entry_id`)."""
        return public_entry_id(self.stream_id, self.window_id, self.mechanism)

    def visible(self, now: float) -> bool:
        """Whether public pages show the release at ``now``: from its scheduled time on."""
        return self.scheduled_at is None or self.scheduled_at <= now

    @property
    def level(self) -> int | None:
        return None if self.node is None else self.node.level


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """A reserved (charged) release of a node: what the learner needs to run, and to run again.

    ``seed`` holds 32 secret random bytes drawn at reservation: the learner's randomness is
    :func:`privstream.learning.randomness.derived` from it, so a recomputation after a crash is
    bit-identical. It is never published. ``included_users`` is the filter's choice at the user
    level (``None`` at the example level). ``lifetime`` is the stream's figures right after this
    charge. ``release`` is ``None`` until :meth:`PrivacyLedger.complete` stores the bytes.
    ``scheduled_at`` is the release's deadline, fixed at reservation (``None``: none).
    """

    entry_id: int
    stream_id: str
    window_id: str  # the node id
    mechanism: str
    epsilon: float
    delta: float
    node: NodeRange | None
    seed: bytes
    included_users: frozenset[str] | None
    lifetime: LifetimeFigures
    release: bytes | None
    published: bool
    ledger_id: str | None = None  # the ledger's identity and epoch when it was reserved
    epoch: int | None = None
    scheduled_at: float | None = None  # the release's deadline, fixed at reservation

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(self.epsilon, self.delta)

    @property
    def receipt(self) -> ChargeReceipt:
        """What the release's certificate states of its charge."""
        return ChargeReceipt(self.entry_id, self.lifetime.remaining, self.ledger_id, self.epoch)

    @property
    def completed(self) -> bool:
        return self.release is not None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.stream_id, self.window_id, self.mechanism

    @property
    def public_id(self) -> str:
        """The id the release is published under (:func:`public_entry_id`)."""
        return public_entry_id(self.stream_id, self.window_id, self.mechanism)

    def __repr__(self) -> str:  # never print the seed (it is a secret), nor a million user ids
        users = None if self.included_users is None else len(self.included_users)
        return (
            f"Reservation(entry_id={self.entry_id}, key={self.key!r}, cost={self.cost}, "
            f"node={self.node}, included_users={users}, completed={self.completed}, "
            f"published={self.published})"
        )


@dataclass(frozen=True, slots=True)
class ChargeReceipt:
    """What a release learns while being charged: its ledger entry, the budget left after it, and
    the ledger's identity and epoch (``None`` where the ledger has none, e.g. in offline use)."""

    entry_id: int
    remaining: PrivacyCost
    ledger_id: str | None = None
    ledger_epoch: int | None = None


@runtime_checkable
class PrivacyLedger(Protocol):
    """What the agents need from a privacy ledger (no storage types leak through it).

    The release path is :meth:`reserve` (the charge, write-ahead, before the
    learner runs), then :meth:`complete` (the bytes), :meth:`mark_published` (the outbox).
    :meth:`charge` is the one-shot form (reserve a charge without a node range and complete it in
    one transaction) for offline callers; it is idempotent per (stream_id, window_id, mechanism)
    and always returns the bytes to publish (the stored ones if the key was charged before).
    """

    def register_stream(self, stream_id: str, lifetime: PrivacyCost) -> float:
        """Set (or change, audited) the stream's lifetime budget per example (or per user); return
        the stream's registration time (Unix seconds, fixed at the first registration, public:
        the anchor of the time-window schedule). The lifetime spend is never reset."""
        ...

    def reserve(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        node: NodeRange,
        *,
        users: Collection[str] | None = None,
        user_budget: PrivacyCost | None = None,
        scheduled_at: float | None = None,
    ) -> Reservation:
        """Charge a release of ``node`` in one atomic transaction and draw its secret seed.

        Idempotent per (stream_id, window_id, mechanism): a second call returns the stored
        reservation unchanged (same entry, seed and included users). Refuses (records the
        refusal durably, then raises :class:`BudgetExhaustedError`) iff some window of the node
        would pass the stream's lifetime budget. With ``users`` (user level): charges (epsilon,
        delta) to each user whose deployment-wide spend plus the charge fits ``user_budget``
        (default: the stream's lifetime budget), stores that included set; absent users pay
        nothing. ``scheduled_at`` (Unix seconds) is the release's deadline: the read side's
        ``visible_at`` counts the charge from then on.
        """
        ...

    def admit(
        self,
        stream_id: str,
        window: int,
        costs: Sequence[PrivacyCost | tuple[float, float]],
        users: Collection[str],
        *,
        user_budget: PrivacyCost | tuple[float, float] | None = None,
    ) -> list[str]:
        """User level, at ingest: charge each of ``users`` (their first rows in level-0 window
        ``window``) for every node of the release tree covering it, ``costs[j]`` for node
        ``(j, window >> j)``, all or nothing per user; the users admitted (a user who cannot pay is
        admitted to no node of the window and pays nothing). Idempotent: a node paid already costs
        nothing again (a replay after a restart)."""
        ...

    def complete(self, entry_id: int, release: bytes) -> Charge:
        """Store the reservation's release bytes; the first bytes win (a second call returns the
        stored charge unchanged). Raises :class:`UnknownEntryError` for an unknown entry."""
        ...

    def incomplete(self, stream_id: str | None = None) -> list[Reservation]:
        """Reservations whose release was never stored, oldest first: recompute them with their
        seeds (a worker died while the learner ran)."""
        ...

    def reservation(self, stream_id: str, window_id: str, mechanism: str) -> Reservation | None:
        """The reservation stored under this key, completed or not."""
        ...

    def charge(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        release_bytes: bytes | Callable[[ChargeReceipt], bytes],
    ) -> Charge: ...

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None:
        """The completed charge stored under this key, if any (see :meth:`reservation`)."""
        ...

    def mark_published(self, entry_id: int) -> None: ...

    def unpublished(self, stream_id: str | None = None) -> list[Charge]:
        """The outbox: completed charges not yet marked published, oldest first."""
        ...

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> LifetimeFigures:
        """The stream's lifetime figures; with ``visible_at`` (Unix seconds), only from the charges
        scheduled at or before it (what the public may see then)."""
        ...

    def user_spent(self, user_id: str) -> PrivacyCost:
        """A user's lifetime spend across all streams (0 for a user never charged)."""
        ...

    def spent(self, stream_id: str) -> PrivacyCost:
        """The stream's lifetime spend per example (``lifetime(...).spent_per_example``)."""
        ...

    def remaining(self, stream_id: str) -> PrivacyCost: ...

    def entries(self, stream_id: str, visible_at: float | None = None) -> list[Charge]:
        """The stream's completed charges, oldest first (``visible_at``: as :meth:`lifetime`)."""
        ...

    def refusals(self, stream_id: str, visible_at: float | None = None) -> int: ...

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ) -> Charge | None: ...
