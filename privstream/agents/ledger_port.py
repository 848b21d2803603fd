"""The agents' view of the privacy ledger: its protocol, values and errors (no storage types).

The service's durable implementations are in :mod:`privstream.stream_app.store` (``SqliteLedger``,
``PostgresLedger``); the agents depend only on what is here (DESIGN.md §2: agents never import the
service).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "BudgetExhaustedError",
    "Charge",
    "ChargeReceipt",
    "LedgerBusyError",
    "LedgerCorruptError",
    "LedgerError",
    "LedgerMissingError",
    "LedgerUnavailableError",
    "PrivacyCost",
    "PrivacyLedger",
    "UnknownEntryError",
    "UnknownStreamError",
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


class UnknownStreamError(LedgerError):
    """The stream has no budget in the ledger (configure one with ``set_budget``)."""


class UnknownEntryError(LedgerError):
    """No charge has this entry id."""


class BudgetExhaustedError(LedgerError):
    """A charge was refused: it would exceed the stream's epsilon or delta budget.

    The refusal is recorded in the ledger (see :meth:`SqliteLedger.refusals`) before this is raised.
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


class PrivacyCost(NamedTuple):
    """An (epsilon, delta) pair: a charge's cost, a stream's spend, budget or remainder."""

    epsilon: float
    delta: float


@dataclass(frozen=True, slots=True)
class Charge:
    """One charged release: its ledger entry (``entry_id`` goes into the release certificate)."""

    entry_id: int
    stream_id: str
    window_id: str
    mechanism: str
    epsilon: float
    delta: float
    release: bytes
    charged_at: datetime
    published_at: datetime | None

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(self.epsilon, self.delta)

    @property
    def published(self) -> bool:
        return self.published_at is not None


@dataclass(frozen=True, slots=True)
class ChargeReceipt:
    """What a release learns while being charged: its ledger entry and the budget left after it."""

    entry_id: int
    remaining: PrivacyCost


@runtime_checkable
class PrivacyLedger(Protocol):
    """What the agents need from a privacy ledger (no storage types leak through it).

    ``charge`` is the write-ahead step: it must be called, and must succeed, before a release is
    published; it is idempotent per (stream_id, window_id, mechanism) and always returns the
    bytes to publish (the stored ones if the key was charged before).
    """

    def charge(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        release_bytes: bytes | Callable[[ChargeReceipt], bytes],
    ) -> Charge: ...

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None: ...

    def mark_published(self, entry_id: int) -> None: ...

    def unpublished(self, stream_id: str | None = None) -> list[Charge]: ...

    def spent(self, stream_id: str) -> PrivacyCost: ...

    def remaining(self, stream_id: str) -> PrivacyCost: ...

    def entries(self, stream_id: str) -> list[Charge]: ...

    def refusals(self, stream_id: str) -> int: ...
