"""Prometheus metrics of the service, on their own registry, named by prometheus.io conventions.

Every name starts with ``privstream_``; counters end in ``_total``; times are in seconds;
labels are bounded (configured stream names, the fixed set of invalid reasons).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from privstream import __version__
from privstream.agents.validation import INVALID_REASONS


class ServiceMetrics:
    """The service's metrics; implements :class:`privstream.agents.interfaces.IngestMetrics`."""

    def __init__(self, stream_ids: list[str], registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.build_info = Gauge("privstream_build_info", "Build information (value is 1).",
                                ["version"], registry=r)
        self.build_info.labels(version=__version__).set(1)
        self.examples_received = Counter(
            "privstream_examples_received_total", "Messages consumed from the examples topic.", registry=r)
        self.examples_invalid = Counter(
            "privstream_examples_invalid_total", "Messages rejected by validation, by reason.",
            ["reason"], registry=r)
        self.dead_letters = Counter(
            "privstream_dead_letters_published_total", "Messages published to the dead-letter topic.",
            registry=r)
        self.examples_learned = Counter(
            "privstream_examples_learned_total", "Valid examples predicted and learned by the SOA.",
            ["stream"], registry=r)
        self.soa_mistakes = Counter(
            "privstream_soa_mistakes_total", "Mistakes of the online SOA.", ["stream"], registry=r)
        self.soa_mistake_bound = Gauge(
            "privstream_soa_mistake_bound", "The SOA's mistake bound: the class's Littlestone dimension.",
            ["stream"], registry=r)
        self.stream_realizable = Gauge(
            "privstream_stream_realizable",
            "1 while the stream is realizable by its class, 0 once proven otherwise.", ["stream"], registry=r)
        self.last_progress = Gauge(
            "privstream_last_progress_timestamp_seconds",
            "Unix time at which the agents last finished a message.", registry=r)
        # Plain totals for /status and /healthz (prometheus_client keeps its values private).
        self.received_count = 0
        self.invalid_counts = dict.fromkeys(INVALID_REASONS, 0)
        # Pre-create every labelled child so dashboards and alerts see zeros, not gaps.
        for reason in INVALID_REASONS:
            self.examples_invalid.labels(reason=reason)
        for stream in stream_ids:
            self.examples_learned.labels(stream=stream)
            self.soa_mistakes.labels(stream=stream)
            self.stream_realizable.labels(stream=stream).set(1)

    # --- IngestMetrics ---------------------------------------------------------------------
    def received(self, count: int = 1) -> None:
        self.examples_received.inc(count)
        self.received_count += count

    def invalid(self, reason: str) -> None:
        self.examples_invalid.labels(reason=reason).inc()
        self.invalid_counts[reason] += 1
        self.last_progress.set(time.time())

    def dead_lettered(self) -> None:
        self.dead_letters.inc()

    def learned(self, stream_id: str, mistake: bool, mistakes: int, realizable: bool) -> None:
        self.examples_learned.labels(stream=stream_id).inc()
        if mistake:
            self.soa_mistakes.labels(stream=stream_id).inc()
        self.stream_realizable.labels(stream=stream_id).set(1 if realizable else 0)
        self.last_progress.set(time.time())

    def mistake_bound(self, stream_id: str, bound: int) -> None:
        self.soa_mistake_bound.labels(stream=stream_id).set(bound)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
