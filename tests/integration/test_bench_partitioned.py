"""`privstream bench faults --partitioned 6`: one stream keyed by example id over six partitions and
three workers on PostgreSQL, a worker SIGKILLed and restarted and the database cut, releasing time
windows: every example learned, stored once and read by its window's one node; every window
released once, none missing; the ledger and the public topic agree."""

import json
import os
import subprocess
import sys

import pytest

from privstream.stream_app.store.pg_server import PostgresUnavailableError, find_bindir

pytestmark = pytest.mark.live


def test_one_stream_over_six_partitions_and_three_killed_workers_loses_and_doubles_nothing():
    try:
        find_bindir()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    command = [sys.executable, "-m", "privstream", "bench", "faults", "--json", "--store", "postgresql"]
    command += ["--partitioned", "6", "--workers", "3", "--examples", "12000", "--rate", "800"]
    command += ["--window-seconds", "5", "--kill-every", "8", "--timeout", "400"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert out.stdout.strip(), out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"bench_faults_partitioned": result}))
    assert result["kills"] >= 1 and result["database_cut"]["connections"] >= 3
    assert result["examples_sent"] == 12000
    assert result["examples_learned"] == result["examples_sent"]  # every shard's examples predicted
    assert result["examples_stored"] == result["examples_sent"]  # each stored once, none late
    assert result["rows_left_in_closed_windows"] == 0  # each read by its window's node
    assert result["windows_released"] >= 3 and result["windows_contiguous"] is True
    assert result["duplicate_releases"] == 0 and result["double_charges"] == 0
    assert result["ledger_matches_certificates"] is True
    assert result["worker_exit_codes"] == [0, 0, 0]
    assert out.returncode == 0, out.stderr[-4000:]
