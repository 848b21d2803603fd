"""The individual filter at ingest (user level): a user's first rows in a time window charge that
user, there and then, for every node of the release tree covering the window
(:meth:`~privstream.agents.ledger_port.PrivacyLedger.admit`); only the admitted users' rows are
stored. A user who cannot pay is excluded from the window at ingest (counted for the operator,
never public), so a node's close reads only rows that were paid for and names no users.

Every user present in a window is charged, whether or not the node later keeps their rows (each
user's first ``user_contribution_bound`` rows, then the first ``max_node_examples``): no user's
data changes what another user pays, and a user the cap leaves out is over-charged, which is safe.

>>> from privstream.agents.releases.policy import Product, ReleasePolicy
>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> policy = ReleasePolicy("s", None, (Product("hypotheses", None, 0.5),), window_kind="time",
...     window_seconds=60.0, privacy_unit="user", user_contribution_bound=1, top_level=1,
...     user_budget=PrivacyCost(1.0, 0.0))
>>> admission = Admission(SqliteLedger.open(":memory:", budgets={"s": (1.0, 0.0)}))
>>> rows = [(0, 7, 1, "a", 0), (1, 7, 1, "b", 0), (2, 7, 1, "a", 1)]
>>> admission.admit(policy, rows, first_open=0, now=30.0)  # a and b pay nodes (0, 0) and (1, 0): 1.0
([(0, 7, 1, 'a', 0), (1, 7, 1, 'b', 0)], 1)
>>> admission.admit(policy, [(3, 7, 1, "b", 1)], first_open=1, now=90.0)  # node (0, 1) would pass b's 1.0
([], 1)
>>> admission.ledger.user_spent("a"), admission.ledger.user_spent("b")
(PrivacyCost(epsilon=1.0, delta=0.0), PrivacyCost(epsilon=1.0, delta=0.0))
>>> admission.admit(policy, [], first_open=1, now=10_000.0), admission.open_windows("s")  # forgotten
(([], 0), [])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privstream.agents.interfaces import StateStore, WindowData
from privstream.agents.ledger_port import PrivacyCost, PrivacyLedger
from privstream.agents.releases.policy import ReleasePolicy
from privstream.agents.releases.schedule import close_time

#: A time window's row as the agent stores it: (offset, x, y, user, window index).
Row = tuple[int, Any, Any, str | None, int]


def user_costs(policy: ReleasePolicy) -> list[PrivacyCost]:
    """What a user pays for a node of each level 0..L: the sum over the stream's products.

    >>> from privstream.agents.releases.policy import Product
    >>> products = (Product("hypotheses", None, 0.5), Product("sanitized", None, 0.25, 1e-6))
    >>> user_costs(ReleasePolicy("s", None, products, top_level=1))
    [PrivacyCost(epsilon=0.75, delta=1e-06), PrivacyCost(epsilon=0.75, delta=1e-06)]
    """
    costs = []
    for level in range(policy.top_level + 1):
        charges = [product.cost(level) for product in policy.products]
        costs.append(PrivacyCost(sum(e for e, _ in charges), sum(d for _, d in charges)))
    return costs


class Admission:
    """Who was admitted to (or excluded from) each open time window of each stream, in this run.

    In memory: after a restart the ledger's admission is idempotent (a user who paid a node pays
    nothing again), so asking again is safe."""

    def __init__(self, ledger: PrivacyLedger) -> None:
        self.ledger = ledger
        # stream -> window -> user -> admitted?
        self._decided: dict[str, dict[int, dict[str, bool]]] = {}
        # stream -> (windows, users): stored rows of users who could not pay (see admit_stored)
        self._unpaid: dict[str, list[tuple[range, frozenset[str]]]] = {}

    def admit_stored(self, policy: ReleasePolicy, store: StateStore) -> None:
        """At start-up, before any close of the run: charge the users of rows the store already
        holds for nodes not yet released (rows stored by a version that charged users at the
        close, not at ingest), as if they had arrived now; idempotent for users who paid at ingest
        (a node paid costs nothing again). A user who cannot pay keeps their stored rows out of
        every node over those windows (:meth:`without_unpaid`). Costs O(stored rows), once."""
        sid, costs = policy.stream_id, user_costs(policy)
        for window in store.pending_time_windows(sid):
            rows = store.time_window(sid, window)
            users = {str(u) for u in rows.users.tolist() if u is not None}
            self._admit_held(policy, costs, range(window, window + 1), users)
        for level, index in store.nodes(sid, policy.family):
            node = store.load_node(sid, policy.family, level, index)
            if node is not None and node.users is not None:
                users = {str(u) for u in node.users.tolist()}
                self._admit_held(policy, costs, range(index << level, (index + 1) << level), users)

    def _admit_held(
        self, policy: ReleasePolicy, costs: list[PrivacyCost], windows: range, users: set[str]
    ) -> None:
        if not users:
            return
        # A node's first window: its users pay for it and every node above (over-charging the
        # levels below it they were never in, which is safe).
        admitted = self.ledger.admit(
            policy.stream_id, windows.start, costs, sorted(users), user_budget=policy.user_budget
        )
        unpaid = frozenset(users - set(admitted))
        if unpaid:
            self._unpaid.setdefault(policy.stream_id, []).append((windows, unpaid))

    def without_unpaid(self, stream_id: str, windows: range, data: WindowData) -> WindowData:
        """``data`` (a node over ``windows``) without the rows of users :meth:`admit_stored` found
        unable to pay for stored rows in those windows (no work unless there are some)."""
        unpaid: set[str] = set()
        for held, users in self._unpaid.get(stream_id, []):
            if held.start < windows.stop and windows.start < held.stop:
                unpaid |= users
        if not unpaid or data.users is None:
            return data
        keep = np.array([str(u) not in unpaid for u in data.users.tolist()], bool)
        return WindowData(*(column[keep] for column in data))

    def admit(
        self, policy: ReleasePolicy, rows: Sequence[Row], *, first_open: int, now: float
    ) -> tuple[list[Row], int]:
        """The rows of admitted users, in order, and how many users were newly excluded. Users seen
        first in a window are admitted in one ledger call per window. Windows before ``first_open``
        (closed) are forgotten, and so are those that closed on the clock (``now``) a window's
        length ago: a worker that stores rows for a stream another worker closes never learns of
        its closes (forgetting too early costs a repeated, idempotent admission, never a charge)."""
        windows = self._decided.setdefault(policy.stream_id, {})
        seconds = policy.window_seconds or 0.0
        for closed in [w for w in windows if w < first_open or close_time(policy, w) + seconds <= now]:
            del windows[closed]
        fresh: dict[int, list[str]] = {}
        for _, _, _, user, window in rows:
            decided = windows.setdefault(window, {})
            if user is not None and user not in decided:
                decided[user] = False  # until the ledger says otherwise
                fresh.setdefault(window, []).append(user)
        excluded = 0
        costs = user_costs(policy)
        for window, users in fresh.items():
            admitted = set(
                self.ledger.admit(policy.stream_id, window, costs, users, user_budget=policy.user_budget)
            )
            for user in users:
                windows[window][user] = user in admitted
            excluded += len(users) - len(admitted)
        kept = [row for row in rows if row[3] is not None and windows[row[4]][row[3]]]
        return kept, excluded

    def open_windows(self, stream_id: str) -> list[int]:
        """The windows of the stream whose users this run remembers."""
        return sorted(self._decided.get(stream_id, {}))
