"""The privacy ledger's governance: which ledger it is, what it accepted, who changed what.

Mixed into :class:`~.ledger.SqlLedger` (whose other half keeps the accounts), over the same
:class:`LedgerBackend`:

* **identity** (:meth:`LedgerGovernance.identity`): a ledger id drawn once when the ledger is
  created, an epoch raised by one at every worker start (:meth:`~LedgerGovernance.claim`), the
  highest entry id given. Certificates state the id and the epoch; a worker compares them with
  what the deployment has seen before it starts (:mod:`.identity`);
* **budgets and accepted configurations**: each stream's budget (changes recorded) and the
  privacy configuration it was accepted with (:mod:`.privacy_config`): a lowered one passes,
  anything else needs :meth:`~LedgerGovernance.accept_config`;
* **the deployment's signing keys** (:meth:`LedgerGovernance.signing_keys`): the key that signs
  its releases, recorded when the first worker starts on a new ledger, and every key rotated to
  since, with the rotation statement the replaced key signed (:meth:`~LedgerGovernance.rotate_key`);
* **the audit log**: who accepted a configuration, lowered a budget or adopted the ledger
  (:meth:`~LedgerGovernance.adopt`: continue a history this ledger lacks), when, and why.

>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> ledger = SqliteLedger.open(":memory:")
>>> ledger.claim().epoch, ledger.claim().epoch, len(ledger.identity().ledger_id)
(1, 2, 32)
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from privstream.agents.ledger_port import (
    ConfigMismatchError,
    LedgerIdentity,
    UnknownStreamError,
)
from privstream.learning.errors import InvariantError
from privstream.stream_app.store.dialect import Dialect, Mode, parse_time
from privstream.stream_app.store.ledger_rules import Spend, StreamBudget, budget_change
from privstream.stream_app.store.privacy_config import canonical, differences, only_lowers, stored

__all__ = ["TABLES", "Cursor", "KeyRotationError", "LedgerBackend", "LedgerGovernance", "RecordedKey"]

T = TypeVar("T")

#: The ledger's tables, as the portable statements name them.
TABLES = (
    "streams",
    "charges",
    "refusals",
    "budget_changes",
    "levels",
    "user_spends",
    "identity",
    "configs",
    "audit",
    "predecessors",
    "signing_keys",
    "admissions",
)


@dataclass(frozen=True)
class RecordedKey:
    """A signing key of the deployment as the ledger records it: its id, its public key (base64 of
    the 32 raw bytes), when it was added and retired (None: the current key), and the rotation
    statement (JSON) that introduced it (None: the deployment's first key)."""

    key_id: str
    public_key: str
    added_at: datetime
    retired_at: datetime | None
    statement: str | None


class KeyRotationError(ValueError):
    """A rotation the ledger refuses: the key it replaces is not the deployment's current key."""


#: A transaction's cursor (``sqlite3.Cursor``, ``psycopg.Cursor``): the statements here use only
#: ``execute``, ``executemany``, ``fetchone``, ``fetchall`` and ``rowcount``, which both have.
Cursor = Any


class LedgerBackend(Protocol):
    """What a storage backend gives the ledger: transactions, its dialect, user spends in bulk."""

    dialect: Dialect

    @property
    def where(self) -> str:
        """Names the ledger in error messages (the file, the database)."""
        ...

    @property
    def location(self) -> str:
        """The file's path or the database's URL (without secrets)."""
        ...

    def run(self, body: Callable[[Cursor], T], *, mode: Mode = "write") -> T:
        """Run ``body`` in one transaction; a body's own errors propagate after the rollback."""
        ...

    def charge_users(
        self, cur: Cursor, users: list[str], decide: Callable[[Spend], Spend | None]
    ) -> list[str]:
        """The individual filter's writes: serialised with every other user-level reservation,
        give each user (of distinct ``users``) the spend ``decide`` returns for their stored
        spend (``("0", "0")`` if never charged), keep the spend of those it returns None for,
        and return the others (the users charged) in the order given."""
        ...

    def raise_entry_ids(self, cur: Cursor, floor: int) -> None:
        """Make the next entry id larger than ``floor`` (ids never go back)."""
        ...

    def close(self) -> None: ...


class LedgerGovernance:
    """The ledger's identity, budgets, accepted configurations and audit log (see the module)."""

    def __init__(self, backend: LedgerBackend) -> None:
        self._backend = backend
        self._dialect = backend.dialect
        self._q = backend.dialect.sql
        #: This ledger's id (read when it is opened: :meth:`_identify`).
        self.ledger_id = ""

    def _identify(self) -> None:
        """Give a ledger made before identities were recorded one, and read this ledger's id."""

        def run(cur: Cursor) -> str:
            cur.execute(
                self._q(
                    "INSERT INTO {identity} (singleton, ledger_id, epoch, entry_floor, created_at) "
                    "VALUES (1, ?, 0, 0, ?) ON CONFLICT DO NOTHING"
                ),
                (secrets.token_hex(16), self._now()),
            )
            return str(cur.execute(self._q("SELECT ledger_id FROM {identity}")).fetchone()[0])

        self.ledger_id = self._backend.run(run)

    # ----------------------------------------------------------------- budgets

    def set_budget(self, stream_id: str, epsilon_budget: float, delta_budget: float) -> None:
        """Set a stream's lifetime (epsilon, delta) budget per example; what it has spent is kept.

        A budget lowered below the spend leaves the stream exhausted. Each change is recorded.

        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:")
        >>> ledger.set_budget("s", 1.0, 0.0)
        >>> _ = ledger.charge("s", "w0", "laplace", 0.6, 0.0, b"r")
        >>> ledger.set_budget("s", 0.5, 0.0)
        >>> ledger.spent("s"), ledger.remaining("s")
        (PrivacyCost(epsilon=0.6, delta=0.0), PrivacyCost(epsilon=0.0, delta=0.0))
        """
        self._backend.run(lambda cur: self._set_budget(cur, stream_id, epsilon_budget, delta_budget))

    def _check_config(self, cur: Cursor, stream_id: str, config: Mapping[str, Any], who: str) -> None:
        """Record ``config`` if it is the stream's first or lowers its budgets only; else raise."""
        row = cur.execute(
            self._q("SELECT config FROM {configs} WHERE stream_id = ?"), (stream_id,)
        ).fetchone()
        if row is None:
            # A stream registered before configurations were recorded: its budget is all there is.
            old_budget = self._find_stream(cur, stream_id)
            accepted = dict(config)
            if old_budget is not None:
                accepted.update(
                    epsilon_budget=old_budget.budget.epsilon, delta_budget=old_budget.budget.delta
                )
            action = "registered"
        else:
            accepted, action = stored(row[0]), "lowered"
        if accepted == dict(config):
            if row is None:
                self._record_config(cur, stream_id, config, who, action, "first registration")
            return
        if not only_lowers(accepted, config):
            raise ConfigMismatchError(stream_id, differences(accepted, config))
        self._record_config(cur, stream_id, config, who, "lowered", "a lower budget takes effect at once")

    def _record_config(
        self, cur: Cursor, stream_id: str, config: Mapping[str, Any], who: str, action: str, reason: str
    ) -> None:
        old = cur.execute(
            self._q("SELECT config FROM {configs} WHERE stream_id = ?"), (stream_id,)
        ).fetchone()
        text = canonical(config)
        cur.execute(
            self._q(
                "INSERT INTO {configs} (stream_id, config, accepted_at) VALUES (?, ?, ?) ON CONFLICT "
                "(stream_id) DO UPDATE SET config = excluded.config, accepted_at = excluded.accepted_at"
            ),
            (stream_id, text, self._now()),
        )
        detail = {"old": None if old is None else stored(old[0]), "new": dict(config)}
        self._audit(cur, who, f"config {action}", stream_id, reason, detail)

    def _audit(
        self,
        cur: Cursor,
        who: str,
        action: str,
        stream_id: str | None,
        reason: str,
        detail: Mapping[str, Any],
    ) -> None:
        cur.execute(
            self._q(
                "INSERT INTO {audit} (at, who, action, stream_id, reason, detail) VALUES (?, ?, ?, ?, ?, ?)"
            ),
            (self._now(), who, action, stream_id, reason, canonical(detail)),
        )

    def accept_config(self, stream_id: str, config: Mapping[str, Any], *, who: str, reason: str) -> None:
        """Accept ``config`` as the stream's privacy configuration, whatever it changes (a raised
        budget, another ε, window or learner), and set its budget: the explicit, audited way to
        change what :meth:`register_stream` refuses. ``who`` and ``reason`` go to the audit log."""
        if not reason.strip():
            raise ValueError("accepting a privacy configuration needs a reason (it is audited)")

        def run(cur: Cursor) -> None:
            self._record_config(cur, stream_id, config, who, "accepted", reason)
            self._set_budget(cur, stream_id, config["epsilon_budget"], config["delta_budget"])

        self._backend.run(run)

    def accepted_config(self, stream_id: str) -> dict[str, Any] | None:
        """The privacy configuration the ledger accepted for the stream (None: none recorded)."""
        statement = self._q("SELECT config FROM {configs} WHERE stream_id = ?")
        row = self._backend.run(lambda cur: cur.execute(statement, (stream_id,)).fetchone(), mode="read")
        return None if row is None else stored(row[0])

    def audit_log(self, stream_id: str | None = None) -> list[dict[str, Any]]:
        """The audit log, oldest first: who did what, when and why (all streams, or one)."""
        where, params = ("", ()) if stream_id is None else (" WHERE stream_id = ?", (stream_id,))
        statement = self._q(
            f"SELECT at, who, action, stream_id, reason, detail FROM {{audit}}{where} ORDER BY audit_id"
        )
        rows = self._backend.run(lambda cur: cur.execute(statement, params).fetchall(), mode="read")
        keys = ("at", "who", "action", "stream_id", "reason", "detail")
        return [
            {**dict(zip(keys, row, strict=True)), "at": parse_time(row[0]), "detail": json.loads(row[5])}
            for row in rows
        ]

    # ----------------------------------------------------------------- identity

    def identity(self) -> LedgerIdentity:
        """Which ledger this is, its epoch, and the highest entry id it has written."""
        return self._backend.run(self._identity, mode="snapshot")

    def _identity(self, cur: Cursor) -> LedgerIdentity:
        ledger_id, epoch, floor = cur.execute(
            self._q("SELECT ledger_id, epoch, entry_floor FROM {identity}")
        ).fetchone()
        (entries,) = cur.execute(self._q("SELECT coalesce(max(entry_id), 0) FROM {charges}")).fetchone()
        return LedgerIdentity(str(ledger_id), int(epoch), max(int(entries), int(floor)))

    def claim(self) -> LedgerIdentity:
        """Raise the epoch by one (a worker starts on the ledger) and return the identity."""

        def run(cur: Cursor) -> LedgerIdentity:
            cur.execute(self._q("UPDATE {identity} SET epoch = epoch + 1"))
            return self._identity(cur)

        return self._backend.run(run)

    def adopt(self, seen: Collection[LedgerIdentity], *, who: str, reason: str) -> LedgerIdentity:
        """Continue the deployment's history on this ledger although it lacks part of it (the
        ledger the state store knew is lost, or this is an older backup): its epoch and entry ids
        are raised above everything ``seen`` (what the state store and the public topics saw), so
        no id is ever given twice; the ledgers seen become its predecessors, and the adoption is
        audited. What the missing history spent is not in this ledger: prefer restoring it."""
        if not reason.strip():
            raise ValueError("adopting a ledger needs a reason (it is audited)")

        def run(cur: Cursor) -> LedgerIdentity:
            mine = self._identity(cur)
            for other in seen:
                if other.ledger_id != mine.ledger_id:
                    cur.execute(
                        self._q(
                            "INSERT INTO {predecessors} (ledger_id, epoch, entries, adopted_at) "
                            "VALUES (?, ?, ?, ?) ON CONFLICT (ledger_id) DO UPDATE SET "
                            "epoch = excluded.epoch, entries = excluded.entries"
                        ),
                        (other.ledger_id, other.epoch, other.entries, self._now()),
                    )
            seen_epoch = max((other.epoch for other in seen), default=0)
            seen_entries = max((other.entries for other in seen), default=0)
            floor = max(mine.entries, seen_entries)
            cur.execute(
                self._q("UPDATE {identity} SET epoch = ?, entry_floor = ?"),
                (max(mine.epoch, seen_epoch) + 1, floor),
            )
            self._backend.raise_entry_ids(cur, floor)
            detail = {"seen": [other._asdict() for other in seen], "was": mine._asdict()}
            self._audit(cur, who, "ledger adopted", None, reason, detail)
            return self._identity(cur)

        return self._backend.run(run)

    # ----------------------------------------------------------------- signing keys

    def signing_keys(self) -> list[RecordedKey]:
        """The deployment's signing keys, oldest first; the last one without ``retired_at`` is
        the current key (none recorded: a ledger no worker has signed for yet)."""
        return self._backend.run(self._signing_keys, mode="read")

    def _signing_keys(self, cur: Cursor) -> list[RecordedKey]:
        rows = cur.execute(
            self._q(
                "SELECT key_id, public_key, added_at, retired_at, statement FROM {signing_keys} "
                "ORDER BY row_id"
            )
        ).fetchall()
        return [
            RecordedKey(str(k), str(p), parse_time(a) or datetime.now(UTC), parse_time(r), s)
            for k, p, a, r, s in rows
        ]

    def record_first_key(self, key_id: str, public_key: str, *, who: str) -> RecordedKey:
        """Record ``key_id`` as the deployment's signing key if the ledger has none yet, and return
        the current key (another worker's, if one was recorded first: the caller compares)."""

        def run(cur: Cursor) -> RecordedKey:
            self._lock_identity(cur)  # one first key, however many workers start at once
            if not self._signing_keys(cur):
                cur.execute(
                    self._q("INSERT INTO {signing_keys} (key_id, public_key, added_at) VALUES (?, ?, ?)"),
                    (key_id, public_key, self._now()),
                )
                self._audit(
                    cur, who, "signing key recorded", None, "the deployment's first key", {"key_id": key_id}
                )
            return self._current_key(cur)

        return self._backend.run(run)

    def rotate_key(
        self,
        old_key_id: str,
        new_key_id: str,
        public_key: str,
        statement: str,
        at: datetime,
        *,
        who: str,
        reason: str,
    ) -> RecordedKey:
        """Make ``new_key_id`` the deployment's key in place of ``old_key_id`` (which must be the
        current one; :class:`KeyRotationError` otherwise), with the rotation ``statement`` (JSON,
        verified by the caller) made at ``at``, when the old key is retired; audited."""
        if not reason.strip():
            raise ValueError("rotating the signing key needs a reason (it is audited)")

        def run(cur: Cursor) -> RecordedKey:
            self._lock_identity(cur)
            keys = self._signing_keys(cur)
            current = self._current_key(cur) if keys else None
            if current is None or current.key_id != old_key_id:
                raise KeyRotationError(
                    f"the key to rotate from is {old_key_id}, but the deployment's current key in "
                    f"{self._backend.where} is {'none' if current is None else current.key_id}"
                )
            if any(k.key_id == new_key_id for k in keys):
                raise KeyRotationError(f"key {new_key_id} signed for this deployment before: draw a new key")
            now = self._dialect.time(at)
            cur.execute(
                self._q("UPDATE {signing_keys} SET retired_at = ? WHERE key_id = ?"), (now, old_key_id)
            )
            cur.execute(
                self._q(
                    "INSERT INTO {signing_keys} (key_id, public_key, added_at, statement) VALUES (?, ?, ?, ?)"
                ),
                (new_key_id, public_key, now, statement),
            )
            detail = {"old_key_id": old_key_id, "new_key_id": new_key_id}
            self._audit(cur, who, "signing key rotated", None, reason, detail)
            return self._current_key(cur)

        return self._backend.run(run)

    def _current_key(self, cur: Cursor) -> RecordedKey:
        current = [k for k in self._signing_keys(cur) if k.retired_at is None]
        if len(current) != 1:
            raise KeyRotationError(
                f"{self._backend.where} records {len(current)} current signing keys (one expected): "
                "restore the ledger's backup"
            )
        return current[0]

    def _lock_identity(self, cur: Cursor) -> None:
        """Serialise with every other writer of the identity row (SQLite: the write transaction)."""
        cur.execute(self._q("SELECT epoch FROM {identity}{for_update}")).fetchone()

    def predecessors(self) -> set[str]:
        """The ids of the ledgers this one continues (see :meth:`adopt`)."""
        statement = self._q("SELECT ledger_id FROM {predecessors}")
        return {
            row[0] for row in self._backend.run(lambda cur: cur.execute(statement).fetchall(), mode="read")
        }

    def missing_windows(self, stream_id: str, window_ids: Collection[str]) -> list[str]:
        """Which of ``window_ids`` the stream has no charge of, in the order given."""
        ids = list(dict.fromkeys(window_ids))
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        statement = self._q(
            f"SELECT DISTINCT window_id FROM {{charges}} WHERE stream_id = ? AND window_id IN ({marks})"
        )
        found = {
            row[0]
            for row in self._backend.run(
                lambda cur: cur.execute(statement, (stream_id, *ids)).fetchall(), mode="read"
            )
        }
        return [w for w in ids if w not in found]

    def missing_entries(self, keys: Collection[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """Which of the (stream, node, product) ``keys`` have no charge here, in the order given.

        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
        >>> _ = ledger.charge("s", "w0", "laplace", 0.1, 0.0, b"r")
        >>> ledger.missing_entries([("s", "w0", "laplace"), ("s", "w1", "laplace")])
        [('s', 'w1', 'laplace')]
        """
        wanted = list(dict.fromkeys(keys))
        found: set[tuple[str, str, str]] = set()
        statement = self._q(
            "SELECT stream_id, window_id, mechanism FROM {charges} WHERE stream_id = ? AND window_id = ?"
        )

        def read(cur: Cursor) -> None:
            for stream_id, window_id in dict.fromkeys((s, w) for s, w, _ in wanted):
                found.update(tuple(row) for row in cur.execute(statement, (stream_id, window_id)).fetchall())

        if wanted:
            self._backend.run(read, mode="snapshot")
        return [key for key in wanted if key not in found]

    def last_window(self, stream_id: str, family: str) -> int | None:
        """The last level-0 window a charge of the stream's node family ``family`` covers (None:
        none): the examples a state store must have seen for what this ledger charged."""
        statement = self._q(
            "SELECT max(last_window) FROM {charges} WHERE stream_id = ? AND substr(window_id, 1, ?) = ?"
        )
        prefix = f"{family}-L"
        row = self._backend.run(
            lambda cur: cur.execute(statement, (stream_id, len(prefix), prefix)).fetchone(), mode="read"
        )
        return None if row is None or row[0] is None else int(row[0])

    def newest_charge_time(self) -> datetime | None:
        """When the newest charge was made (None: none yet): the public log's checkpoint."""
        statement = self._q("SELECT max(charged_at) FROM {charges}")
        row = self._backend.run(lambda cur: cur.execute(statement).fetchone(), mode="read")
        return None if row is None or row[0] is None else parse_time(row[0])

    def raise_epoch(self, epoch: int, *, who: str, reason: str, detail: Mapping[str, Any]) -> LedgerIdentity:
        """Raise the epoch to at least ``epoch`` (a recovery replayed releases of a later epoch),
        audited as ``ledger recovered``."""

        def run(cur: Cursor) -> LedgerIdentity:
            cur.execute(self._q("UPDATE {identity} SET epoch = ? WHERE epoch < ?"), (epoch, epoch))
            self._audit(cur, who, "ledger recovered", None, reason, detail)
            return self._identity(cur)

        return self._backend.run(run)

    def _set_budget(self, cur: Cursor, stream_id: str, epsilon_budget: float, delta_budget: float) -> None:
        fresh = budget_change(stream_id, None, epsilon_budget, delta_budget)  # validates the numbers
        if fresh is None:
            raise InvariantError("invariant broken: a budget change from nothing is a change")
        budget = (str(fresh.epsilon_budget), str(fresh.delta_budget))
        cur.execute(
            self._q(
                "INSERT INTO {streams} (stream_id, epsilon_budget, delta_budget, epsilon_spent, "
                "delta_spent, registered_at) VALUES (?, ?, ?, '0', '0', ?) ON CONFLICT (stream_id) DO NOTHING"
            ),
            (stream_id, *budget, time.time()),
        )
        if cur.rowcount == 0:  # the stream exists: lock it and compare
            old = self._find_stream(cur, stream_id, lock=True)
            if budget_change(stream_id, old, epsilon_budget, delta_budget) is None:
                return  # a restart with the same configuration changes nothing
            cur.execute(
                self._q("UPDATE {streams} SET epsilon_budget = ?, delta_budget = ? WHERE stream_id = ?"),
                (*budget, stream_id),
            )
        cur.execute(
            self._q(
                "INSERT INTO {budget_changes} (stream_id, epsilon_budget, delta_budget, changed_at) "
                "VALUES (?, ?, ?, ?)"
            ),
            (stream_id, *budget, self._now()),
        )

    def _now(self) -> datetime | str:
        return self._dialect.time(datetime.now(UTC))

    def _find_stream(self, cur: Cursor, stream_id: str, *, lock: bool = False) -> StreamBudget | None:
        row = cur.execute(
            self._q(
                "SELECT epsilon_budget, delta_budget, epsilon_spent, delta_spent FROM {streams} "
                "WHERE stream_id = ?" + ("{for_update}" if lock else "")
            ),
            (stream_id,),
        ).fetchone()
        return None if row is None else StreamBudget.from_text(*row)

    def _stream(self, cur: Cursor, stream_id: str, *, lock: bool = False) -> StreamBudget:
        stream = self._find_stream(cur, stream_id, lock=lock)
        if stream is None:
            raise UnknownStreamError(
                f"stream {stream_id!r} has no privacy budget in {self._backend.where} "
                "(set one with set_budget)"
            )
        return stream
