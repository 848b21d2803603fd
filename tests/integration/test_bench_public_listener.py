"""`benchmarks/bench_public_listener.py` runs end to end at a small size and reports every figure."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_public_listener.py"


def test_the_listener_benchmark_drains_every_backlog_and_the_crowd_is_answered():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    arguments = ["--entries", "500", "--examples", "3000", "--clients", "10", "--no-save"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=600, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert (result["entries"], result["examples"], result["clients"]) == (500, 3000, 10)
    for name in ("quiet", "crowd_elsewhere", "crowd"):
        phase = result[name]
        assert phase["worker_exit_status"] == 0 and phase["ingest_rate"] > 0, name
        assert phase["healthz_samples"] > 0 and phase["healthz_p99_seconds"] >= phase["healthz_p50_seconds"]
        assert phase["public_requests_failed"] == 0, name
    assert result["crowd"]["public_requests_ok"] > 0 and result["quiet"]["public_requests_ok"] == 0
    assert result["quiet"]["streams_first_seconds"] > 0 and result["quiet"]["releases_again_seconds"] > 0
    for ratio in ("ingest_ratio", "ingest_ratio_crowd_elsewhere", "healthz_p99_ratio"):
        assert result[ratio] > 0
