"""Preparing a node's releases before their deadline, product by product, under the stream's lock:

1. reserve the release in the ledger (:mod:`.reservation`: the charge, write-ahead, with a secret
   seed and the deadline, before the learner runs);
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
from typing import Any

from privstream.agents.fits import NodeFit
from privstream.agents.interfaces import LeaseLostError, ReleaseMetrics
from privstream.agents.ledger_port import PrivacyLedger, Reservation, public_entry_id
from privstream.agents.releases.certificate import release_bytes
from privstream.agents.releases.policy import capped, release_steps, shuffles
from privstream.agents.releases.quality import ReleaseScorer
from privstream.agents.releases.reservation import NodeReserver
from privstream.agents.releases.state import Fit, NodeJob, Ready
from privstream.agents.releases.workload import learner_call, stand_in
from privstream.agents.timing import FitProcessDied, FitRunner, FitTimedOut
from privstream.learning.errors import InvariantError
from privstream.learning.guarantees import GuaranteeError
from privstream.learning.randomness import RandomSource, derived
from privstream.schemas import ReleaseEvaluation

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
        self.reserver = NodeReserver(ledger, metrics, offload=offload)

    async def prepare(self, job: NodeJob) -> None:
        """Under the stream's lock: reserve every product and compute every default first (so all
        are ready at the deadline), then run the learners' fits until the deadline."""
        try:
            await self._prepare_under_lock(job)
        finally:  # whatever happened, the publisher waits for nothing that will not come
            for ready in job.readies:
                if not ready.available.is_set():
                    ready.settle("failed")

    async def _prepare_under_lock(self, job: NodeJob) -> None:
        policy, state, window_id, readies = job.policy, job.state, job.window_id, job.readies
        stream_id, extra = job.stream_id, job.log_extra
        async with state.lock:
            if job.deadline is not None:  # ingest holds off until the node's input and defaults are ready
                state.preparing = job.deadline
                state.prepared.clear()
            try:
                if policy.quality_epsilon is not None and job.level == 0:
                    try:
                        evaluations = await self._score(job)
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
                fits = await self._reserve_all(job)
            finally:
                state.preparing = None
                state.prepared.set()
            for fit in fits or ():
                try:
                    await self._fit(job, fit)
                except GuaranteeError as exc:  # no deadline: the fit failed, its default spent more
                    self._withhold(job, fit.ready, exc)
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

    async def _score(self, job: NodeJob) -> tuple[ReleaseEvaluation, ...]:
        """The quality estimates the node's window carries (:mod:`.quality`); none if scoring
        fails (the ledger, the store: logged and counted; the charges made stay)."""
        if job.info.first_window is None:
            raise InvariantError("invariant broken: info.first_window is not None")
        try:
            return await self.scorer.score(
                job.policy, job.state, job.window_id, job.info.first_window, job.window, job.deadline
            )
        except LeaseLostError:
            raise
        except Exception:
            log.exception(
                "the quality estimates of window %s of stream %s failed; its release goes out without them",
                job.window_id,
                job.stream_id,
                extra=job.log_extra,
            )
            self.metrics.learner_failed(job.stream_id)
            return ()

    async def _reserve_all(self, job: NodeJob) -> list[Fit] | None:
        """Reserve every product (:class:`~.reservation.NodeReserver`) and, with a deadline, compute
        its default; the fits still to run, or None once the stream's partition was lost (every
        release then settled "lost")."""
        fits: list[Fit] = []
        for ready in job.readies:
            try:
                fit = await self.reserver.reserve(job, ready)
                if fit is not None and ready.deadline is not None:  # ready at the deadline, whatever the fit
                    ready.settle("ready", await self._default(job, fit))
            except LeaseLostError as exc:
                log.warning(
                    "%s of window %s of stream %s not released here: %s",
                    ready.product.key,
                    job.window_id,
                    job.stream_id,
                    exc,
                    extra=job.log_extra,
                )
                for other in job.readies:
                    if not other.available.is_set():
                        other.settle("lost")
                return None
            except GuaranteeError as exc:
                self._withhold(job, ready, exc)
                continue
            except Exception:
                # Not the data's (the default covers the learner): the ledger, the store.
                # Log, count, keep the window for a retry after a restart.
                log.exception(
                    "%s of window %s of stream %s failed",
                    ready.product.key,
                    job.window_id,
                    job.stream_id,
                    extra=job.log_extra,
                )
                self.metrics.learner_failed(job.stream_id)
                ready.settle("failed")
                continue
            if fit is not None:
                fits.append(fit)
        return fits

    def _source(self, window_id: str, key: str, seed: bytes, purpose: str = "") -> RandomSource:
        """The release's randomness, the same on every attempt: derived from the reservation's
        secret seed (tests inject seeded sources instead). ``purpose`` "order": the node's row order."""
        if self._rng_factory:
            return self._rng_factory(f"{window_id}/{key}" + (f"/{purpose}" if purpose else ""))
        if purpose:
            return derived(hashlib.sha256(f"privstream node {purpose}/".encode() + seed).digest())
        return derived(seed)

    async def _default(self, job: NodeJob, fit: Fit) -> bytes:
        """The default release's bytes: the learner on :func:`stand_in` with the same parameters and
        randomness (data-independent, the same certificate, charged the same)."""
        policy, product, reservation = job.policy, fit.ready.product, fit.ready.reservation
        if reservation is None:
            raise InvariantError("invariant broken: reservation is not None")
        xs, ys = stand_in(policy, fit.data, job.level)
        source = self._source(job.window_id, product.key, reservation.seed)
        call = learner_call(policy, product, fit.epsilon, fit.delta, job.level, source)
        result = await self.runner.run(policy.stream_id, NodeFit(call, xs, ys), None)
        return self._body(job, fit.ready, reservation, result, "default")

    def _withhold(self, job: NodeJob, ready: Ready, exc: GuaranteeError) -> None:
        """Withhold a product's release of a node whose algorithm spent more than it was charged:
        an operator alert (an ERROR and ``guarantee_refused``), nothing published."""
        policy, stream_id, key = job.policy, job.stream_id, ready.product.key
        log.error(
            "%s of window %s of stream %s withheld: %s (charged per %s through %s); nothing is published",
            key,
            job.window_id,
            stream_id,
            exc,
            policy.privacy_unit,
            [step.to_dict() for step in release_steps(policy)] or "no group step",
            extra=job.log_extra,
        )
        self.metrics.guarantee_refused(stream_id)
        ready.body = None
        ready.settle("withheld")

    async def _fit(self, job: NodeJob, fit: Fit) -> None:
        """Run the learner on the node until the deadline; its release replaces the default if it
        finished in time. Without a deadline the default is computed only when the fit raised or
        its process died."""
        policy, window_id, level = job.policy, job.window_id, job.level
        ready, product = fit.ready, fit.ready.product
        reservation, deadline = ready.reservation, ready.deadline
        if reservation is None:
            raise InvariantError("invariant broken: reservation is not None")
        stream_id, key, seed = policy.stream_id, product.key, reservation.seed
        extra = job.log_extra
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
                body = self._body(job, ready, reservation, result, "fit")
            except GuaranteeError as exc:
                if in_time or not ready.available.is_set():
                    self._withhold(job, ready, exc)
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
            ready.settle("ready", await self._default(job, fit))

    def _body(self, job: NodeJob, ready: Ready, reservation: Reservation, result: Any, which: str) -> bytes:
        """The release's bytes, with the release's deadline and quality estimates;
        :class:`GuaranteeError` (naming ``which``: the default or the fit) if the result's guarantee
        exceeds the charge (the builder checks it)."""
        policy, product = job.policy, ready.product
        try:
            return release_bytes(
                policy,
                product,
                result,
                job.info,
                reservation.receipt,
                randomness="seeded" if self._rng_factory else "secure",
                level=job.level,
                public_id=public_entry_id(policy.stream_id, reservation.window_id, product.key),
                deadline=ready.deadline,
                library_version=self.library_version,
                evaluations=ready.evaluations,
            )
        except GuaranteeError as exc:
            raise GuaranteeError(f"the {which}: {exc}") from None
