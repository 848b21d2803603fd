"""The service's own metrics beyond simple counters: consumer lag per partition, ingest busy
time, and the timing of every storage call."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from privstream.stream_app.metrics import ServiceMetrics


def samples(metrics: ServiceMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = metrics.exposition().decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_lag_follows_the_assigned_partitions():
    metrics = ServiceMetrics(["s"])
    metrics.lag({0: 5, 1: 0})
    assert samples(metrics, "privstream_consumer_lag_messages") == {
        (("partition", "0"),): 5.0,
        (("partition", "1"),): 0.0,
    }
    metrics.lag({1: 7})  # partition 0 was revoked: its series goes, it would show a stale lag
    assert samples(metrics, "privstream_consumer_lag_messages") == {(("partition", "1"),): 7.0}


def test_busy_seconds_add_up():
    metrics = ServiceMetrics(["s"])
    metrics.ingest_batch_handled(0.25)
    metrics.ingest_batch_handled(0.5)
    assert samples(metrics, "privstream_ingest_busy_seconds_total") == {(): 0.75}


class Store:
    generation = "g1"

    def append(self, value: int) -> int:
        return value + 1

    def broken(self) -> None:
        raise ValueError("disk full")


def test_timed_store_times_every_method_call_and_passes_the_rest_through():
    metrics = ServiceMetrics(["s"])
    store = metrics.timed(Store(), "state")
    assert store.append(1) == 2 and store.append(2) == 3
    assert store.generation == "g1"  # not a method: untouched, not timed
    with pytest.raises(ValueError, match="disk full"):
        store.broken()  # a failing call is timed too, and its error passes through
    counts = samples(metrics, "privstream_store_operation_seconds_count")
    assert counts == {
        (("operation", "append"), ("store", "state")): 2.0,
        (("operation", "broken"), ("store", "state")): 1.0,
    }
