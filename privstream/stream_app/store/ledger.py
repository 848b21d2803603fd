"""The privacy ledger: a durable, multi-process-safe, write-ahead record of every private release.

Every release is charged here *before* it is published. The rules live in this module, once,
for every backend; a backend (:mod:`.sqlite_ledger`, :mod:`.postgres_ledger`) brings its
connections, its schema and the few statements portable SQL cannot say (a
:class:`LedgerBackend` with its :class:`~.dialect.Dialect`). Decisions about numbers (exact
rational budgets, the budget check, the individual filter) are made by :mod:`.ledger_rules`;
the ledger's identity, its budgets, the configurations it accepted and its audit log are
:mod:`.ledger_governance`'s, what it reports (budgets, spends, the charges) is
:mod:`.ledger_reads`'s and the user-level admissions charged at ingest are
:mod:`.ledger_admissions`', all mixed into :class:`SqlLedger`.

One call, :meth:`SqlLedger.charge`, checks the stream's budget, spends it and stores the release
bytes (the outbox) in one transaction. A (stream, window, mechanism) key is charged at most
once: charging it again returns the stored charge and its stored bytes, so a replay after a crash
or a rebalance re-publishes the same bytes instead of drawing fresh noise.

>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> ledger = SqliteLedger.open(":memory:", budgets={"s1": (1.0, 1e-6)})
>>> c = ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"release-0")
>>> again = ledger.charge("s1", "w0", "laplace", 0.3, 0.0, b"fresh noise")  # idempotent
>>> (again.entry_id == c.entry_id, again.release)
(True, b'release-0')
>>> ledger.spent("s1"), ledger.remaining("s1")
(PrivacyCost(epsilon=0.3, delta=0.0), PrivacyCost(epsilon=0.7, delta=1e-06))
>>> ledger.mark_published(c.entry_id)
>>> ledger.unpublished()
[]
>>> ledger.charge("s1", "w1", "laplace", 0.8, 0.0, b"release-1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privstream.agents.ledger_port.BudgetExhaustedError: stream 's1': refusing to charge window 'w1' ...
>>> ledger.refusals("s1")
1

**Accounting: a lifetime budget per example.** The release path charges nodes of the release
tree with :meth:`SqlLedger.reserve` (before the learner runs: node range, secret seed, the
individual user filter; see :mod:`privstream.agents.ledger_port` for the rules) and stores their
bytes with :meth:`SqlLedger.complete`. An example's lifetime cost is the sum of the charges whose
node covers its window; :meth:`SqlLedger.spent` is the max over windows, and a charge is refused
iff some window of its node would pass the budget. A one-shot :meth:`SqlLedger.charge` has no
node range, so it counts against every window: a ledger used only through ``charge`` is the plain
additive budget (basic sequential composition).

>>> tree = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
>>> a = tree.reserve("s", "c10-L0-0", "learner:x", 0.5, 0.0, NodeRange.of(0, 0))
>>> b = tree.reserve("s", "c10-L0-1", "learner:x", 0.5, 0.0, NodeRange.of(0, 1))  # disjoint: parallel
>>> tree.spent("s"), [r.release for r in tree.incomplete()]
(PrivacyCost(epsilon=0.5, delta=0.0), [None, None])
>>> tree.complete(a.entry_id, b"bytes of a").release, tree.complete(a.entry_id, b"other").release
(b'bytes of a', b'bytes of a')

**Budget changes between runs.** The configured budget is the limit; what was spent is never
reset. :meth:`SqlLedger.set_budget` (or ``budgets=`` on open) replaces the stored limit, records
the change in an audit table and keeps the spend; a budget lowered below the spend leaves the
stream exhausted (every new charge is refused, idempotent replays still return their stored
release).

**Concurrency.** Each operation is one transaction of the backend. Charges of a stream are
serialised by a lock on the stream's row (PostgreSQL: ``SELECT ... FOR UPDATE``; SQLite: the
file's write lock, ``BEGIN IMMEDIATE``); a replay of a charged key is answered before the lock.
A transaction body may run twice (PostgreSQL reruns it after a cut connection), so every body
here is idempotent. The user spends are one budget for the whole deployment: the backend
serialises user-level reservations of all streams (:meth:`LedgerBackend.charge_users`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from fractions import Fraction
from types import TracebackType
from typing import Any, Self

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    NodeRange,
    PrivacyCost,
    Reservation,
    UnknownEntryError,
)
from privstream.stream_app.store.ledger_admissions import LedgerAdmissions
from privstream.stream_app.store.ledger_governance import TABLES, Cursor, LedgerBackend
from privstream.stream_app.store.ledger_reads import CHARGE_COLUMNS as _CHARGE
from privstream.stream_app.store.ledger_reads import node_range as _node
from privstream.stream_app.store.ledger_reads import to_charge as _to_charge
from privstream.stream_app.store.ledger_rules import (
    SEED_BYTES,
    ChargeRequest,
    LifetimeState,
    StreamBudget,
    check_node,
    check_spends,
    check_users,
    exact,
    lifetime_from_json,
    lifetime_to_json,
    pack_users,
    release_bytes_of,
    spend_after,
    unpack_users,
    window_peak,
)

__all__ = ["TABLES", "LedgerBackend", "SqlLedger"]

log = logging.getLogger("privstream.stream_app.store.ledger")

_RESERVATION = (
    "entry_id, stream_id, window_id, mechanism, epsilon, delta, level, first_window, last_window, seed, "
    "users, lifetime, release, completed_at, published_at, epoch, scheduled_at"
)


class SqlLedger(LedgerAdmissions):
    """The privacy ledger over a :class:`LedgerBackend`; implements
    :class:`~privstream.agents.ledger_port.PrivacyLedger`. The backends' ``open`` builds one."""

    def _prepare(self, budgets: Mapping[str, tuple[float, float]] | None) -> None:
        """What opening does once the schema is current: check the spends, apply ``budgets``."""

        def read(cur: Cursor) -> tuple[list[Any], list[Any]]:
            stored = cur.execute(self._q("SELECT stream_id, epsilon_spent, delta_spent FROM {streams}"))
            rows = stored.fetchall()
            return rows, cur.execute(self._q("SELECT stream_id, epsilon, delta FROM {charges}")).fetchall()

        stored, charges = self._backend.run(read, mode="snapshot")
        check_spends(self._backend.where, stored, charges)

        self._identify()
        if budgets:

            def apply(cur: Cursor) -> None:
                for stream_id in sorted(budgets):  # one lock order for every worker
                    self._set_budget(cur, stream_id, *budgets[stream_id])

            self._backend.run(apply)

    # ----------------------------------------------------------------- budgets

    def register_stream(
        self,
        stream_id: str,
        lifetime: PrivacyCost | tuple[float, float],
        config: Mapping[str, Any] | None = None,
        *,
        who: str = "privstream worker",
    ) -> float:
        """Set the stream's lifetime budget (as :meth:`set_budget`) and return its registration
        time: Unix seconds of its first registration, never changed (the public anchor of the
        time-window schedule).

        With ``config`` (the stream's :func:`~.privacy_config.privacy_configuration`, whose budgets
        are ``lifetime``'s), the stream's configuration is checked against the one the ledger
        accepted for it: the first is recorded; one that only lowers budgets (and the costs that
        follow them) is recorded and audited, and takes effect at once; any other change, a raised
        budget included, raises :class:`ConfigMismatchError` and changes nothing (accept it with
        :meth:`accept_config`).

        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:")
        >>> first = ledger.register_stream("s", PrivacyCost(1.0, 0.0))
        >>> ledger.register_stream("s", PrivacyCost(2.0, 0.0)) == first, ledger.budget("s")
        (True, PrivacyCost(epsilon=2.0, delta=0.0))
        >>> _ = ledger.register_stream("c", (2.0, 0.0), {"epsilon_budget": 2.0, "delta_budget": 0.0})
        >>> ledger.register_stream("c", (3.0, 0.0), {"epsilon_budget": 3.0, "delta_budget": 0.0})
        Traceback (most recent call last):
        ...
        privstream.agents.ledger_port.ConfigMismatchError: stream 'c': its privacy configuration ...
        """
        epsilon_budget, delta_budget = lifetime

        def run(cur: Cursor) -> float:
            if config is not None:
                self._check_config(cur, stream_id, config, who)
            self._set_budget(cur, stream_id, epsilon_budget, delta_budget)
            cur.execute(  # a stream of a version-1 ledger without a recorded budget change has none
                self._q(
                    "UPDATE {streams} SET registered_at = coalesce(registered_at, ?) WHERE stream_id = ?"
                ),
                (time.time(), stream_id),
            )
            row = cur.execute(
                self._q("SELECT registered_at FROM {streams} WHERE stream_id = ?"), (stream_id,)
            )
            return float(row.fetchone()[0])

        return self._backend.run(run)

    def _store_spend(self, cur: Cursor, stream_id: str, spent: StreamBudget, state: LifetimeState) -> None:
        cur.execute(
            self._q(
                "UPDATE {streams} SET epsilon_spent = ?, delta_spent = ?, unranged_epsilon = ?, "
                "unranged_delta = ?, peak_epsilon = ?, peak_delta = ? WHERE stream_id = ?"
            ),
            (*spent.spend_text, *state.columns, stream_id),
        )

    def _refuse(
        self, cur: Cursor, request: ChargeRequest, node: NodeRange | None, scheduled: float | None = None
    ) -> None:
        """Record a refusal (in the transaction that is then committed, before the error is raised),
        with the refused release's deadline (``scheduled``): the public read side counts it from then."""
        cur.execute(
            self._q(
                "INSERT INTO {refusals} (stream_id, window_id, mechanism, epsilon, delta, refused_at, "
                "level, first_window, last_window, scheduled_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                *request.key,
                str(request.epsilon),
                str(request.delta),
                self._now(),
                *((None, None, None) if node is None else (node.level, node.first_window, node.last_window)),
                scheduled,
            ),
        )

    def _count_level(self, cur: Cursor, stream_id: str, level: int, span: int) -> None:
        cur.execute(
            self._q(
                "INSERT INTO {levels} (stream_id, level, releases, max_span) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (stream_id, level) DO UPDATE SET releases = {levels}.releases + 1, "
                "max_span = {greatest}({levels}.max_span, excluded.max_span)"
            ),
            (stream_id, level, span),
        )

    # ----------------------------------------------------------------- reservations (the release path)

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
        user_budget: PrivacyCost | tuple[float, float] | None = None,
        fence: Callable[[Cursor], None] | None = None,
        scheduled_at: float | None = None,
    ) -> Reservation:
        """Charge a release of ``node`` before its learner runs, and draw its secret seed: one
        transaction (see :meth:`~privstream.agents.ledger_port.PrivacyLedger.reserve`), with the
        release's deadline ``scheduled_at`` (the public read side counts it from then on).

        Refused (recorded, then :class:`BudgetExhaustedError`) iff some window of the node would
        pass the stream's lifetime budget. With ``users``: the individual filter charges each user
        whose deployment-wide spend plus (epsilon, delta) fits ``user_budget`` (default: the
        stream's budget) and excludes the others, in this same transaction. ``fence``, if given,
        runs first in the transaction and may raise to refuse with nothing written (the caller
        lost its lease on the stream's partition: :mod:`.leases`).

        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
        >>> r = ledger.reserve("s", "t60-L0-0", "learner:x", 0.6, 0.0, NodeRange.of(0, 0), users=["a", "b"])
        >>> r2 = ledger.reserve("s", "t60-L0-1", "learner:x", 0.6, 0.0, NodeRange.of(0, 1), users=["b", "c"])
        >>> sorted(r2.included_users), ledger.user_spent("b")   # b would pass 1.0: excluded
        (['c'], PrivacyCost(epsilon=0.6, delta=0.0))
        >>> ledger.reserve("s", "t60-L0-1", "learner:x", 0.6, 0.0, NodeRange.of(0, 1)).seed == r2.seed
        True
        """
        request = ChargeRequest.validate(stream_id, window_id, mechanism, epsilon, delta, b"")
        check_node(node)
        distinct = None if users is None else check_users(users)
        limit = None
        if user_budget is not None:
            limit = (
                exact(user_budget[0], "user epsilon budget"),
                exact(user_budget[1], "user delta budget", upper=Fraction(1)),
            )

        scheduled = None if scheduled_at is None else float(scheduled_at)

        def run(cur: Cursor) -> Reservation | BudgetExhaustedError:
            if fence is not None:  # the partition leases (stream_app/fencing.py): may refuse
                fence(cur)
            existing = self._reservation(cur, *request.key)  # a replay needs no lock
            if existing is not None:
                return existing
            stream = self._stream(cur, stream_id, lock=True)  # serialises the stream's charges
            existing = self._reservation(cur, *request.key)  # reserved while we waited for the lock?
            if existing is not None:
                return existing
            return self._charge(cur, request, node, stream, distinct, limit, scheduled)

        outcome = self._backend.run(run)
        if isinstance(outcome, BudgetExhaustedError):
            raise outcome
        if (outcome.cost, outcome.node) != (request.cost, node):
            log.warning(
                "ledger key %r was reserved before as %s %s; asked again as %s %s: "
                "returning the stored reservation",
                request.key,
                outcome.cost,
                outcome.node,
                request.cost,
                node,
            )
        return outcome

    def _charge(
        self,
        cur: Cursor,
        request: ChargeRequest,
        node: NodeRange,
        stream: StreamBudget,
        users: list[str] | None,
        user_limit: tuple[Fraction, Fraction] | None,
        scheduled: float | None,
    ) -> Reservation | BudgetExhaustedError:
        """A new reservation, inside :meth:`reserve`'s transaction with the stream locked: the
        refusal if a window of the node would pass the budget, else the charge with its secret
        seed, the individual filter's users and the lifetime figures after it."""
        stream_id, eps, dlt = request.key[0], request.epsilon, request.delta
        state = self._lifetime_state(cur, stream_id)
        peak = window_peak(self._overlapping(cur, stream_id, node), node.first_window, node.last_window)
        # A budget lowered below the spend stops the stream at once, fresh windows included.
        if state.exhausted or not state.allows_node(peak, eps, dlt):
            self._refuse(cur, request, node, scheduled)
            spent_eps, spent_delta = state.spent_in(peak)
            spent = PrivacyCost(float(spent_eps), float(spent_delta))
            return BudgetExhaustedError(*request.key, request.cost, spent, state.budget)
        after = state.after_node(peak, eps, dlt)
        seed = secrets.token_bytes(SEED_BYTES)
        (epoch,) = cur.execute(self._q("SELECT epoch FROM {identity}")).fetchone()
        entry_id = self._dialect.insert(
            cur,
            "INSERT INTO {charges} (stream_id, window_id, mechanism, epsilon, delta, release, "
            "charged_at, level, first_window, last_window, seed, epoch, scheduled_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*request.key, str(eps), str(dlt), b"", self._now(), *_columns(node), seed, epoch, scheduled),
            "entry_id",
        )
        included = packed = None
        if users is not None:
            budget = user_limit if user_limit is not None else (state.epsilon_budget, state.delta_budget)
            charged = self._backend.charge_users(
                cur, users, lambda spend: spend_after(spend, eps, dlt, budget)
            )
            included, packed = frozenset(charged), pack_users(charged)
        self._store_spend(cur, stream_id, stream.spend(eps, dlt), after)
        self._count_level(cur, stream_id, node.level, node.last_window - node.first_window)
        figures = self._figures(cur, stream_id, after)
        cur.execute(
            self._q("UPDATE {charges} SET included_users = ?, users = ?, lifetime = ? WHERE entry_id = ?"),
            (None if included is None else len(included), packed, lifetime_to_json(figures), entry_id),
        )
        return Reservation(
            entry_id=entry_id,
            stream_id=stream_id,
            window_id=request.key[1],
            mechanism=request.key[2],
            epsilon=float(eps),
            delta=float(dlt),
            node=node,
            seed=seed,
            included_users=included,
            lifetime=figures,
            release=None,
            published=False,
            ledger_id=self.ledger_id,
            epoch=int(epoch),
            scheduled_at=scheduled,
        )

    def _overlapping(self, cur: Cursor, stream_id: str, node: NodeRange) -> list[tuple[int, int, str, str]]:
        """The stream's ranged charges overlapping the node: per level, an index range scan
        bounded by that level's widest node."""
        rows: list[tuple[int, int, str, str]] = []
        levels = cur.execute(
            self._q("SELECT level, max_span FROM {levels} WHERE stream_id = ? AND level >= 0"), (stream_id,)
        ).fetchall()
        statement = self._q(
            "SELECT first_window, last_window, epsilon, delta FROM {charges} WHERE stream_id = ? "
            "AND level = ? AND first_window BETWEEN ? AND ? AND last_window >= ?"
        )
        for level, span in levels:
            params = (stream_id, level, node.first_window - span, node.last_window, node.first_window)
            rows += [(int(a), int(b), e, d) for a, b, e, d in cur.execute(statement, params).fetchall()]
        return rows

    def _reservation(self, cur: Cursor, stream_id: str, window_id: str, mechanism: str) -> Reservation | None:
        row = cur.execute(
            self._q(
                f"SELECT {_RESERVATION} FROM {{charges}} "
                "WHERE stream_id = ? AND window_id = ? AND mechanism = ?"
            ),
            (stream_id, window_id, mechanism),
        ).fetchone()
        return None if row is None else self._to_reservation(cur, row)

    def _to_reservation(self, cur: Cursor, row: tuple[Any, ...]) -> Reservation:
        entry_id, stream_id, window_id, mechanism, epsilon, delta, level, first, last = row[:9]
        seed, packed, lifetime, release, completed_at, published_at, epoch, scheduled_at = row[9:]
        if lifetime is not None:
            figures = lifetime_from_json(lifetime)
        else:  # a version-1 charge: no figures were recorded with it; today's stand in
            figures = self._figures(cur, stream_id, self._lifetime_state(cur, stream_id))
        return Reservation(
            entry_id=int(entry_id),
            stream_id=stream_id,
            window_id=window_id,
            mechanism=mechanism,
            epsilon=float(Fraction(epsilon)),
            delta=float(Fraction(delta)),
            node=_node(level, first, last),
            seed=b"" if seed is None else bytes(seed),
            included_users=None if packed is None else unpack_users(bytes(packed)),
            lifetime=figures,
            release=None if completed_at is None else bytes(release),
            published=published_at is not None,
            ledger_id=self.ledger_id,
            epoch=None if epoch is None else int(epoch),
            scheduled_at=None if scheduled_at is None else float(scheduled_at),
        )

    def reservation(self, stream_id: str, window_id: str, mechanism: str) -> Reservation | None:
        """The reservation stored under this key, completed or not."""
        return self._backend.run(
            lambda cur: self._reservation(cur, stream_id, window_id, mechanism), mode="snapshot"
        )

    def complete(self, entry_id: int, release: bytes) -> Charge:
        """Store a reservation's release bytes; the first bytes win (later calls return the stored
        charge, whatever bytes they pass)."""
        if not isinstance(release, bytes | bytearray | memoryview):
            raise TypeError(f"release must be bytes, got {type(release).__name__}")

        def run(cur: Cursor) -> Any:
            self._store_release(cur, entry_id, bytes(release))
            return cur.execute(self._q(f"SELECT {_CHARGE} FROM {{charges}} WHERE entry_id = ?"), (entry_id,))

        row = self._backend.run(lambda cur: run(cur).fetchone())
        if row is None:
            raise UnknownEntryError(f"no ledger entry {entry_id!r} in {self._backend.where}")
        return _to_charge(row)

    def _store_release(self, cur: Cursor, entry_id: int, release: bytes) -> None:
        cur.execute(
            self._q(
                "UPDATE {charges} SET release = ?, completed_at = ? "
                "WHERE entry_id = ? AND completed_at IS NULL"
            ),
            (release, self._now(), entry_id),
        )

    def incomplete(self, stream_id: str | None = None) -> list[Reservation]:
        """Reservations whose release was never stored, oldest first (recompute them with their seeds)."""
        where = "completed_at IS NULL" + ("" if stream_id is None else " AND stream_id = ?")
        params = () if stream_id is None else (stream_id,)
        statement = self._q(f"SELECT {_RESERVATION} FROM {{charges}} WHERE {where} ORDER BY entry_id")

        def read(cur: Cursor) -> list[Reservation]:
            return [self._to_reservation(cur, row) for row in cur.execute(statement, params).fetchall()]

        return self._backend.run(read, mode="snapshot")

    # ----------------------------------------------------------------- one-shot charges

    def charge(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        release_bytes: bytes | Callable[[ChargeReceipt], bytes],
        *,
        fence: Callable[[Cursor], None] | None = None,
    ) -> Charge:
        """Atomically check and spend the stream's budget and store the release (write-ahead).

        A one-shot charge has no node range: it counts against every window of the stream (for
        offline callers; the release path uses :meth:`reserve` and :meth:`complete`).

        If the (stream_id, window_id, mechanism) key was charged before, nothing is spent and the
        stored charge, with its stored release bytes, is returned; publish ``result.release``,
        not the bytes passed in (a reserved key not yet completed is completed with these bytes).
        Raises :class:`BudgetExhaustedError` (after recording the refusal) if the spend would take
        some window past the stream's lifetime budget.

        ``release_bytes`` may be a function of the :class:`ChargeReceipt` (entry id and budget left
        after this charge), called inside the transaction, so a release's certificate can state
        both exactly; it (and ``fence``, as in :meth:`reserve`) may be called more than once (a
        rerun after a dropped connection); only one result is stored.
        """
        request = ChargeRequest.validate(stream_id, window_id, mechanism, epsilon, delta, release_bytes)
        eps, dlt = request.epsilon, request.delta

        def run(cur: Cursor) -> Charge | BudgetExhaustedError:
            if fence is not None:
                fence(cur)
            existing = self._lookup(cur, *request.key)  # a replay needs no lock
            if existing is not None:
                return request.replayed(existing)
            stream = self._stream(cur, stream_id, lock=True)  # serialises the stream's charges
            state = self._lifetime_state(cur, stream_id)
            reserved = self._lookup(cur, *request.key, completed=False)
            if reserved is not None:  # charged while we waited, or reserved and never completed
                if self._lookup(cur, *request.key) is None:
                    receipt = ChargeReceipt(reserved.entry_id, state.remaining)
                    self._store_release(cur, reserved.entry_id, release_bytes_of(release_bytes, receipt))
                return request.replayed(self._lookup(cur, *request.key) or reserved)
            if not state.allows_everywhere(eps, dlt):
                self._refuse(cur, request, None)
                return BudgetExhaustedError(*request.key, request.cost, state.spent, state.budget)
            now = self._now()
            entry_id = self._dialect.insert(
                cur,
                "INSERT INTO {charges} (stream_id, window_id, mechanism, epsilon, delta, release, "
                "charged_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*request.key, str(eps), str(dlt), b"", now, now),
                "entry_id",
            )
            release = release_bytes_of(release_bytes, ChargeReceipt(entry_id, state.left_after(eps, dlt)))
            cur.execute(self._q("UPDATE {charges} SET release = ? WHERE entry_id = ?"), (release, entry_id))
            self._store_spend(cur, stream_id, stream.spend(eps, dlt), state.after_unranged(eps, dlt))
            self._count_level(cur, stream_id, -1, 0)
            return _to_charge(
                (entry_id, *request.key, str(eps), str(dlt), release, now, None, None, None, None, None, None)
            )

        outcome = self._backend.run(run)
        if isinstance(outcome, BudgetExhaustedError):
            raise outcome
        return outcome

    def mark_published(self, entry_id: int) -> None:
        """Record that the entry's release was published (idempotent; the first time is kept)."""
        statement = self._q(
            "UPDATE {charges} SET published_at = coalesce(published_at, ?) WHERE entry_id = ?"
        )

        def run(cur: Cursor) -> int:
            return int(cur.execute(statement, (self._now(), entry_id)).rowcount)

        if self._backend.run(run) == 0:
            raise UnknownEntryError(f"no ledger entry {entry_id!r} in {self._backend.where}")

    # ----------------------------------------------------------------- the ledger itself

    @property
    def location(self) -> str:
        """Where the ledger is, for messages: a file's path, a database's URL."""
        return self._backend.location

    def close(self) -> None:
        """Close the connections (idempotent); later calls raise :class:`LedgerError`."""
        self._backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


def _columns(node: NodeRange) -> tuple[int, int, int]:
    return node.level, node.first_window, node.last_window
