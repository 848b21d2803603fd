"""The service: a ``faust.App`` built from :class:`Settings`, with its topics, agents and pages.

``stream_app`` owns the app and hands topics, metrics and collaborators to the agents'
registration functions, so the agents never import the service (imports flow one way:
``stream_app -> agents -> learning``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import faust
import mode
from mode import ServiceT

from privstream import __version__
from privstream.agents.dedup import Deduplicator
from privstream.agents.online import OnlineLearners, OnlineStream, VectorStream
from privstream.agents.pipeline import IngestPipeline, json_read_seconds_per_byte
from privstream.agents.progress import Progress
from privstream.agents.releases import Publisher, ReleaseAgent, ReleasePolicy
from privstream.agents.releases.guard import DEADLINE_GUARD_SECONDS
from privstream.agents.validation import ExampleValidator, integer_domain, vector_domain
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.stream_app.faust_app import build_app, faust_credentials
from privstream.stream_app.fencing import FencedLedger, fenced_publisher
from privstream.stream_app.kafka.ingest import IngestService
from privstream.stream_app.kafka.log_marks import LogMarks
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.publication import derive_slots, slots_fall_behind
from privstream.stream_app.release_policies import (
    lifetime_bound,
    release_policies,
    release_policy,
    time_window_tick,
    warn_of_small_windows,
)
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signed_publisher import publisher
from privstream.stream_app.signing import KeyWatch, Signer
from privstream.stream_app.slot_cache import SlotCache, cache_path
from privstream.stream_app.store import factory
from privstream.stream_app.store.factory import Ledger, StateStore
from privstream.stream_app.store.identity import keep_up, open_for_worker
from privstream.stream_app.store.leases import Leases, LeaseStoreError
from privstream.stream_app.store.probe import StoreProbe, store_ping
from privstream.stream_app.store.published import read_public_log
from privstream.stream_app.store.signatures import ReleaseSignatures
from privstream.stream_app.stream_status import vector_status
from privstream.stream_app.tabular import row_encoder
from privstream.stream_app.web.listener import HttpListener, ListenerLimits, bearer_token_guard
from privstream.stream_app.web.operator import PROBE_PATHS, operator_routes
from privstream.stream_app.web.public_process import (
    PublicListenerProcess,
    counts_path,
    read_counts,
    signatures_path,
)

#: Re-exported from the rooms they moved to, for the importers of this module.
__all__ = [
    "Service",
    "ServiceProbes",
    "build_app",
    "build_service",
    "faust_credentials",
    "lifetime_bound",
    "publisher",
    "release_policy",
    "time_window_tick",
]

log = logging.getLogger(__name__)

#: How often the store is pinged for ``/readyz``; retrying to take leases the store refused.
STORE_PROBE_SECONDS = 5.0
LEASE_RETRY_SECONDS = 5.0


@dataclass
class Service:
    """Everything a running worker is made of."""

    settings: Settings
    app: faust.App
    ingest: IngestService
    pipeline: IngestPipeline
    metrics: ServiceMetrics
    learners: OnlineLearners
    progress: Progress
    store: StateStore
    ledger: Ledger | None = None
    releases: ReleaseAgent | None = None
    leases: Leases | None = None
    store_probe: StoreProbe | None = None

    def status(self) -> dict[str, Any]:
        """``/status`` (operators only: raw counts, not private): per-stream online state, invalid counts."""
        streams: dict[str, Any] = {}
        for stream in self.settings.streams:
            if stream.partitioned:
                streams[stream.name] = self.shards_status(stream)
                continue
            if stream.kind == "vector":
                streams[stream.name] = vector_status(stream, self.learners.vector_learner(stream.name))
                continue
            soa = self.learners.soa(stream.name)
            streams[stream.name] = {
                "hypothesis_class": stream.hypothesis_class,
                "examples": soa.examples_seen,
                "mistakes": soa.mistakes,
                "mistake_bound": soa.mistake_bound,
                "realizable": soa.realizable and soa.mistakes <= soa.mistake_bound,
            }
        invalid = dict(self.metrics.invalid_counts)
        return {
            "startup": self.ingest.stages.as_dict(),
            "received": self.metrics.received_count,
            "handled": self.progress.handled,
            "invalid": sum(invalid.values()),
            "invalid_by_reason": invalid,
            "streams": streams,
        }

    def shards_status(self, stream: StreamConfig) -> dict[str, Any]:
        """``/status`` of a stream spread over partitions: the shards this worker holds (the
        stream's totals are the sums over every worker's shards)."""
        shards = self.learners.shards(stream.name)
        return {
            "partition_by": stream.partition_by,
            "partitions": self.settings.topic_partitions,
            "shards": {
                str(p): {
                    "examples": learner.examples_seen,
                    "mistakes": learner.mistakes,
                    "mistake_bound": learner.mistake_bound,
                    "realizable": bool(learner.realizable),
                }
                for p, learner in shards.items()
            },
        }


@dataclass
class ServiceProbes:
    """``/healthz`` from the ingest consumer; ``/readyz`` needs the consumer ready and the store
    answering (a worker cut off from its database is not restarted, only taken out of service)."""

    ingest: IngestService
    store: StoreProbe

    def health(self) -> tuple[bool, str]:
        return self.ingest.health()

    def readiness(self) -> tuple[bool, str]:
        ok, reason = self.ingest.readiness()
        return self.store.readiness() if ok else (ok, reason)


def stream_partition(partitions: int) -> Any:
    """The partition of the examples topic a stream's messages go to (Kafka's default partitioner
    on the key ``stream_id``): its owner closes the stream's time windows."""
    from aiokafka.partitioner import DefaultPartitioner

    partitioner = DefaultPartitioner()
    every = list(range(partitions))
    return lambda stream_id: partitioner(stream_id.encode(), every, every)


