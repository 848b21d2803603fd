"""A live twin run: two real workers on time windows, one stream with one example more than the other.

Each worker runs on the wall clock with 1-second windows (level 0 only: the tree's nodes are
aligned to absolute window indexes, so two streams registered at different phases have different
first nodes; the unit twins in ``tests/agents`` cover the tree on an injected clock). Their
first releases are compared field by field, apart from the DP outputs and the absolute time (the
windows are anchored at each stream's registration in its ledger, so ids and times are compared
relative to the first window): the schedule, the ledger entry ids, the levels, the certificates
must not depend on whether the example was there.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker, wait_until

pytestmark = pytest.mark.live

RELEASES = 5


def public_view(record_value: bytes, first_window: int, ledger_id: str) -> dict:
    """A release without its DP outputs, with window indexes and times relative to the first window
    and the ledger named relative to the run (each run is a deployment: its ledger has its own id)."""
    release = json.loads(record_value)
    release.pop("hypothesis")
    certificate = release["certificate"]
    certificate.pop("dp_outputs")
    if certificate["ledger_id"] == ledger_id:
        certificate["ledger_id"] = "the run's ledger"
    window = certificate["window"]
    family, level, index = window["window_id"].rsplit("-", 2)
    window["window_id"] = f"{family}-{level}-{int(index) - (first_window >> int(level[1:]))}"
    window["first_window"] -= first_window
    window["last_window"] -= first_window
    for key in ("start", "end"):  # 1-second windows: seconds since the first window's start
        window[key] = datetime.fromisoformat(window[key]).timestamp() - first_window
    return release


def one_run(unique_settings, tmp_path, with_example: bool) -> list[dict]:
    settings = unique_settings.model_copy(
        update={
            "streams": [
                StreamConfig(
                    name="s",
                    hypothesis_class="thresholds:64",
                    release=ReleaseConfig(
                        window=WindowConfig(kind="time", seconds=1.0), epsilon_budget=1.0, expected_size=5
                    ),
                )
            ],
            "ledger_create_if_missing": True,
            "data_dir": tmp_path / ("with" if with_example else "without"),
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        if with_example:
            example = {"stream_id": "s", "x": 40, "y": 1}
            run(produce_json(settings, settings.topic("examples"), [("s", example)]))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        wait_until(lambda: len(ledger.entries("s")) >= RELEASES + 2, 120, what="a few windows released")
    finally:
        assert worker.stop() == 0
    records = run(consume_all(settings, settings.topic("hypotheses"), RELEASES))[:RELEASES]
    # The stream's first window: the one holding its registration in the ledger.
    first = json.loads(records[0].value)["certificate"]["window"]["first_window"]
    return [public_view(r.value, first, ledger.ledger_id) for r in records]


def test_a_live_worker_publishes_the_same_schedule_with_or_without_one_example(unique_settings, tmp_path):
    without = one_run(unique_settings, tmp_path, with_example=False)
    other = unique_settings.model_copy(
        update={"app_id": unique_settings.app_id + "-b", "topic_prefix": unique_settings.topic_prefix + "b."}
    )
    with_one = one_run(other, tmp_path, with_example=True)
    assert [r["certificate"]["window"]["window_id"] for r in without] == [f"t1-L0-{i}" for i in range(5)]
    for i, (a, b) in enumerate(zip(without, with_one, strict=True)):
        assert a == b, f"release {i}: {json.dumps(a, sort_keys=True)} != {json.dumps(b, sort_keys=True)}"
