"""The service end to end on the embedded broker: ingest, SOA, dead letters, metrics, shutdown."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from privstream.schemas import PredictionBatch
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.sources.synthetic import synthetic_examples

from .conftest import (
    children_of,
    consume_all,
    prediction_count,
    process_gone,
    run,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.live

N_VALID = 2000
THRESHOLD_CLASS = "thresholds:1024"


def invalid_messages(n: int) -> list[tuple[bytes, str]]:
    """``n`` invalid messages covering every rejection reason, with the reason each must get."""
    kinds = [
        (b'{"stream_id": "thr", "x": ', "invalid_json"),
        (b"\xff\xfe not even utf-8", "invalid_json"),
        (json.dumps({"stream_id": "thr", "y": 1}).encode(), "missing_field"),
        (json.dumps({"x": 4, "y": 1}).encode(), "missing_field"),
        (json.dumps({"stream_id": "thr", "x": "4", "y": 1}).encode(), "wrong_type"),
        (json.dumps({"stream_id": "thr", "x": 4, "y": 3}).encode(), "invalid_label"),
        (json.dumps({"stream_id": "thr", "x": 1024, "y": 1}).encode(), "out_of_domain"),
        (json.dumps({"stream_id": "mat", "x": 6, "y": 1}).encode(), "out_of_domain"),
        (json.dumps({"stream_id": "nope", "x": 4, "y": 1}).encode(), "unknown_stream"),
    ]
    return [kinds[i % len(kinds)] for i in range(n)]


@pytest.fixture
def matrix_class_file(tmp_path):
    """A finite class given as a file: all 0/1 functions on 6 points with at most 2 ones."""
    subsets = [(), *[(i,) for i in range(6)], *[(i, j) for i in range(6) for j in range(i + 1, 6)]]
    rows = [[1 if j in subset else 0 for j in range(6)] for subset in subsets]
    path = tmp_path / "at_most_2.npy"
    np.save(path, np.array(rows, dtype=np.uint8))
    return path


def metric_value(text: str, name: str, **labels: str) -> float:
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{wanted} not in /metrics")


def test_worker_end_to_end(unique_settings, matrix_class_file, tmp_path):
    settings = unique_settings.model_copy(
        update={
            "streams": [
                StreamConfig(name="thr", hypothesis_class=THRESHOLD_CLASS),
                StreamConfig(name="mat", hypothesis_class=str(matrix_class_file)),
            ]
        }
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        thr = synthetic_examples(THRESHOLD_CLASS, N_VALID // 2, seed=1)
        mat = synthetic_examples(str(matrix_class_file), N_VALID // 2, seed=2)
        valid = []
        for name, batch in (("thr", thr), ("mat", mat)):
            for i, message in enumerate(batch.messages(name)):
                valid.append((name, {**message, "id": f"{name}-{i}"}))
        invalid = invalid_messages(50)
        records = valid + [("bad", raw) for raw, _ in invalid]
        run(produce_json(settings, settings.topic("examples"), records))

        predictions = run(
            consume_all(settings, settings.topic("predictions"), N_VALID, weight=prediction_count)
        )
        dead = run(consume_all(settings, settings.topic("examples.dlq"), len(invalid)))

        # Every valid example got exactly one prediction, and no invalid one did.
        batches = [PredictionBatch.model_validate_json(r.value) for r in predictions]
        ids = [i for b in batches for i in b.example_ids]
        assert sorted(ids) == sorted(m["id"] for _, m in valid)
        bounds = {"thr": 10, "mat": 2}  # Ldim(thresholds:1024) = floor(log2 1025); at-most-2-ones: 2
        for stream, bound in bounds.items():
            ours = [b for b in batches if b.stream_id == stream]
            assert {b.mistake_bound for b in ours} == {bound}
            assert max(b.mistakes for b in ours) <= bound
            # The per-batch counts chain up: each batch starts where the previous one ended.
            ours.sort(key=lambda b: b.mistakes_before)
            assert ours[0].mistakes_before == 0
            assert all(a.mistakes == b.mistakes_before for a, b in itertools.pairwise(ours))
            assert all(b.realizable for b in ours)
            assert all(p in (0, 1) for b in ours for p in b.predictions)

        # All 50 invalid messages are dead-lettered, with their reason and source in headers.
        assert len(dead) == len(invalid)
        reasons = sorted(dict(r.headers)["error.reason"].decode() for r in dead)
        assert reasons == sorted(reason for _, reason in invalid)
        assert sorted(r.value for r in dead) == sorted(raw for raw, _ in invalid)
        for record in dead:
            headers = dict(record.headers)
            assert headers["source.topic"].decode() == settings.topic("examples")
            assert int(headers["source.partition"]) >= 0 and int(headers["source.offset"]) >= 0

        # The metrics endpoint shows the counts.
        wait_until(
            lambda: fetch_json(f"{worker.operator_url}/status")["handled"] == len(records),
            30,
            what="all messages handled",
        )
        text = urllib.request.urlopen(f"{worker.operator_url}/metrics").read().decode()
        assert metric_value(text, "privstream_examples_received_total") == len(records)
        assert metric_value(text, "privstream_examples_learned_total", stream="thr") == N_VALID // 2
        assert metric_value(text, "privstream_dead_letters_published_total") == len(invalid)
        for reason in {r for _, r in invalid}:
            expected = sum(1 for _, r in invalid if r == reason)
            assert metric_value(text, "privstream_examples_invalid_total", reason=reason) == expected
        assert metric_value(text, "privstream_soa_mistake_bound", stream="thr") == 10
        mistakes = metric_value(text, "privstream_soa_mistakes_total", stream="thr")
        assert mistakes == max(b.mistakes for b in batches if b.stream_id == "thr")
        for line in text.splitlines():
            if line and not line.startswith("#"):
                assert line.startswith("privstream_"), line

        # Still healthy and ready.
        assert fetch_json(f"{worker.operator_url}/healthz")["status"] == "ok"
        assert fetch_json(f"{worker.operator_url}/readyz")["status"] == "ready"
    finally:
        pid = worker.process.pid if worker.process else None
        status = worker.stop()
    assert status == 0, worker.log_path.read_text()[-3000:]
    assert pid is not None and process_gone(pid)


def test_worker_without_bootstrap_runs_its_own_broker_and_leaves_nothing(tmp_path, unique_settings):
    """No Kafka configured: the worker starts the embedded broker, and SIGTERM stops both."""
    settings = unique_settings.model_copy(update={"kafka_bootstrap": None})
    worker = start_worker(settings, tmp_path)
    pid = worker.process.pid
    broker_pids = wait_until(lambda: children_of(pid), 10, what="the worker's broker child")
    assert worker.stop() == 0
    wait_until(lambda: all(process_gone(p) for p in [pid, *broker_pids]), 10, what="no process left")


def test_broker_command_prints_address_and_dies_with_its_parent():
    proc = subprocess.Popen(
        [sys.executable, "-m", "privstream", "broker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        address = proc.stdout.readline().strip()
        host, _, port = address.rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
        tansu = wait_until(lambda: children_of(proc.pid), 10, what="the broker child")
        # SIGTERM: a clean stop, the broker goes with it.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        wait_until(lambda: all(process_gone(p) for p in tansu), 10, what="broker stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # SIGKILL of the parent cannot run any cleanup code: the kernel's parent-death signal must.
    proc = subprocess.Popen(
        [sys.executable, "-m", "privstream", "broker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    proc.stdout.readline()
    tansu = wait_until(lambda: children_of(proc.pid), 10, what="the broker child")
    proc.kill()
    proc.wait()
    wait_until(lambda: all(process_gone(p) for p in tansu), 10, what="orphaned broker gone")


def test_demo_json_summary():
    started = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "privstream",
            "demo",
            "--examples",
            "3000",
            "--json",
            "--seed",
            "3",
            "--invalid",
            "12",
            "--window",
            "500",
            "--top-level",
            "1",
            "--epsilon",
            "0.5",
            "--epsilon-budget",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**_clean_env()},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["processed"] == summary["examples"] == 3000
    assert summary["mistakes"] <= summary["mistake_bound"] == 16  # floor(log2(65537))
    assert summary["invalid"] == 12
    # Six windows of 500 close and three level-1 nodes complete: all released, none refused; each
    # example is in one node per level, so its lifetime ε is 0.5 + 0.5, the whole budget, for ever.
    assert (summary["releases"], summary["refusals"]) == (9, 0)
    assert summary["releases_per_level"] == {"0": 6, "1": 3}
    assert summary["epsilon_spent"] == 1.0 == summary["epsilon_budget"] == summary["lifetime_epsilon_bound"]
    assert summary["best_release_level"] == 1 and 0 <= summary["best_release_error"] < 0.1
    assert 0 <= summary["last_release_error"] < 0.1
    assert time.monotonic() - started < 300


def test_demo_with_label_noise_reports_non_realizable_in_its_text_summary():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "privstream",
            "demo",
            "--examples",
            "1500",
            "--seed",
            "4",
            "--class",
            "thresholds:64",
            "--label-noise",
            "0.2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**_clean_env()},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    learned = re.search(
        r"learned 1500 of 1500 examples online \(thresholds:64\): (\d+) SOA mistakes, "
        r"bound 6 \(not realizable",
        text,
    )
    assert learned is not None, text
    assert int(learned.group(1)) > 6
    assert re.search(r"^0 invalid messages", text, re.MULTILINE), text
    assert re.search(
        r"^\d+ private releases, 0 refused: ε spent [\d.]+ of 10 per example \(lifetime\)$",
        text,
        re.MULTILINE,
    ), text


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
