"""What the ledger reports of its budgets and charges: the streams' budgets, spends and lifetime
figures, a user's spend, and the charges themselves (one, the unpublished ones, a stream's, the
public pages'). The rule: a read never changes the ledger, and what the public may see at a moment
is only the completed charges whose scheduled time has come by then (``_VISIBLE``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from privstream.agents.ledger_port import Charge, LifetimeFigures, NodeRange, PrivacyCost
from privstream.stream_app.store.dialect import parse_time
from privstream.stream_app.store.ledger_governance import Cursor, LedgerGovernance
from privstream.stream_app.store.ledger_rules import LifetimeState, visible_figures

CHARGE_COLUMNS = (
    "entry_id, stream_id, window_id, mechanism, epsilon, delta, release, charged_at, published_at, "
    "level, first_window, last_window, included_users, scheduled_at"
)


#: The charges the public may see at a moment (``?``): completed, and scheduled by then.
_VISIBLE = "completed_at IS NOT NULL AND (scheduled_at IS NULL OR scheduled_at <= ?)"


def node_range(level: int | None, first: int | None, last: int | None) -> NodeRange | None:
    return None if level is None or first is None or last is None else NodeRange(level, int(first), int(last))


def to_charge(row: tuple[Any, ...]) -> Charge:
    entry_id, stream_id, window_id, mechanism, epsilon, delta, release, charged, published = row[:9]
    level, first, last, included, scheduled_at = row[9:]
    return Charge(
        entry_id=int(entry_id),
        stream_id=stream_id,
        window_id=window_id,
        mechanism=mechanism,
        epsilon=float(Fraction(epsilon)),
        delta=float(Fraction(delta)),
        release=bytes(release),
        charged_at=parse_time(charged),
        published_at=parse_time(published),
        node=node_range(level, first, last),
        included_users=None if included is None else int(included),
        scheduled_at=None if scheduled_at is None else float(scheduled_at),
    )


class LedgerReads(LedgerGovernance):
    """The read side of :class:`~.ledger.SqlLedger` (its budgets, spends and charges)."""

    def _lifetime_state(self, cur: Cursor, stream_id: str) -> LifetimeState:
        row = cur.execute(
            self._q(
                "SELECT epsilon_budget, delta_budget, unranged_epsilon, unranged_delta, peak_epsilon, "
                "peak_delta FROM {streams} WHERE stream_id = ?"
            ),
            (stream_id,),
        ).fetchone()
        if row is None:
            self._stream(cur, stream_id)  # raises UnknownStreamError
        return LifetimeState.from_text(*row)

    def _figures(self, cur: Cursor, stream_id: str, state: LifetimeState) -> LifetimeFigures:
        levels = cur.execute(
            self._q("SELECT level, releases FROM {levels} WHERE stream_id = ? ORDER BY level"), (stream_id,)
        ).fetchall()
        refused = self._refusals(cur, stream_id)
        return state.figures({None if level < 0 else int(level): int(n) for level, n in levels}, refused)

    def _refusals(self, cur: Cursor, stream_id: str, visible_at: float | None = None) -> int:
        """The stream's refusals (``visible_at``: only those whose deadline has come by then)."""
        if visible_at is None:
            row = cur.execute(self._q("SELECT count(*) FROM {refusals} WHERE stream_id = ?"), (stream_id,))
        else:
            statement = self._q(
                "SELECT count(*) FROM {refusals} WHERE stream_id = ? AND "
                "(scheduled_at IS NULL OR scheduled_at <= ?)"
            )
            row = cur.execute(statement, (stream_id, visible_at))
        return int(row.fetchone()[0])

    def streams(self) -> list[str]:
        """The ids of the streams that have a budget, sorted."""
        statement = self._q("SELECT stream_id FROM {streams} ORDER BY stream_id COLLATE {binary}")
        return [
            row[0] for row in self._backend.run(lambda cur: cur.execute(statement).fetchall(), mode="read")
        ]

    def budget(self, stream_id: str) -> PrivacyCost:
        """The stream's configured lifetime (epsilon, delta) budget per example."""
        return self._backend.run(lambda cur: self._stream(cur, stream_id), mode="read").budget

    def spent(self, stream_id: str) -> PrivacyCost:
        """The stream's lifetime spend per example: the max over windows of the charges covering
        the window (charges without a node range cover every window)."""
        return self._backend.run(lambda cur: self._lifetime_state(cur, stream_id), mode="read").spent

    def remaining(self, stream_id: str) -> PrivacyCost:
        """Budget minus the spend per example, never negative (0 once a lowered budget is below it)."""
        return self._backend.run(lambda cur: self._lifetime_state(cur, stream_id), mode="read").remaining

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> LifetimeFigures:
        """The stream's lifetime figures: budget, spend per example, releases per level, refusals;
        with ``visible_at`` (Unix seconds), counting only the completed charges scheduled at or
        before it: what the public may see then (:func:`.ledger_rules.visible_figures`).

        >>> import time
        >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
        >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
        >>> for w in range(4):
        ...     _ = ledger.reserve("s", f"L0-{w}", "m", 0.25, 0.0, NodeRange.of(0, w))
        >>> _ = ledger.reserve("s", "L1-0", "m", 0.5, 0.0, NodeRange.of(1, 0))
        >>> figures = ledger.lifetime("s")
        >>> figures.spent_per_example, figures.releases_per_level
        (PrivacyCost(epsilon=0.75, delta=0.0), {0: 4, 1: 1})
        >>> ledger.lifetime("s", visible_at=time.time()).releases  # none completed: none public yet
        0
        """
        statement = self._q(
            f"SELECT level, first_window, last_window, epsilon, delta FROM {{charges}} WHERE stream_id = ? "
            f"AND {_VISIBLE}"
        )

        def read(cur: Cursor) -> LifetimeFigures:
            state = self._lifetime_state(cur, stream_id)
            if visible_at is None:
                return self._figures(cur, stream_id, state)
            rows = cur.execute(statement, (stream_id, visible_at)).fetchall()
            return visible_figures(state.budget, rows, self._refusals(cur, stream_id, visible_at))

        return self._backend.run(read, mode="snapshot")

    def refusals(self, stream_id: str, visible_at: float | None = None) -> int:
        """How many charges of the stream were refused for lack of budget (for a metric);
        ``visible_at``: only those whose release's deadline had come by then (what the public sees)."""

        def count(cur: Cursor) -> int:
            self._stream(cur, stream_id)
            return self._refusals(cur, stream_id, visible_at)

        return self._backend.run(count, mode="read")

    def user_spent(self, user_id: str) -> PrivacyCost:
        """The user's lifetime spend across every stream of the deployment (0 if never charged)."""
        statement = self._q("SELECT epsilon, delta FROM {user_spends} WHERE user_id = ?")
        row = self._backend.run(lambda cur: cur.execute(statement, (user_id,)).fetchone(), mode="read")
        if row is None:
            return PrivacyCost(0.0, 0.0)
        return PrivacyCost(float(Fraction(row[0])), float(Fraction(row[1])))

    def _lookup(
        self, cur: Cursor, stream_id: str, window_id: str, mechanism: str, *, completed: bool = True
    ) -> Charge | None:
        done = " AND completed_at IS NOT NULL" if completed else ""
        row = cur.execute(
            self._q(
                f"SELECT {CHARGE_COLUMNS} FROM {{charges}} "
                f"WHERE stream_id = ? AND window_id = ? AND mechanism = ?{done}"
            ),
            (stream_id, window_id, mechanism),
        ).fetchone()
        return None if row is None else to_charge(row)

    def lookup(self, stream_id: str, window_id: str, mechanism: str) -> Charge | None:
        """The completed charge stored under this key, if any (lets an agent skip recomputing a
        release; :meth:`reservation` also sees reservations not yet completed)."""
        return self._backend.run(lambda cur: self._lookup(cur, stream_id, window_id, mechanism), mode="read")

    def _charges(
        self, where: str, params: tuple[Any, ...], *, of_stream: str | None = None, latest: bool = False
    ) -> list[Charge]:
        """The charges ``where`` says, oldest first (``latest``: the newest only); ``of_stream``
        must have a budget (else :class:`UnknownStreamError`)."""
        order = "entry_id DESC LIMIT 1" if latest else "entry_id"
        statement = self._q(f"SELECT {CHARGE_COLUMNS} FROM {{charges}} WHERE {where} ORDER BY {order}")

        def read(cur: Cursor) -> list[Any]:
            if of_stream is not None:
                self._stream(cur, of_stream)
            return cur.execute(statement, params).fetchall()

        return [to_charge(row) for row in self._backend.run(read, mode="read")]

    def unpublished(self, stream_id: str | None = None) -> list[Charge]:
        """The outbox: completed charges not yet marked published, oldest first."""
        where = "published_at IS NULL AND completed_at IS NOT NULL"
        if stream_id is None:
            return self._charges(where, ())
        return self._charges(f"{where} AND stream_id = ?", (stream_id,))

    def entries(self, stream_id: str, visible_at: float | None = None) -> list[Charge]:
        """All completed charges of the stream, oldest first (:meth:`incomplete` lists the rest);
        with ``visible_at``, those scheduled at or before it."""
        if visible_at is None:
            return self._charges(
                "stream_id = ? AND completed_at IS NOT NULL", (stream_id,), of_stream=stream_id
            )
        return self._charges(f"stream_id = ? AND {_VISIBLE}", (stream_id, visible_at), of_stream=stream_id)

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ) -> Charge | None:
        """The stream's most recently charged release (of mechanisms starting with the prefix, of
        nodes of ``level`` if given, scheduled at or before ``visible_at`` if given) that was
        confirmed published."""
        where = "stream_id = ? AND published_at IS NOT NULL AND substr(mechanism, 1, ?) = ?"
        params: tuple[Any, ...] = (stream_id, len(mechanism_prefix), mechanism_prefix)
        if level is not None:
            where, params = f"{where} AND level = ?", (*params, level)
        if visible_at is not None:
            where, params = f"{where} AND {_VISIBLE}", (*params, visible_at)
        found = self._charges(where, params, of_stream=stream_id, latest=True)
        return found[0] if found else None

    def release_counts(
        self, stream_id: str, visible_at: float | None = None
    ) -> dict[tuple[str, int | None], int]:
        """How many completed charges the stream has per (mechanism, node level; None: no node),
        in one aggregate query: the public pages' figures without reading every release; with
        ``visible_at``, those scheduled at or before it."""
        visible = "completed_at IS NOT NULL" if visible_at is None else _VISIBLE
        statement = self._q(
            f"SELECT mechanism, level, count(*) FROM {{charges}} WHERE stream_id = ? AND {visible} "
            "GROUP BY mechanism, level"
        )
        params: tuple[Any, ...] = (stream_id,) if visible_at is None else (stream_id, visible_at)

        def read(cur: Cursor) -> list[Any]:
            self._stream(cur, stream_id)
            return cur.execute(statement, params).fetchall()

        rows = self._backend.run(read, mode="read")
        return {(mechanism, None if level is None else int(level)): int(n) for mechanism, level, n in rows}

    def published_page(
        self, stream_id: str, limit: int, before: int | None = None, visible_at: float | None = None
    ) -> list[Charge]:
        """The stream's ``limit`` most recent published charges with entry ids below ``before``
        (all if None), scheduled at or before ``visible_at`` (if given), oldest first: a bounded
        page of what the public pages list."""
        where = "stream_id = ? AND published_at IS NOT NULL" + ("" if before is None else " AND entry_id < ?")
        where += "" if visible_at is None else f" AND {_VISIBLE}"
        statement = self._q(
            f"SELECT {CHARGE_COLUMNS} FROM {{charges}} WHERE {where} ORDER BY entry_id DESC LIMIT ?"
        )
        params: tuple[Any, ...] = (
            stream_id,
            *(() if before is None else (before,)),
            *(() if visible_at is None else (visible_at,)),
            limit,
        )

        def read(cur: Cursor) -> list[Any]:
            self._stream(cur, stream_id)
            return cur.execute(statement, params).fetchall()

        return [to_charge(row) for row in reversed(self._backend.run(read, mode="read"))]
