"""The private quality of each hypothesis release, in the service: with ``quality_epsilon`` set,
the release of every node that ends at window ``w - 1`` is scored on window ``w``'s examples (which
it never saw), and the estimate (:func:`privstream.learning.quality.estimate_error`) goes out
inside window ``w``'s own hypothesis release (``evaluations``), at its deadline.

* **The charge.** Each estimate is its own ledger entry, ``quality:<learner>:L<j>`` on window ``w``
  (its node range: window ``w`` alone), reserved before anything is read, with a secret seed its
  noise is derived from (a recomputation after a crash is bit-identical). A window is scored for
  the nodes of the levels ``j`` with ``w % 2^j == 0``, at most ``top_level + 1`` of them: the
  lifetime bound adds ``(top_level + 1) · quality_epsilon`` per example. The entry holds no bytes
  (its estimate travels in the window's release, replayed from that release's own entry) and is
  marked published at once: nothing of its own is sent.
* **What is read.** The scored release's published bytes (public) and the window's stored rows:
  at most ``max_node_examples`` of them (the first ones of the node's order), so the work is
  bounded by public sizes. A count window's size is public (replace-one: only the count is noised);
  a time window's is not (add/remove-one: the count and the size are, together; a capped window
  keeps a subset, where an addition can become a replacement, which moves the pair by 1 only).
* **When.** The estimate is computed under the stream's lock before the window's defaults, once the
  scored releases' preparation is over (the lock's order), so the default and the fit carry the
  same estimates and the release's deadline is unchanged. Which estimates a release carries is a
  function of the schedule (the nodes ending just before its window, the ledger's refusals), never
  of the data.

>>> quality_key("generic", 2)
'quality:generic:L2'
>>> scored_nodes(8, top_level=3), scored_nodes(6, top_level=3), scored_nodes(0, top_level=3)
([(0, 7), (1, 3), (2, 1), (3, 0)], [(0, 5), (1, 2)], [])
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import numpy as np

from privstream.agents.interfaces import ReleaseMetrics, WindowData
from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    NodeRange,
    PrivacyLedger,
    public_entry_id,
)
from privstream.agents.releases.policy import Product, ReleasePolicy
from privstream.agents.releases.state import StreamState
from privstream.agents.windows import node_id
from privstream.learning.errors import InvariantError
from privstream.learning.quality import DEFAULT_CONFIDENCE, estimate_error
from privstream.learning.randomness import RandomSource
from privstream.schemas import ErrorEstimate, ReleaseEvaluation

log = logging.getLogger(__name__)

#: What an estimate's interval states (each evaluation carries it).
QUALITY_RULE = (
    "the release is scored on the examples of a later window it never saw: an epsilon-DP error count "
    "(discrete Laplace; with the window's size too where it is private); with probability at least "
    "confidence over the noise and, if the window's examples are i.i.d. draws of the distribution the "
    "release is used on, over the sample, [low, high] holds the release's true error"
)


def quality_key(learner: str, level: int) -> str:
    """The ledger's mechanism key of the estimate of a level-``level`` release of ``learner``."""
    return f"quality:{learner}:L{level}"


def scored_nodes(window: int, top_level: int) -> list[tuple[int, int]]:
    """The nodes ``(j, m)`` whose release window ``window`` scores: those ending at ``window - 1``."""
    return [
        (j, (window >> j) - 1)
        for j in range(top_level + 1)
        if window % (1 << j) == 0 and (window >> j) - 1 >= 0
    ]


def hypotheses_product(policy: ReleasePolicy) -> Product | None:
    """The stream's hypothesis product (the one scored), if any."""
    return next((p for p in policy.products if p.topic == "hypotheses"), None)


def predictions(release: bytes, xs: np.ndarray) -> np.ndarray:
    """What a published hypothesis release predicts on ``xs`` (integers or feature vectors)."""
    from privstream.learning.hypotheses import hypothesis_from_dict
    from privstream.learning.private_learners.vector_base import (
        is_vector_model_dict,
        vector_model_from_dict,
    )

    hypothesis = json.loads(release)["hypothesis"]
    if xs.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    model: Any = (
        vector_model_from_dict(hypothesis)
        if is_vector_model_dict(hypothesis)
        else hypothesis_from_dict(hypothesis)
    )
    return np.asarray(model.predict(xs))


