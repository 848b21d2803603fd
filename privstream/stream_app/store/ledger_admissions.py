"""User-level admissions: the individual filter's charges made when a user's rows arrive, not
when a node closes. A user's first row in level-0 window ``w`` of a stream charges that user, in
one transaction, for every node of the release tree covering ``w`` (levels ``0..top``, node
``(j, w >> j)``), each at the sum over the stream's products of that node's user-level charge;
a node paid already (from another window of it) costs nothing again. All or nothing: a user
whose deployment-wide spend plus the charge would pass the user budget is admitted to no node
of ``w`` and pays nothing (an admission to a node paid from an earlier window stands).

Every user present is charged, whether or not the node later keeps their rows (the cap leaves
some out): no user's data changes another user's budget, and a user charged for rows a node
did not keep is over-charged, which is safe. What a user paid per node is stored
(``admissions``: stream, level, node index, user, exact ε and δ as text), so admitting again is
idempotent (a replay after a restart charges nothing twice) and a node whose charge grew (a
product added) is topped up by the difference only.

>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> ledger = SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)})
>>> ledger.admit("s", 0, [(0.25, 0.0), (0.25, 0.0)], ["a", "b"])  # window 0: nodes (0, 0), (1, 0)
['a', 'b']
>>> ledger.admit("s", 1, [(0.25, 0.0), (0.25, 0.0)], ["b", "c"])  # b owes node (0, 1) only
['b', 'c']
>>> [ledger.user_spent(user).epsilon for user in "abc"]
[0.5, 0.75, 0.5]
>>> ledger.admit("s", 2, [(0.25, 0.0), (0.25, 0.0)], ["b"]), ledger.admit("s", 1, [(0.25, 0.0)] * 2, ["b"])
([], ['b'])
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from fractions import Fraction
from functools import partial

from privstream.agents.ledger_port import PrivacyCost
from privstream.stream_app.store.ledger_governance import Cursor
from privstream.stream_app.store.ledger_reads import LedgerReads
from privstream.stream_app.store.ledger_rules import Exact, Spend, check_users, exact, spend_after

__all__ = ["LedgerAdmissions", "owed"]

#: Users per statement when reading what they paid (below SQLite's bound on parameters).
_USER_BATCH = 500


def _after(spend: Spend, *, total: tuple[Fraction | int, Fraction | int], budget: Exact) -> Spend | None:
    return spend_after(spend, Fraction(total[0]), Fraction(total[1]), budget)


def _exact(spend: Spend | None) -> Exact | None:
    return None if spend is None else (Fraction(spend[0]), Fraction(spend[1]))


def owed(needed: Sequence[Exact], paid: Sequence[Exact | None]) -> tuple[Exact, ...]:
    """What a user still owes each node: its charge less what they paid for it (never below 0).

    >>> half, quarter, zero = Fraction(1, 2), Fraction(1, 4), Fraction(0)
    >>> owed([(half, zero), (quarter, zero)], [None, (quarter, zero)])
    ((Fraction(1, 2), Fraction(0, 1)), (Fraction(0, 1), Fraction(0, 1)))
    >>> owed([(half, zero)], [(quarter, zero)])   # the node's charge grew: the difference
    ((Fraction(1, 4), Fraction(0, 1)),)
    """
    result = []
    for (eps, dlt), before in zip(needed, paid, strict=True):
        before_eps, before_dlt = before if before is not None else (Fraction(0), Fraction(0))
        result.append((max(Fraction(0), eps - before_eps), max(Fraction(0), dlt - before_dlt)))
    return tuple(result)


class LedgerAdmissions(LedgerReads):
    """The ingest side of the individual filter (see the module), mixed into :class:`~.ledger.SqlLedger`."""

    def admit(
        self,
        stream_id: str,
        window: int,
        costs: Sequence[PrivacyCost | tuple[float, float]],
        users: Collection[str],
        *,
        user_budget: PrivacyCost | tuple[float, float] | None = None,
    ) -> list[str]:
        """Admit ``users`` (their first rows in level-0 window ``window``) to the nodes covering
        it; the users admitted, in the order given. ``costs[j]`` is node ``(j, window >> j)``'s
        user-level charge (summed over the stream's products); ``user_budget`` defaults to the
        stream's budget, as in :meth:`~.ledger.SqlLedger.reserve`. One transaction, serialised
        with the stream's reservations and with every user-level charge of the deployment.
        """
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        if not costs:
            raise ValueError("admit needs the charge of at least one level")
        needed = tuple((exact(eps, "epsilon"), exact(dlt, "delta", upper=Fraction(1))) for eps, dlt in costs)
        nodes = [(level, window >> level) for level in range(len(needed))]
        distinct = check_users(users)
        limit = None
        if user_budget is not None:
            limit = (
                exact(user_budget[0], "user epsilon budget"),
                exact(user_budget[1], "user delta budget", upper=Fraction(1)),
            )

        def run(cur: Cursor) -> list[str]:
            self._stream(cur, stream_id, lock=True)  # one stream's admissions one at a time
            state = self._lifetime_state(cur, stream_id)
            budget = limit if limit is not None else (state.epsilon_budget, state.delta_budget)
            paid = self._paid(cur, stream_id, nodes, distinct)
            # What a user owes depends only on what they paid (as stored text): worked out once per
            # distinct payment, so many users cost dict look-ups, not exact arithmetic each.
            dues: dict[tuple[Spend | None, ...], tuple[Exact, ...]] = {}
            groups: dict[tuple[Exact, ...], list[str]] = {}
            for user in distinct:
                payment = tuple(paid.get((user, node)) for node in nodes)
                due = dues.get(payment)
                if due is None:
                    due = dues[payment] = owed(needed, [_exact(spend) for spend in payment])
                groups.setdefault(due, []).append(user)
            admitted: set[str] = set()
            for due, group in groups.items():
                total = (sum(e for e, _ in due), sum(d for _, d in due))
                if total == (0, 0):
                    admitted.update(group)
                    continue
                charged = self._backend.charge_users(cur, group, partial(_after, total=total, budget=budget))
                rows = [
                    (stream_id, level, index, user, str(n_eps), str(n_dlt))
                    for user in charged
                    for (level, index), (n_eps, n_dlt), (o_eps, o_dlt) in zip(nodes, needed, due, strict=True)
                    if o_eps or o_dlt
                ]
                if rows:
                    cur.executemany(
                        self._q(
                            "INSERT INTO {admissions} (stream_id, level, idx, user_id, epsilon, delta) "
                            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (stream_id, level, idx, user_id) "
                            "DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta"
                        ),
                        rows,
                    )
                admitted.update(charged)
            return [user for user in distinct if user in admitted]

        result: list[str] = self._backend.run(run)
        return result

    def _paid(
        self, cur: Cursor, stream_id: str, nodes: Sequence[tuple[int, int]], users: Sequence[str]
    ) -> dict[tuple[str, tuple[int, int]], Spend]:
        """What each of ``users`` paid for each of ``nodes`` (absent: nothing): one look-up per
        node and batch of users, each a range of the primary key (never a scan of the stream's)."""
        paid: dict[tuple[str, tuple[int, int]], Spend] = {}
        for start in range(0, len(users), _USER_BATCH):
            batch = list(users[start : start + _USER_BATCH])
            marks = ", ".join("?" * len(batch))
            statement = self._q(
                "SELECT user_id, epsilon, delta FROM {admissions} "
                f"WHERE stream_id = ? AND level = ? AND idx = ? AND user_id IN ({marks})"
            )
            for node in nodes:
                for user, eps, dlt in cur.execute(statement, (stream_id, *node, *batch)):
                    paid[(user, node)] = (eps, dlt)
        return paid

    def admitted(self, stream_id: str, level: int, index: int) -> dict[str, PrivacyCost]:
        """The users admitted to node ``(level, index)`` of the stream, with what each paid."""
        rows = self._backend.run(
            lambda cur: cur.execute(
                self._q(
                    "SELECT user_id, epsilon, delta FROM {admissions} "
                    "WHERE stream_id = ? AND level = ? AND idx = ?"
                ),
                (stream_id, level, index),
            ).fetchall(),
            mode="read",
        )
        return {user: PrivacyCost(float(Fraction(e)), float(Fraction(d))) for user, e, d in rows}
