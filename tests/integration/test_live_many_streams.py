"""Many streams start together: their publication slots are measured once per distinct
configuration, alone, so they do not depend on how many streams the worker serves, and a restart
takes them from the machine's slot cache instead of measuring again."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.kafka.clients import ensure_topics
from privstream.stream_app.settings import ReleaseConfig, StreamConfig, WindowConfig

from .conftest import start_worker

pytestmark = [pytest.mark.live, pytest.mark.slow]


def slots_of(worker) -> dict[str, float]:
    with urllib.request.urlopen(f"{worker.operator_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        line.split('stream="', 1)[1].split('"', 1)[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("privstream_release_publish_delay_seconds{")
    }


def test_24_streams_get_the_slot_one_stream_of_their_configuration_gets(unique_settings, tmp_path):
    def streams(count: int) -> list[StreamConfig]:
        release = ReleaseConfig(window=WindowConfig(size=2000), epsilon_budget=2.0, top_level=1)
        return [
            StreamConfig(name=f"s{i}", hypothesis_class="thresholds:65536", release=release)
            for i in range(count)
        ]

    many = unique_settings.model_copy(
        update={
            "streams": streams(24),
            "ledger_create_if_missing": True,
            "slot_cache_file": tmp_path / "slots.json",  # nothing another test measured
        }
    )
    asyncio.run(ensure_topics(many))
    worker = start_worker(many, tmp_path)
    try:
        slots = slots_of(worker)
    finally:
        worker.stop()
    assert len(slots) == 24 and len(set(slots.values())) == 1  # one measurement for the 24
    # levels 0 and 1 read different sizes: two workloads, whatever the number of streams
    assert "2 distinct workloads for 24 streams, 2 measured alone" in worker.log_path.read_text()
    # A restart with one stream more: nothing measured again, the same slot for all 25.
    more = many.model_copy(update={"streams": streams(25), **free_listener_ports()})
    restarted = start_worker(more, tmp_path)
    try:
        again = slots_of(restarted)
    finally:
        restarted.stop()
    assert set(again.values()) == set(slots.values()) and len(again) == 25
    assert "0 measured alone, 2 remembered" in restarted.log_path.read_text()