def online_streams(settings: Settings) -> tuple[dict[str, OnlineStream], dict[str, VectorStream]]:
    """Each stream's online learner: class streams an SOA, streams of feature vectors the online
    learner they name."""
    streams = {
        s.name: OnlineStream(
            s.name,
            parse_class_spec(s.hypothesis_class),
            s.soa_tie,
            partitions=settings.topic_partitions if s.partitioned else None,
        )
        for s in settings.streams
        if s.hypothesis_class is not None
    }
    vector_streams = {
        s.name: VectorStream(
            s.name,
            tuple((lo, hi) for lo, hi in s.feature_bounds or ()),
            s.online_learner,
            dict(s.online_params),
            tuple(s.feature_labels),
            partitions=settings.topic_partitions if s.partitioned else None,
            classes=s.classes,
        )
        for s in settings.streams
        if s.features is not None
    }
    return streams, vector_streams


def example_validator(
    settings: Settings, streams: dict[str, OnlineStream], policies: dict[str, ReleasePolicy]
) -> ExampleValidator:
    """The ingest validation of every stream: its domain, the user level's user ids, for time
    windows the public event-time skew past which an example is dead-lettered, and for tabular
    streams the row encoder of their columns."""
    domains = {
        s.name: integer_domain(
            streams[s.name].hypothesis_class.check_point, streams[s.name].hypothesis_class.domain_size
        )
        if s.name in streams
        else vector_domain(s.features or 0)
        for s in settings.streams
    }
    skews = {
        s.name: s.release.window.max_event_time_skew_seconds
        for s in settings.streams
        if s.release is not None and s.release.window.kind == "time"
    }
    user_level = frozenset(sid for sid, p in policies.items() if p.privacy_unit == "user")
    encoders = {s.name: row_encoder(s.encoder) for s in settings.streams if s.encoder is not None}
    classes = {s.name: s.classes for s in settings.streams if s.classes != 2}
    return ExampleValidator(
        domains, user_level=user_level, event_time_skew=skews, encoders=encoders, classes=classes
    )


