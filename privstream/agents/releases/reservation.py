"""Reserving a product's release of a node, before its input reaches the learner: the charge is
written ahead in the ledger, with a secret seed and the deadline, so budgets depend on neither the
data nor the fit. At the user level the users were charged at ingest (:mod:`.admission`: the
individual filter), so a reservation names no users: the node holds only admitted users' rows,
each user's first k (the store bounds them), and the cap applies in the learner's input. A refusal
is the ledger's to record; a valid configuration never runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import numpy as np

from privstream.agents.interfaces import ReleaseMetrics, WindowData
from privstream.agents.ledger_port import BudgetExhaustedError, NodeRange, PrivacyLedger
from privstream.agents.releases.policy import required_guarantee
from privstream.agents.releases.state import Fit, NodeJob, Ready
from privstream.learning.errors import InvariantError

log = logging.getLogger(__name__)


class NodeReserver:
    """Reserves each product's release of a node in the ledger (or finds its reservation)."""

    def __init__(
        self, ledger: PrivacyLedger, metrics: ReleaseMetrics, *, offload: Callable[..., Awaitable[Any]]
    ):
        self.ledger = ledger
        self.metrics = metrics
        self._offload = offload

    async def reserve(self, job: NodeJob, ready: Ready) -> Fit | None:
        """Reserve one product's release of the node (the charge, write-ahead, with the secret seed
        and the deadline); the fit still to run (and its default to compute), if any."""
        policy, state, window_id, info = job.policy, job.state, job.window_id, job.info
        deadline, level, product = job.deadline, job.level, ready.product
        stream_id, key = policy.stream_id, product.key
        cost_epsilon, cost_delta = product.cost(level)
        if info.first_window is None:
            raise InvariantError("invariant broken: info.first_window is not None")
        if info.last_window is None:
            raise InvariantError("invariant broken: info.last_window is not None")
        node = NodeRange(level, info.first_window, info.last_window)
        reservation = await self._offload(self.ledger.reservation, stream_id, window_id, key)
        if reservation is None or not reservation.completed:
            try:
                reservation = await self._offload(
                    partial(
                        self.ledger.reserve,
                        stream_id,
                        window_id,
                        key,
                        cost_epsilon,
                        cost_delta,
                        node,
                        scheduled_at=deadline,
                    )
                )
            except BudgetExhaustedError:  # the ledger recorded the refusal (a lowered budget, an old ledger)
                await self._refuse(job)
                ready.settle("refused")
                return None
        ready.reservation = reservation
        ready.deadline = deadline
        if reservation.scheduled_at is not None and state.slots is not None:
            # a reservation made before a restart keeps its deadline; later slots follow it
            ready.deadline = reservation.scheduled_at
            state.slots.taken(reservation.scheduled_at)
        if reservation.completed:  # a replay, or completed concurrently by another worker
            ready.completed, ready.published = True, reservation.published
            ready.settle("ready", reservation.release)
            return None
        data = await job.window()
        if reservation.included_users is not None:
            # A reservation that named the users it charged (made before users paid at ingest, and
            # recomputed after a restart): rows of users it did not charge never reach the learner.
            data = await self._offload(only_users, data, reservation.included_users)
        return Fit(ready, data, required_guarantee(policy, cost_epsilon, cost_delta))

    async def _refuse(self, job: NodeJob) -> None:
        """The ledger refused a reservation and recorded it (a safety net: a valid configuration
        never runs out; a lowered budget or a ledger shared with an older configuration can)."""
        stream_id = job.stream_id
        if not job.state.exhausted:
            job.state.exhausted = True
            log.warning(
                "stream %s: privacy budget exhausted; no more releases (the online SOA keeps serving)",
                stream_id,
                extra=job.log_extra,
            )
        spent = await self._offload(self.ledger.spent, stream_id)
        left = await self._offload(self.ledger.remaining, stream_id)
        self.metrics.refused(stream_id, spent.epsilon, left.epsilon)


def only_users(data: WindowData, users: frozenset[str]) -> WindowData:
    """The node's rows of ``users`` only (whole users go: each kept user keeps their first k rows).

    >>> rows = WindowData(np.array([1, 2, 3]), np.array([0, 1, 0]), np.array(["a", "b", "a"]), np.arange(3))
    >>> only_users(rows, frozenset({"a"})).xs.tolist()
    [1, 3]
    """
    keep = np.array([str(u) in users for u in data.users.tolist()], bool)
    return WindowData(*(column[keep] for column in data))
