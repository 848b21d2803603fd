"""Prometheus metrics of the service, on their own registry, named by prometheus.io conventions.

Every name starts with ``privstream_``; counters end in ``_total``; times are in seconds;
labels are bounded (configured stream names, the fixed set of invalid reasons, configured
learners, partitions of the examples topic, the storage ports' method names): never one label
value per example, user or window.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from privstream import __version__
from privstream.agents.timing import DEFAULT_REASONS
from privstream.agents.validation import INVALID_REASONS

T = TypeVar("T")


#: The listeners whose refused and dropped connections are counted (the ``listener`` label).
LISTENERS = ("public", "operator")


class ListenerConnections(Collector):
    """``privstream_listener_connections_refused_total{listener, reason}``: the connections each
    listener refused or dropped, read from the listener when scraped (the public listener's
    counts come from its process). Each source gives its fixed set of reasons (bounded labels).

    >>> registry = CollectorRegistry()
    >>> counts = ListenerConnections()
    >>> registry.register(counts)
    >>> counts.sources["operator"] = lambda: {"header_timeout": 2}
    >>> registry.get_sample_value(
    ...     "privstream_listener_connections_refused_total",
    ...     {"listener": "operator", "reason": "header_timeout"},
    ... )
    2.0
    """

    def __init__(self) -> None:
        self.sources: dict[str, Callable[[], Mapping[str, int]]] = {}

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "privstream_listener_connections_refused",
            "Connections a listener refused (over its cap or the client's share) or dropped (no "
            "request head within the header timeout).",
            labels=["listener", "reason"],
        )
        for listener in LISTENERS:
            source = self.sources.get(listener)
            for reason, count in sorted((source() if source is not None else {}).items()):
                family.add_metric([listener, reason], float(count))
        yield family


class ServiceMetrics:
    """The service's metrics; implements the agents' ``IngestMetrics`` and ``ReleaseMetrics``."""

    def __init__(
        self,
        stream_ids: list[str],
        registry: CollectorRegistry | None = None,
        release_streams: dict[str, tuple[float, list[str]]] | None = None,
        vector_stream_ids: list[str] | None = None,
        vector_features: dict[str, list[str]] | None = None,
    ):
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.listener_connections = ListenerConnections()
        r.register(self.listener_connections)
        self.build_info = Gauge(
            "privstream_build_info", "Build information (value is 1).", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)
        self.examples_received = Counter(
            "privstream_examples_received_total", "Messages consumed from the examples topic.", registry=r
        )
        self.examples_invalid = Counter(
            "privstream_examples_invalid_total",
            "Messages, and rows of batch messages, rejected by validation, by reason.",
            ["reason"],
            registry=r,
        )
        self.dead_letters = Counter(
            "privstream_dead_letters_published_total",
            "Dead letters (rejected messages or rows) published to the dead-letter topic.",
            registry=r,
        )
        self.examples_log_replaced = Counter(
            "privstream_examples_log_replaced_total",
            "Partitions of the examples topic whose log was replaced (offsets went back) and that this "
            "worker rebased: their new log read as new examples.",
            registry=r,
        )
        self.examples_repeated = Counter(
            "privstream_examples_repeated_total",
            "Examples dropped as repeats of an example id seen within the stream's horizon.",
            ["stream"],
            registry=r,
        )
        self.example_ids_forgotten = Counter(
            "privstream_example_ids_forgotten_total",
            "Example ids forgotten before the stream's horizon because its memory of ids was full.",
            ["stream"],
            registry=r,
        )
        self.outputs_refused = Counter(
            "privstream_outputs_refused_total",
            "Records Kafka refused for their size (a reference goes to the dead-letter topic instead).",
            registry=r,
        )
        self.examples_learned = Counter(
            "privstream_examples_learned_total",
            "Valid examples predicted and learned by the online learner (the SOA, or a feature-vector "
            "stream's learner).",
            ["stream"],
            registry=r,
        )
        self.soa_mistakes = Counter(
            "privstream_soa_mistakes_total", "Mistakes of the online SOA.", ["stream"], registry=r
        )
        self.soa_mistake_bound = Gauge(
            "privstream_soa_mistake_bound",
            "The SOA's mistake bound: the class's Littlestone dimension.",
            ["stream"],
            registry=r,
        )
        self.shard_mistakes = Gauge(
            "privstream_shard_mistakes",
            "Mistakes of the online learner of one partition's shard of a stream spread over "
            "partitions (partition_by 'example' or 'user'); the stream's are their sum.",
            ["stream", "partition"],
            registry=r,
        )
        self.shard_mistake_bound = Gauge(
            "privstream_shard_mistake_bound",
            "The mistake bound of one shard's online learner (the stream's is their sum).",
            ["stream", "partition"],
            registry=r,
        )
        self.stream_realizable = Gauge(
            "privstream_stream_realizable",
            "1 while the stream is realizable by its class (feature vectors: separable with the "
            "configured margin), 0 once proven otherwise.",
            ["stream"],
            registry=r,
        )
        # --- the online learners of feature-vector streams ---
        self.values_clipped = Counter(
            "privstream_feature_values_clipped_total",
            "Feature values outside their stream's public bounds, clipped to them by the learners, by "
            "feature (a count of raw data: for the operator, never published).",
            ["stream", "feature"],
            registry=r,
        )
        self.online_mistakes = Counter(
            "privstream_online_mistakes_total",
            "Mistakes of a feature-vector stream's online learner (predictions made before the label).",
            ["stream"],
            registry=r,
        )
        self.online_margin_mistakes = Gauge(
            "privstream_online_margin_mistakes",
            "The Perceptron mistakes the margin test of a feature-vector stream counts, from its saved "
            "state (more than privstream_online_margin_bound proves no halfspace has the margin).",
            ["stream"],
            registry=r,
        )
        self.online_margin_bound = Gauge(
            "privstream_online_margin_bound",
            "(R/γ)²: the most Perceptron mistakes on a stream separable with the configured margin γ.",
            ["stream"],
            registry=r,
        )
        self.last_progress = Gauge(
            "privstream_last_progress_timestamp_seconds",
            "Unix time at which the agents last finished a message.",
            registry=r,
        )
        # Examples handled per busy second is what the worker could ingest flat out: the
        # dashboard sets it against the rate it is asked to ingest.
        self.ingest_busy = Counter(
            "privstream_ingest_busy_seconds",
            "Seconds the ingest loop spent handling polled batches (validate, learn, publish, commit).",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "privstream_consumer_lag_messages",
            "Messages of an assigned partition of the examples topic not handled yet (Kafka's "
            "high watermark minus the next offset to handle).",
            ["partition"],
            registry=r,
        )
        self._lag_partitions: set[int] = set()
        self.store_seconds = Histogram(
            "privstream_store_operation_seconds",
            "Time one call of the ledger or the state store took.",
            ["store", "operation"],
            buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=r,
        )
        # --- private releases (labels: configured streams with releases, configured learners) ---
        self.releases = Counter(
            "privstream_releases_total", "Private releases published.", ["stream"], registry=r
        )
        self.releases_by_level = Counter(
            "privstream_releases_by_level_total",
            "Private releases published, by the release tree's level.",
            ["stream", "level"],
            registry=r,
        )
        self.lifetime_epsilon_spent = Gauge(
            "privstream_privacy_lifetime_epsilon_spent",
            "Lifetime ε per example: the max over windows of the charges covering it (ledger).",
            ["stream"],
            registry=r,
        )
        self.lifetime_epsilon_budget = Gauge(
            "privstream_privacy_lifetime_epsilon_budget",
            "The configured lifetime ε per example (or user).",
            ["stream"],
            registry=r,
        )
        self.excluded_users = Counter(
            "privstream_filter_excluded_users_total",
            "Users left out of a user-level time window at ingest because their lifetime budget "
            "would be passed, one per user and window (private: operators only).",
            ["stream"],
            registry=r,
        )
        self.refusals = Counter(
            "privstream_release_refusals_total",
            "Windows not released because the stream's privacy budget is spent.",
            ["stream"],
            registry=r,
        )
        self.release_failures = Counter(
            "privstream_release_failures_total",
            "Windows whose learner or publication failed.",
            ["stream"],
            registry=r,
        )
        self.guarantee_refusals = Counter(
            "privstream_release_guarantee_refusals_total",
            "Releases withheld because their algorithm's guarantee exceeded the charge (it spent more "
            "epsilon or delta than the ledger charged, or under another relation): never published.",
            ["stream"],
            registry=r,
        )
        self.late_examples = Counter(
            "privstream_late_examples_total",
            "Examples that arrived after their time window was released (kept by the SOA only).",
            ["stream"],
            registry=r,
        )
        self.deadlines_missed = Counter(
            "privstream_release_deadlines_missed_total",
            "Releases published after their deadline (the worker was overloaded or the publication slot "
            "is too short; operators only: the record's timestamp and the public pages keep the deadline).",
            ["stream"],
            registry=r,
        )
        self.release_lateness = Gauge(
            "privstream_release_lateness_seconds",
            "How late the stream's last release that missed its deadline was published.",
            ["stream"],
            registry=r,
        )
        self.release_defaults = Counter(
            "privstream_release_defaults_total",
            "Releases published as their data-independent default: the fit was unfinished at the "
            "deadline, failed, or its process died (operators only).",
            ["stream", "reason"],
            registry=r,
        )
        self.publish_delay = Gauge(
            "privstream_release_publish_delay_seconds",
            "The stream's publication slot (publish_delay_seconds, configured or derived at start-up).",
            ["stream"],
            registry=r,
        )
        self.epsilon_spent = Gauge(
            "privstream_privacy_epsilon_spent",
            "ε spent by the stream's releases (ledger).",
            ["stream"],
            registry=r,
        )
        self.epsilon_remaining = Gauge(
            "privstream_privacy_epsilon_remaining",
            "ε left in the stream's budget (ledger).",
            ["stream"],
            registry=r,
        )
        self.budget_exhausted = Gauge(
            "privstream_privacy_budget_exhausted",
            "1 once a release was refused for lack of budget.",
            ["stream"],
            registry=r,
        )
        self.last_release = Gauge(
            "privstream_last_release_timestamp_seconds",
            "Unix time of the stream's last release.",
            ["stream"],
            registry=r,
        )
        self.learner_seconds = Histogram(
            "privstream_learner_run_seconds",
            "Time a private learner took on one window.",
            ["learner"],
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.window_size = Histogram(
            "privstream_window_size_examples",
            "Examples in a window handed to a learner.",
            ["learner"],
            buckets=(10, 100, 500, 1000, 2000, 5000, 10_000, 50_000, 100_000, 1_000_000),
            registry=r,
        )
        for stream, (remaining, algorithms) in (release_streams or {}).items():
            for child in (
                self.releases,
                self.refusals,
                self.release_failures,
                self.guarantee_refusals,
                self.late_examples,
                self.deadlines_missed,
                self.excluded_users,
            ):
                child.labels(stream=stream)
            for reason in DEFAULT_REASONS:
                self.release_defaults.labels(stream=stream, reason=reason)
            self.release_lateness.labels(stream=stream).set(0)
            self.epsilon_spent.labels(stream=stream).set(0)
            self.epsilon_remaining.labels(stream=stream).set(remaining)
            self.budget_exhausted.labels(stream=stream).set(0)
            for learner in algorithms:
                self.learner_seconds.labels(learner=learner)
                self.window_size.labels(learner=learner)
        # Plain totals for /status and /healthz (prometheus_client keeps its values private).
        self.received_count = 0
        self.invalid_counts = dict.fromkeys(INVALID_REASONS, 0)
        # Pre-create every labelled child so dashboards and alerts see zeros, not gaps.
        for reason in INVALID_REASONS:
            self.examples_invalid.labels(reason=reason)
        for stream in stream_ids:
            self.examples_learned.labels(stream=stream)
            self.examples_repeated.labels(stream=stream)
            self.example_ids_forgotten.labels(stream=stream)
            self.soa_mistakes.labels(stream=stream)
            self.stream_realizable.labels(stream=stream).set(1)
        for stream in vector_stream_ids or []:
            self.examples_learned.labels(stream=stream)
            self.online_mistakes.labels(stream=stream)
        for stream, features in (vector_features or {}).items():  # d is public: bounded labels
            for feature in features:
                self.values_clipped.labels(stream=stream, feature=feature)
            self.stream_realizable.labels(stream=stream).set(1)

    # --- IngestMetrics ---------------------------------------------------------------------
    def received(self, count: int = 1) -> None:
        self.examples_received.inc(count)
        self.received_count += count

    def invalid(self, reason: str, count: int = 1) -> None:
        self.examples_invalid.labels(reason=reason).inc(count)
        self.invalid_counts[reason] += count
        self.last_progress.set(time.time())

    def dead_lettered(self, count: int = 1) -> None:
        self.dead_letters.inc(count)

    def repeated(self, stream_id: str, count: int) -> None:
        self.examples_repeated.labels(stream=stream_id).inc(count)
        self.last_progress.set(time.time())  # handled, like a learned or an invalid example

    def ids_forgotten(self, stream_id: str, count: int) -> None:
        self.example_ids_forgotten.labels(stream=stream_id).inc(count)

    def learned(self, stream_id: str, examples: int, new_mistakes: int, realizable: bool) -> None:
        self.examples_learned.labels(stream=stream_id).inc(examples)
        if new_mistakes:
            self.soa_mistakes.labels(stream=stream_id).inc(new_mistakes)
        self.stream_realizable.labels(stream=stream_id).set(1 if realizable else 0)
        self.last_progress.set(time.time())

    def mistake_bound(self, stream_id: str, bound: int) -> None:
        self.soa_mistake_bound.labels(stream=stream_id).set(bound)

    def shard_learned(self, stream_id: str, partition: int, mistakes: int, bound: int | None) -> None:
        # One child per (stream, partition): bounded by the topic's partitions (public).
        self.shard_mistakes.labels(stream=stream_id, partition=str(partition)).set(mistakes)
        if bound is not None:
            self.shard_mistake_bound.labels(stream=stream_id, partition=str(partition)).set(bound)

    def clipped(self, stream_id: str, feature: str, count: int) -> None:
        self.values_clipped.labels(stream=stream_id, feature=feature).inc(count)

    def online_learned(
        self,
        stream_id: str,
        examples: int,
        new_mistakes: int,
        margin_mistakes: int | None,
        margin_bound: int | None,
        realizable: bool | None,
    ) -> None:
        self.examples_learned.labels(stream=stream_id).inc(examples)
        self.online_mistakes.labels(stream=stream_id).inc(new_mistakes)
        if margin_mistakes is not None and margin_bound is not None:
            self.online_margin_mistakes.labels(stream=stream_id).set(margin_mistakes)
            self.online_margin_bound.labels(stream=stream_id).set(margin_bound)
        self.stream_realizable.labels(stream=stream_id).set(0 if realizable is False else 1)
        if examples:
            self.last_progress.set(time.time())

    # --- the ingest loop (stream_app/ingest.py) ------------------------------------------------
    def output_refused(self) -> None:
        self.outputs_refused.inc()

    def ingest_batch_handled(self, seconds: float) -> None:
        self.ingest_busy.inc(seconds)

    def lag(self, partitions: dict[int, int]) -> None:
        """Set the lag of the assigned partitions; forget partitions no longer assigned."""
        for gone in self._lag_partitions - set(partitions):
            self.consumer_lag.remove(str(gone))
        for partition, lag in partitions.items():
            self.consumer_lag.labels(partition=str(partition)).set(lag)
        self._lag_partitions = set(partitions)

    # --- ReleaseMetrics ----------------------------------------------------------------------
    def released(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None:
        self.releases.labels(stream=stream_id).inc()
        self.last_release.labels(stream=stream_id).set(time.time())
        self.budget(stream_id, epsilon_spent, epsilon_remaining)

    def refused(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None:
        self.refusals.labels(stream=stream_id).inc()
        self.budget_exhausted.labels(stream=stream_id).set(1)
        self.budget(stream_id, epsilon_spent, epsilon_remaining)

    def budget(self, stream_id: str, epsilon_spent: float, epsilon_remaining: float) -> None:
        # The ledger's spend is per example for ever (lifetime): the same figure, two names.
        self.epsilon_spent.labels(stream=stream_id).set(epsilon_spent)
        self.epsilon_remaining.labels(stream=stream_id).set(epsilon_remaining)
        self.lifetime_epsilon_spent.labels(stream=stream_id).set(epsilon_spent)

    def learner_failed(self, stream_id: str) -> None:
        self.release_failures.labels(stream=stream_id).inc()

    def guarantee_refused(self, stream_id: str) -> None:
        self.guarantee_refusals.labels(stream=stream_id).inc()

    def learner_ran(self, learner: str, seconds: float, window_size: int) -> None:
        self.learner_seconds.labels(learner=learner).observe(seconds)
        self.window_size.labels(learner=learner).observe(window_size)

    def late_example(self, stream_id: str) -> None:
        self.late_examples.labels(stream=stream_id).inc()

    def deadline_missed(self, stream_id: str, seconds_late: float) -> None:
        self.deadlines_missed.labels(stream=stream_id).inc()
        self.release_lateness.labels(stream=stream_id).set(seconds_late)

    def default_released(self, stream_id: str, reason: str) -> None:
        self.release_defaults.labels(stream=stream_id, reason=reason).inc()

    def publication_slot(self, stream_id: str, seconds: float) -> None:
        self.publish_delay.labels(stream=stream_id).set(seconds)

    def released_level(self, stream_id: str, level: int) -> None:
        self.releases_by_level.labels(stream=stream_id, level=str(level)).inc()

    def users_excluded(self, stream_id: str, count: int) -> None:
        self.excluded_users.labels(stream=stream_id).inc(count)

    def lifetime(self, stream_id: str, epsilon_spent: float, epsilon_budget: float) -> None:
        self.lifetime_epsilon_spent.labels(stream=stream_id).set(epsilon_spent)
        self.lifetime_epsilon_budget.labels(stream=stream_id).set(epsilon_budget)

    def timed(self, store: T, name: str) -> T:
        """``store`` with every method call timed into ``privstream_store_operation_seconds``."""
        return cast(T, TimedCalls(store, functools.partial(self._store_call, name)))

    def _store_call(self, store: str, operation: str, seconds: float) -> None:
        self.store_seconds.labels(store=store, operation=operation).observe(seconds)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class TimedCalls:
    """A proxy that reports how long each method call of the object behind it takes.

    Attributes that are not methods pass through untouched; the methods' names are the only
    label values, so the cardinality is the object's API.

    >>> seen = []
    >>> timed = TimedCalls([3, 1, 2], lambda name, seconds: seen.append(name))
    >>> timed.index(2), timed.count(1), seen
    (2, 1, ['index', 'count'])
    """

    def __init__(self, target: Any, report: Any):
        self._target = target
        self._report = report

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value):
            return value

        @functools.wraps(value)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._report(name, time.perf_counter() - started)

        return timed
