"""Preparing a node's releases before their deadline, product by product, under the stream's lock:

1. reserve the release in the ledger (the charge, write-ahead, with a secret seed and the
   deadline), before the learner runs, so budgets depend on neither the data nor the fit; at the
   user level the reservation is the individual filter's (the users present are charged unless
   their lifetime budget would be passed, the excluded ones' examples never reach the learner);
2. with a deadline, compute the default release first (the learner on the public stand-in input,
   the same parameters and randomness), so something is ready at the deadline whatever the fit
   does;
3. run the learner's fit until the deadline; its bytes replace the default if it finished in time.

Every result, the default's and the fit's, is checked as its bytes are made
(:func:`~privstream.agents.certificates.build_release`): its guarantee
(:attr:`~privstream.learning.private_learners.base.PrivateRelease.privacy_guarantee`) must be within what
the charge allows the learner (:func:`~privstream.agents.releases.policy.required_guarantee`).
A result that spent more is never published, and neither is its node's other release of that
product (the default comes from the same algorithm): the product's release of the node is
withheld, logged as an ERROR and counted for the operators (``guarantee_refused``); the charge
stays in the ledger.

The release's randomness is derived from the reservation's seed: a recomputation after a crash is
bit-identical.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import numpy as np

from privstream.agents.fits import NodeFit
from privstream.agents.interfaces import LeaseLostError, ReleaseMetrics, WindowData
from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    NodeRange,
    PrivacyLedger,
    Reservation,
    public_entry_id,
)
from privstream.agents.releases.certificate import release_bytes
from privstream.agents.releases.policy import (
    Product,
    ReleasePolicy,
    capped,
    release_steps,
    required_guarantee,
    shuffles,
)
from privstream.agents.releases.quality import ReleaseScorer
from privstream.agents.releases.state import Fit, Ready, StreamState
from privstream.agents.releases.workload import learner_call, stand_in
from privstream.agents.timing import FitProcessDied, FitRunner, FitTimedOut
from privstream.agents.windows import bound_contributions
from privstream.learning.errors import InvariantError
from privstream.learning.guarantees import GuaranteeError
from privstream.learning.randomness import RandomSource, derived
from privstream.schemas import ReleaseEvaluation, WindowInfo

log = logging.getLogger(__name__)


class NodePreparer:
    """Reserves, and computes the default and the fit of, each product's release of a node."""

    def __init__(
        self,
        ledger: PrivacyLedger,
        runner: FitRunner,
        metrics: ReleaseMetrics,
        *,
        clock: Callable[[], float],
        offload: Callable[..., Awaitable[Any]],
        rng_factory: Callable[[str], RandomSource] | None,
        library_version: str,
    ):
        self.ledger = ledger
        self.runner = runner
        self.metrics = metrics
        self.clock = clock
        self._offload = offload
        self._rng_factory = rng_factory
        self.library_version = library_version
        self.scorer = ReleaseScorer(ledger, metrics, offload=offload, source=self._source)

    async def prepare(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        readies: list[Ready],
    ) -> None:
        """Under the stream's lock: reserve every product and compute every default first (so all
        are ready at the deadline), then run the learners' fits until the deadline."""
        try:
            await self._prepare_under_lock(policy, state, window_id, info, window, deadline, level, readies)
        finally:  # whatever happened, the publisher waits for nothing that will not come
            for ready in readies:
                if not ready.available.is_set():
                    ready.settle("failed")

    async def _prepare_under_lock(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        readies: list[Ready],
    ) -> None:
        stream_id = policy.stream_id
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        async with state.lock:
            if deadline is not None:  # ingest holds off until the node's input and defaults are ready
                state.preparing = deadline
                state.prepared.clear()
            try:
                if policy.quality_epsilon is not None and level == 0:
                    try:
                        evaluations = await self._score(policy, state, window_id, info, window, deadline)
                    except LeaseLostError as exc:
                        log.warning(
                            "window %s of stream %s not released here: %s",
                            window_id,
                            stream_id,
                            exc,
                            extra=extra,
                        )
                        for ready in readies:
                            ready.settle("lost")
                        return
                    for ready in readies:
                        if ready.product.topic == "hypotheses":
                            ready.evaluations = evaluations
                fits = await self._reserve_all(
                    policy, state, window_id, info, window, deadline, level, readies
                )
            finally:
                state.preparing = None
                state.prepared.set()
            for fit in fits or ():
                try:
                    await self._fit(policy, window_id, info, level, fit)
                except GuaranteeError as exc:  # no deadline: the fit failed, its default spent more
                    self._withhold(policy, window_id, fit.ready, exc)
                except Exception:
                    log.exception(
                        "%s of window %s of stream %s failed",
                        fit.ready.product.key,
                        window_id,
                        stream_id,
                        extra=extra,
                    )
                    self.metrics.learner_failed(stream_id)
                    if not fit.ready.available.is_set():  # else its default stands
                        fit.ready.settle("failed")
            if policy.quality_epsilon is not None:  # the next window scores what goes out now
                for ready in readies:
                    if ready.product.topic == "hypotheses" and ready.outcome == "ready" and ready.body:
                        state.scorable[window_id] = ready.body

    async def _score(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
    ) -> tuple[ReleaseEvaluation, ...]:
        """The quality estimates window ``window_id`` carries (:mod:`.quality`); none if scoring
        fails (the ledger, the store: logged and counted; the charges made stay)."""
        if info.first_window is None:
            raise InvariantError("invariant broken: info.first_window is not None")
        try:
            return await self.scorer.score(policy, state, window_id, info.first_window, window, deadline)
        except LeaseLostError:
            raise
        except Exception:
            log.exception(
                "the quality estimates of window %s of stream %s failed; its release goes out without them",
                window_id,
                policy.stream_id,
                extra={"stream_id": policy.stream_id, "window_id": window_id, "ledger_entry_id": None},
            )
            self.metrics.learner_failed(policy.stream_id)
            return ()

    async def _reserve_all(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        readies: list[Ready],
    ) -> list[Fit] | None:
        """Reserve every product and compute its default (:meth:`_reserve`); the fits still to
        run, or None once the stream's partition was lost (every release then settled "lost")."""
        stream_id = policy.stream_id
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        fits: list[Fit] = []
        for ready in readies:
            try:
                fit = await self._reserve(policy, state, window_id, info, window, deadline, level, ready)
            except LeaseLostError as exc:
                log.warning(
                    "%s of window %s of stream %s not released here: %s",
                    ready.product.key,
                    window_id,
                    stream_id,
                    exc,
                    extra=extra,
                )
                for other in readies:
                    if not other.available.is_set():
                        other.settle("lost")
                return None
            except GuaranteeError as exc:
                self._withhold(policy, window_id, ready, exc)
                continue
            except Exception:
                # Not the data's (the default covers the learner): the ledger, the store.
                # Log, count, keep the window for a retry after a restart.
                log.exception(
                    "%s of window %s of stream %s failed",
                    ready.product.key,
                    window_id,
                    stream_id,
                    extra=extra,
                )
                self.metrics.learner_failed(stream_id)
                ready.settle("failed")
                continue
            if fit is not None:
                fits.append(fit)
        return fits

    async def _reserve(
        self,
        policy: ReleasePolicy,
        state: StreamState,
        window_id: str,
        info: WindowInfo,
        window: Callable[[], Awaitable[WindowData]],
        deadline: float | None,
        level: int,
        ready: Ready,
    ) -> Fit | None:
        """Reserve one product's release of the node (the charge, write-ahead, with the secret seed
        and the deadline) and, with a deadline, compute its default; the fit still to run, if any."""
        product = ready.product
        stream_id, key = policy.stream_id, product.key
        cost_epsilon, cost_delta = product.cost(level)
        if info.first_window is None:
            raise InvariantError("invariant broken: info.first_window is not None")
        if info.last_window is None:
            raise InvariantError("invariant broken: info.last_window is not None")
        node = NodeRange(level, info.first_window, info.last_window)
        users: list[str] | None = None
        data: WindowData | None = None
        reservation = await self._offload(self.ledger.reservation, stream_id, window_id, key)
        if reservation is None or not reservation.completed:
            if policy.privacy_unit == "user":
                # The individual filter: the users present in the node are charged unless their
                # lifetime budget would be passed; who is charged is decided before the learner.
                data = await window()
                users = sorted({str(u) for u in data.users.tolist()})
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
                        users=users,
                        user_budget=policy.user_budget,
                        scheduled_at=deadline,
                    )
                )
            except BudgetExhaustedError:  # the ledger recorded the refusal (a lowered budget, an old ledger)
                await self._refuse(policy, product, state, window_id, level=level)
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
        data = data if data is not None else await window()
        if reservation.included_users is not None:
            included = reservation.included_users
            excluded = len(users or ()) - len(included)
            if excluded:
                self.metrics.users_excluded(stream_id, excluded)  # private: operators only

            def keep_included(data: WindowData) -> WindowData:
                # The filter first, then each user's first k rows, then the cap (the learner's
                # input, NodeFit): an excluded user displaces no one.
                keep = np.array([str(u) in included for u in data.users.tolist()], bool)
                if policy.user_contribution_bound is None:
                    raise InvariantError("invariant broken: policy.user_contribution_bound is not None")
                return bound_contributions(
                    WindowData(*(column[keep] for column in data)), policy.user_contribution_bound
                )

            data = await self._offload(keep_included, data)
        fit = Fit(ready, data, required_guarantee(policy, cost_epsilon, cost_delta))
        if ready.deadline is not None:  # prepared early: ready at the deadline whatever the fit does
            ready.settle("ready", await self._default(policy, window_id, info, level, fit))
        return fit

    def _source(self, window_id: str, key: str, seed: bytes, purpose: str = "") -> RandomSource:
        """The release's randomness, the same on every attempt: derived from the reservation's
        secret seed (tests inject seeded sources instead). ``purpose`` "order": the node's row order."""
        if self._rng_factory:
            return self._rng_factory(f"{window_id}/{key}" + (f"/{purpose}" if purpose else ""))
        if purpose:
            return derived(hashlib.sha256(f"privstream node {purpose}/".encode() + seed).digest())
        return derived(seed)

    async def _default(
        self, policy: ReleasePolicy, window_id: str, info: WindowInfo, level: int, fit: Fit
    ) -> bytes:
        """The default release's bytes: the learner on :func:`stand_in` with the same parameters and
        randomness (data-independent, the same certificate, charged the same)."""
        product, reservation = fit.ready.product, fit.ready.reservation
        if reservation is None:
            raise InvariantError("invariant broken: reservation is not None")
        xs, ys = stand_in(policy, fit.data, level)
        source = self._source(window_id, product.key, reservation.seed)
        call = learner_call(policy, product, fit.epsilon, fit.delta, level, source)
        result = await self.runner.run(policy.stream_id, NodeFit(call, xs, ys), None)
        return self._body(
            policy,
            product,
            result,
            info,
            reservation,
            level,
            fit.ready.deadline,
            "default",
            fit.ready.evaluations,
        )

    def _withhold(self, policy: ReleasePolicy, window_id: str, ready: Ready, exc: GuaranteeError) -> None:
        """Withhold a product's release of a node whose algorithm spent more than it was charged:
        an operator alert (an ERROR and ``guarantee_refused``), nothing published."""
        stream_id, key = policy.stream_id, ready.product.key
        log.error(
            "%s of window %s of stream %s withheld: %s (charged per %s through %s); nothing is published",
            key,
            window_id,
            stream_id,
            exc,
            policy.privacy_unit,
            [step.to_dict() for step in release_steps(policy)] or "no group step",
            extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
        )
        self.metrics.guarantee_refused(stream_id)
        ready.body = None
        ready.settle("withheld")

    async def _fit(
        self, policy: ReleasePolicy, window_id: str, info: WindowInfo, level: int, fit: Fit
    ) -> None:
        """Run the learner on the node until the deadline; its release replaces the default if it
        finished in time. Without a deadline the default is computed only when the fit raised or
        its process died."""
        ready, product = fit.ready, fit.ready.product
        reservation, deadline = ready.reservation, ready.deadline
        if reservation is None:
            raise InvariantError("invariant broken: reservation is not None")
        stream_id, key, seed = policy.stream_id, product.key, reservation.seed
        extra = {"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None}
        if deadline is not None and self.clock() >= deadline:  # the defaults took the slot (or a restart)
            log.warning(
                "%s of window %s of stream %s: its deadline passed before the fit could start "
                "(%.3g s after it); its default goes out",
                key,
                window_id,
                stream_id,
                self.clock() - deadline,
                extra=extra,
            )
            self.metrics.default_released(stream_id, "unfinished")
            return
        call = NodeFit(
            learner_call(policy, product, fit.epsilon, fit.delta, level, self._source(window_id, key, seed)),
            fit.data.xs,
            fit.data.ys,
            order=self._source(window_id, key, seed, "order") if shuffles(policy) else None,
            cap=policy.max_node_examples if capped(policy) else None,
        )
        started = time.perf_counter()
        try:
            result = await self.runner.run(stream_id, call, deadline)
        except FitTimedOut:
            reason = "unfinished"
            log.warning(
                "%s of window %s of stream %s had not finished at its deadline: its default goes out",
                key,
                window_id,
                stream_id,
                extra=extra,
            )
        except FitProcessDied:
            reason = "died"
            log.warning(
                "the learner process of stream %s died during %s of window %s: its default goes out",
                stream_id,
                key,
                window_id,
                extra=extra,
            )
        except Exception:
            reason = "failed"
            log.exception(
                "%s failed on window %s of stream %s: its default goes out (charged the same)",
                key,
                window_id,
                stream_id,
                extra=extra,
            )
            self.metrics.learner_failed(stream_id)
        else:
            self.metrics.learner_ran(product.name, time.perf_counter() - started, len(fit.data.xs))
            in_time = deadline is None or self.clock() < deadline
            try:
                body = self._body(
                    policy, product, result, info, reservation, level, deadline, "fit", ready.evaluations
                )
            except GuaranteeError as exc:
                if in_time or not ready.available.is_set():
                    self._withhold(policy, window_id, ready, exc)
                else:  # its checked default went out at the deadline; the operators still hear
                    log.error("%s (after the deadline: its default went out)", exc, extra=extra)
                    self.metrics.guarantee_refused(stream_id)
                return
            if in_time:  # the learner's release goes out
                ready.settle("ready", body)
                return
            reason = "unfinished"
        self.metrics.default_released(stream_id, reason)
        if not ready.available.is_set():  # no deadline: the default only now
            ready.settle("ready", await self._default(policy, window_id, info, level, fit))

    def _body(
        self,
        policy: ReleasePolicy,
        product: Product,
        result: Any,
        info: WindowInfo,
        reservation: Reservation,
        level: int,
        deadline: float | None,
        which: str,
        evaluations: tuple[ReleaseEvaluation, ...] = (),
    ) -> bytes:
        """The release's bytes; :class:`GuaranteeError` (naming ``which``: the default or the fit)
        if the result's guarantee exceeds the charge (the builder checks it)."""
        try:
            return release_bytes(
                policy,
                product,
                result,
                info,
                reservation.receipt,
                randomness="seeded" if self._rng_factory else "secure",
                level=level,
                public_id=public_entry_id(policy.stream_id, reservation.window_id, product.key),
                deadline=deadline,
                library_version=self.library_version,
                evaluations=evaluations,
            )
        except GuaranteeError as exc:
            raise GuaranteeError(f"the {which}: {exc}") from None

    async def _refuse(
        self, policy: ReleasePolicy, product: Product, state: StreamState, window_id: str, level: int = 0
    ) -> None:
        """The ledger refused a reservation and recorded it (a safety net: a valid configuration
        never runs out; a lowered budget or a ledger shared with an older configuration can)."""
        stream_id = policy.stream_id
        if not state.exhausted:
            state.exhausted = True
            log.warning(
                "stream %s: privacy budget exhausted; no more releases (the online SOA keeps serving)",
                stream_id,
                extra={"stream_id": stream_id, "window_id": window_id, "ledger_entry_id": None},
            )
        spent = await self._offload(self.ledger.spent, stream_id)
        left = await self._offload(self.ledger.remaining, stream_id)
        self.metrics.refused(stream_id, spent.epsilon, left.epsilon)
