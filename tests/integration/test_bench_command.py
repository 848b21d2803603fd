"""`privstream bench ingest --json` runs end to end and reports every figure."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.live


def test_bench_ingest_reports_rates_ratios_latency_and_each_part_of_a_flood_against_the_raw_consumer():
    """One run (the live tier's time is CI's): the clean figures, then the flood's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "privstream",
            "bench",
            "ingest",
            "--json",
            "--examples",
            "20000",
            "--batch-size",
            "500",
            "--latency-seconds",
            "1",
            "--invalid-ratio",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in (
        "raw_rate",
        "service_rate",
        "ratio",
        "strict_ratio",
        "batch_rate",
        "batch_ratio",
        "p50_latency_seconds",
        "p99_latency_seconds",
    ):
        assert result[key] > 0, key
    assert result["ratio"] == pytest.approx(result["service_rate"] / result["raw_rate"])
    assert result["p99_latency_seconds"] >= result["p50_latency_seconds"]
    assert result["latency_samples"] > 0
    # The latency at a tenth and at half of the measured rate, every example sent accounted for.
    for load, share in (("latency_at_10_percent", 0.1), ("latency_at_50_percent", 0.5)):
        figures = result[load]
        assert figures["rate"] == pytest.approx(share * result["service_rate"])
        assert 0 < figures["p50_seconds"] <= figures["p99_seconds"]
        assert figures["samples"] > 0 and figures["missing"] == 0
    assert result["p99_latency_seconds"] == result["latency_at_50_percent"]["p99_seconds"]
    for key in (
        "raw_mix_rate",
        "strict_raw_mix_rate",
        "mix_rate",
        "mix_valid_rate",
        "raw_flood_rate",
        "strict_raw_flood_rate",
        "flood_rate",
    ):
        assert result[key] > 0, key
    for part in ("mix", "flood"):
        assert result[f"{part}_ratio"] == pytest.approx(result[f"{part}_rate"] / result[f"raw_{part}_rate"])
        assert result[f"strict_{part}_ratio"] == pytest.approx(
            result[f"{part}_rate"] / result[f"strict_raw_{part}_rate"]
        )
    # Every hostile message (20,000 in the mix, 20,000 alone) was counted as invalid.
    assert result["invalid"] == 40_000 and result["worker_exit_status"] == 0


def test_bench_startup_reports_each_stage_of_three_starts():
    """A worker on its own embedded broker, on a running one, and restarted: each stage reached, in
    order, from outside and as the worker saw it, and each start ready and predicting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    out = subprocess.run(
        [sys.executable, "-m", "privstream", "bench", "startup", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["imports_seconds"] > 0
    for start in ("own_broker", "running_broker", "restart"):
        figures = result[start]
        assert 0 < figures["listening"] <= figures["ready"] <= figures["first_prediction"], start
        inside = figures["inside"]
        assert list(inside) == ["store_ready", "listening", "partitions_assigned", "first_prediction"], start
        assert sorted(inside.values()) == list(inside.values()), start
        assert figures["exit_status"] == 0