class ReleaseScorer:
    """Scores the releases that ended just before a window on its examples (module docstring)."""

    def __init__(
        self,
        ledger: PrivacyLedger,
        metrics: ReleaseMetrics,
        *,
        offload: Callable[..., Awaitable[Any]],
        source: Callable[[str, str, bytes], RandomSource],
    ):
        self.ledger = ledger
        self.metrics = metrics
        self._offload = offload
        self._source = source  # (window id, key, seed) -> the estimate's randomness

    async def score(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        window: int,
        data: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
    ) -> tuple[ReleaseEvaluation, ...]:
        """The estimates window ``window`` (node id ``window_id``) carries, charged to it."""
        product = hypotheses_product(policy)
        epsilon = policy.quality_epsilon
        if product is None or epsilon is None:
            return ()
        family = window_id[: window_id.rindex("-L0-")]
        evaluations = []
        for level, index in scored_nodes(window, policy.top_level):
            scored_id = node_id(family, level, index)
            body = state.scorable.get(scored_id)
            if body is None:  # a restart: the ledger holds the scored release's bytes
                reservation = await self._offload(
                    self.ledger.reservation, policy.stream_id, scored_id, product.key
                )
                body = reservation.release if reservation is not None else None
            if not body:  # not released (before the stream's start, refused, withheld)
                continue
            evaluation = await self._score_one(
                policy, product, window_id, window, level, scored_id, body, data, deadline, epsilon
            )
            if evaluation is not None:
                evaluations.append(evaluation)
        for scored_id in [k for k in state.scorable if _last_window(k) < window]:
            del state.scorable[scored_id]  # scored, or never to be: forget its bytes
        return tuple(evaluations)

    async def _score_one(
        self,
        policy: ReleasePolicy,
        product: Product,
        window_id: str,
        window: int,
        level: int,
        scored_id: str,
        body: bytes,
        data: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        epsilon: float,
    ) -> ReleaseEvaluation | None:
        stream_id, key = policy.stream_id, quality_key(product.name, level)
        reservation = await self._offload(self.ledger.reservation, stream_id, window_id, key)
        if reservation is None:
            try:
                reservation = await self._offload(
                    partial(
                        self.ledger.reserve,
                        stream_id,
                        window_id,
                        key,
                        epsilon,
                        0.0,
                        NodeRange(0, window, window),
                        scheduled_at=deadline,
                    )
                )
            except BudgetExhaustedError:  # recorded by the ledger; the release goes out without it
                log.warning(
                    "stream %s: the quality estimate %s of window %s was refused by the ledger",
                    stream_id,
                    key,
                    window_id,
                    extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
                )
                return None
        if not reservation.completed:  # its estimate travels in the window's release: no bytes of its own
            charge = await self._offload(self.ledger.complete, reservation.entry_id, b"")
            await self._offload(self.ledger.mark_published, charge.entry_id)
        rows = await data()
        size_public = policy.window_kind == "count" and policy.privacy_unit == "example"
        rng = self._source(window_id, key, reservation.seed)

        def estimate() -> Any:
            cap = policy.max_node_examples
            xs, ys = (rows.xs, rows.ys) if cap is None else (rows.xs[:cap], rows.ys[:cap])
            return estimate_error(
                predictions(body, xs), ys, epsilon=epsilon, size_public=size_public, rng=rng
            )

        q = await self._offload(estimate)
        return ReleaseEvaluation(
            release=public_entry_id(stream_id, scored_id, product.key),
            level=level,
            window_id=window_id,
            ledger_entry_id=public_entry_id(stream_id, window_id, key),
            epsilon=epsilon,
            neighbouring_relation="replace-one" if size_public else "add-remove-one",
            confidence=DEFAULT_CONFIDENCE,
            size=q.size,
            estimate=ErrorEstimate(
                error=q.error, low=q.low, high=q.high, noisy_errors=q.noisy_errors, noisy_size=q.noisy_size
            ),
            rule=QUALITY_RULE,
        )


def _last_window(node: str) -> int:
    """The last level-0 window of the node with this id (``{family}-L{j}-{m}``)."""
    head, index = node.rsplit("-", 1)
    level = int(head.rsplit("-L", 1)[1])
    if level < 0:
        raise InvariantError(f"invariant broken: node id {node!r} has a negative level")
    return ((int(index) + 1) << level) - 1
