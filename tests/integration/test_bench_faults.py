"""`privstream bench faults`: three workers on a shared store, one SIGKILLed and restarted, the
database cut once; short version of the issue's run (20,000 examples, one kill), on both stores
(SQLite in the slow tier)."""

import json
import os
import subprocess
import sys

import pytest

from privstream.stream_app.store.pg_server import PostgresUnavailableError, find_bindir

pytestmark = pytest.mark.live


@pytest.mark.parametrize(
    "store",
    [
        # CI runs the shared-store case the issue is about (PostgreSQL); SQLite's workers on one host are
        # covered live by test_live_releases (two workers) and test_faults (SIGKILL), this run is `slow`.
        pytest.param("sqlite", marks=pytest.mark.slow),
        "postgresql",
    ],
)
def test_three_workers_lose_nothing_and_release_nothing_twice(store):
    if store == "postgresql":
        try:
            find_bindir()
        except PostgresUnavailableError as exc:
            pytest.skip(str(exc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "privstream",
            "bench",
            "faults",
            "--json",
            "--store",
            store,
            "--workers",
            "3",
            "--examples",
            "20000",
            "--streams",
            "4",
            "--window",
            "1000",
            "--rate",
            "1000",
            "--kill-every",
            "12",
            "--timeout",
            "400",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert out.stdout.strip(), out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"bench_faults": result}))
    assert result["kills"] >= 1 and result["database_cut"] is not None
    if store == "postgresql":
        assert result["database_cut"]["connections"] >= 3  # every worker had a connection to lose
    assert result["examples_sent"] == 20000
    assert result["examples_learned"] == result["examples_sent"]  # every example learned at least once
    assert result["windows_expected"] == 20
    assert result["windows_released"] == result["windows_expected"]
    assert result["duplicate_releases"] == 0
    assert result["double_charges"] == 0
    assert result["ledger_matches_certificates"] is True
    assert result["worker_exit_codes"] == [0, 0, 0]
    assert out.returncode == 0, out.stderr[-4000:]  # the command's own verdict: targets met