def release_agent(
    policies: dict[str, ReleasePolicy],
    store: StateStore,
    ledger: Ledger,
    publish: Publisher,
    metrics: ServiceMetrics,
    processes: LearnerProcesses,
    partition_of: Callable[[str], int],
    slot_cache: SlotCache | None = None,
) -> ReleaseAgent:
    """The release agent of the worker's releasing streams, its slots derived on this machine
    (a learner process per stream, off the GIL the ingest loop needs; a fit still running at its
    release's deadline is stopped there: learner_process.py)."""
    for sid in policies:
        metrics.budget(sid, ledger.spent(sid).epsilon, ledger.remaining(sid).epsilon)
        metrics.lifetime(sid, ledger.spent(sid).epsilon, ledger.lifetime(sid).budget.epsilon)
    policies = derive_slots(policies, processes, time_window_tick(policies), slot_cache)
    for p in policies.values():
        if p.publish_delay_seconds is None:
            raise RuntimeError(f"stream {p.stream_id}: no publication slot was derived")
        metrics.publication_slot(p.stream_id, p.publish_delay_seconds)
        if why := slots_fall_behind(p):
            log.warning("%s", why)
    return ReleaseAgent(
        policies,
        store,
        ledger,
        publish,
        metrics,
        library_version=__version__,
        runner=processes,
        partition_of=partition_of,
    )


def release_timers(app: faust.App, releases: ReleaseAgent, policies: dict[str, ReleasePolicy]) -> None:
    """The release agent's timers: the outbox retried every minute, and time windows closed on
    the clock, with or without examples (the public schedule)."""

    @app.timer(60.0)
    async def _replay_outbox() -> None:
        # Publications that failed (a Kafka hiccup) are retried from the ledger's outbox.
        await releases.replay_outbox()

    if any(p.window_kind == "time" for p in policies.values()):

        @app.timer(time_window_tick(policies))
        async def _close_time_windows() -> None:
            await releases.tick()


def start_listeners(
    app: faust.App,
    settings: Settings,
    service: Service,
    probes: ServiceProbes,
    signer: Signer | None,
    signatures: ReleaseSignatures,
) -> None:
    """The public listener, in a process of its own (a crowd there takes nothing from ingestion;
    it holds no secret and serves the signatures the worker stores), and the operator listener
    (metrics, probes, status; behind the operator token if set)."""
    _start_with(app, PublicListenerProcess(settings, signer=signer, signatures=signatures))
    guard = (
        [bearer_token_guard(settings.operator_token.get_secret_value(), open_paths=PROBE_PATHS)]
        if settings.operator_token is not None
        else []
    )
    operator = HttpListener(
        "operator",
        settings.operator_host,
        settings.operator_port,
        operator_routes(service.metrics.exposition, probes, service.status),
        middlewares=guard,
        limits=ListenerLimits.of(settings, "operator"),
    )
    _start_with(app, operator)
    # Refused and dropped connections on /metrics: the public listener's from its process's file.
    public_counts = counts_path(settings)
    service.metrics.listener_connections.sources.update(
        public=lambda: read_counts(public_counts), operator=lambda: operator.connections.counts
    )


def build_service(settings: Settings) -> Service:
    """Build the app and register the agents and web pages on it."""
    # First: a missing, corrupt, foreign or older ledger, or a changed privacy configuration, stops
    # the worker at once (store/identity.py); the streams are registered in the ledger.
    # The signing key is the deployment's, recorded in the ledger (signing.py); the public log is
    # trusted only where the deployment's keys verify it.
    stores = open_for_worker(settings, published=lambda keys, since: read_public_log(settings, keys, since))
    ledger: Ledger | None = stores.ledger
    signer = stores.signer
    if signer is not None:
        log.info("releases are signed with key %s (Ed25519; public keys on /keys)", signer.key_id)
    # Each release's signature, for the public listener's process (which holds no key).
    signatures = ReleaseSignatures(signatures_path(settings))
    app = build_app(settings)
    streams, vector_streams = online_streams(settings)
    if not settings.streams:
        log.warning("no streams are configured: every example will go to the dead-letter topic")
    policies = release_policies(settings, streams, stores.registered if ledger is not None else None)
    warn_of_small_windows(policies)
    metrics = ServiceMetrics(
        list(streams),
        vector_stream_ids=list(vector_streams),
        vector_features={sid: list(v.feature_names()) for sid, v in vector_streams.items()},
        release_streams={
            sid: (ledger.remaining(sid).epsilon if ledger else 0.0, [pr.name for pr in p.products])
            for sid, p in policies.items()
        },
    )
    # Every call of the storage ports is timed (privstream_store_operation_seconds).
    store = metrics.timed(stores.state, "state")
    # Fencing (store/leases.py): the partitions this worker was assigned, by lease; a charge or a
    # publication for a stream whose partition another worker has taken since is refused.
    leases = factory.open_leases(settings) if ledger is not None else None
    key_partition = stream_partition(settings.topic_partitions)

    partitioned = {s.name for s in settings.streams if s.partitioned}

    def source_partitions(stream_id: str) -> set[int]:
        # Where the stream's examples came from, and its key's partition: a time-window stream
        # that has seen no example yet is still released (empty windows too) by its key's owner.
        # A stream spread over partitions is released by its key partition's owner alone.
        if stream_id in partitioned:
            return {key_partition(stream_id)}
        return store.partitions(stream_id) | {key_partition(stream_id)}

    if ledger is not None and leases is not None:
        # A FencedLedger fences charges and reservations and passes every other call through.
        fenced = cast(Ledger, FencedLedger(ledger, leases, source_partitions))
        ledger = metrics.timed(fenced, "ledger")
    learners = OnlineLearners({**streams, **vector_streams}, metrics, store)
    progress = Progress()
    validator = example_validator(settings, streams, policies)
    dedup = Deduplicator({s.name: s.dedup_horizon_seconds for s in settings.streams})
    pipeline = IngestPipeline(validator, learners, metrics, progress, dedup=dedup)

    # Reading a large message's JSON is the one unsplit part of ingest: measured here once, on a
    # public message, and kept clear of deadlines with the slots' margin (three times).
    read_seconds_per_byte = json_read_seconds_per_byte()

    async def clear_of_deadlines(read_bytes: int = 0) -> None:
        # Between two parts of a poll: a release's deadline near, ingest waits until it is out.
        if pipeline.releases is not None:
            reading = 3 * read_seconds_per_byte * read_bytes
            await pipeline.releases.clear_of_deadlines(DEADLINE_GUARD_SECONDS + reading)

    policy = settings.examples_log_replaced
    marks = LogMarks(
        stores.state,
        [s.name for s in settings.streams],
        rebase=None if policy == "auto" else policy == "rebase",
    )
    ingest = IngestService(
        settings,
        pipeline,
        on_assigned=lambda parts: on_assigned(parts),
        metrics=metrics,
        replay=stores.replay,
        pause=clear_of_deadlines,
        marks=marks,
        learned_up_to=learners.learned_up_to,
        loop=None,
    )
    releases = None
    processes: LearnerProcesses | None = None
    if policies:
        if ledger is None or leases is None or signer is None:
            raise RuntimeError("releasing streams need the ledger, the partition leases and the signing key")
        processes = LearnerProcesses(policies, niceness=settings.learner_niceness)
        watch = KeyWatch(signer, stores.ledger) if stores.ledger is not None else None
        publish = fenced_publisher(
            publisher(ingest, settings, signer, signatures, watch=watch), leases, source_partitions
        )
        if watch is not None:

            @app.timer(STORE_PROBE_SECONDS, on_leader=False)
            async def _check_the_key() -> None:
                # A key rotated while this worker runs: it stops publishing (signing.KeyWatch).
                try:
                    await asyncio.to_thread(watch.check)
                except Exception as exc:  # the ledger unreachable: /readyz says so
                    log.debug("could not read the deployment's signing key: %s", exc)

        slot_cache = SlotCache(cache_path(settings.slot_cache_file, settings.data_dir))
        releases = release_agent(
            policies, store, ledger, publish, metrics, processes, key_partition, slot_cache
        )
        # The other streams' children spawn once the worker is ready, one stream after another
        # (LearnerProcessesService): their imports would load the measurement and the start.
        pipeline.releases = releases

    async def on_assigned(partitions: set[int]) -> None:
        # Take the partitions' leases first: from now on the previous owners' charges are refused.
        if leases is not None:
            await take_leases(leases, partitions, ingest)
        # A stream may have been served by another worker meanwhile: continue from its saved
        # state, and finish what a crashed owner left half done.
        learners.reload()
        if releases is not None:
            releases.on_partitions_assigned(partitions)

    if releases is not None:
        release_timers(app, releases, policies)

    probe = StoreProbe(store_ping(settings, None if stores.identity is None else stores.identity))
    probe.check()  # now, not at the timer's first tick: /readyz need not wait for it
    ingest.stages.reach("store_ready")

    @app.timer(STORE_PROBE_SECONDS, on_leader=False)
    async def _probe_store() -> None:
        await asyncio.to_thread(probe.check)

    if stores.ledger is not None:

        @app.timer(STORE_PROBE_SECONDS, on_leader=False)
        async def _keep_up_with_the_ledger() -> None:
            # The state store learns the ledger's highest entry id (store/identity.py).
            try:
                await asyncio.to_thread(keep_up, stores)
            except Exception as exc:  # the ledger gone or unreachable: /readyz says so
                log.debug("could not record the ledger's progress in the state store: %s", exc)

    service = Service(
        settings=settings,
        app=app,
        ingest=ingest,
        pipeline=pipeline,
        metrics=metrics,
        learners=learners,
        progress=progress,
        store=store,
        ledger=ledger,
        releases=releases,
        leases=leases,
        store_probe=probe,
    )
    start_listeners(app, settings, service, ServiceProbes(ingest, probe), signer, signatures)
    # After the listeners: services start in this order, so the probes answer (503 "starting")
    # before the first poll instead of after it.
    _start_with(app, ingest)
    if processes is not None:
        _start_with(app, LearnerProcessesService(processes))
    return service


class LearnerProcessesService(mode.Service):
    """Spawns the streams' learner processes once ingest has started, one stream after another
    (:meth:`LearnerProcesses.warm_up`), and stops them with the worker (their children killed and
    their pools closed: nothing left for the interpreter to report at exit)."""

    def __init__(self, processes: LearnerProcesses) -> None:
        super().__init__()
        self.processes = processes

    async def on_start(self) -> None:
        self.processes.warm_up()

    async def on_stop(self) -> None:
        await asyncio.to_thread(self.processes.stop)


def _start_with(app: faust.App, service: ServiceT) -> None:
    """``service`` started and stopped with ``app`` (after the app's own services)."""
    # faust annotates App.service for decorating a class only; its start-up takes instances as well.
    app.service(service)  # type: ignore[arg-type]


async def take_leases(leases: Leases, partitions: set[int], ingest: IngestService) -> None:
    """Take the leases of newly assigned partitions (before their first fetch). If the store does
    not answer, keep trying in the background until it does or the group assigns anew (that
    assignment takes its own): this worker's charges are refused meanwhile, nothing else waits."""
    assigned = set(partitions)

    async def attempt() -> bool:
        try:
            await asyncio.to_thread(leases.take, assigned)
            return True
        except LeaseStoreError as exc:
            log.error(
                "cannot take the leases of partitions %s (%s); retrying every %g s",
                sorted(assigned),
                exc,
                LEASE_RETRY_SECONDS,
            )
            return False

    async def retry() -> None:
        while True:
            await asyncio.sleep(LEASE_RETRY_SECONDS)
            if {tp.partition for tp in ingest.assignment()} != assigned or await attempt():
                return

    if not await attempt():
        _background.add(task := asyncio.ensure_future(retry()))
        task.add_done_callback(_background.discard)


#: Tasks nothing else holds a reference to (asyncio keeps only weak ones).
_background: set[asyncio.Future[None]] = set()
