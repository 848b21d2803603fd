"""A worker killed between charge and publish: on restart the stored release goes out once, byte for
byte; a worker killed mid-charge leaves a consistent ledger (both backends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.stream_app.store.backends import SPEC_ENV, LedgerBackend

REPO = Path(__file__).resolve().parents[3]

# The worker: charge one window, say so, then hang before it would publish and mark the release.
CHARGE_THEN_HANG = """
import sys, time
from tests.stream_app.store.backends import open_ledger_from_spec

ledger = open_ledger_from_spec()
charge = ledger.charge("s1", "w7", "laplace", 0.5, 1e-7, bytes.fromhex(sys.argv[1]))
print("charged", charge.entry_id, flush=True)
time.sleep(600)  # killed here, before publishing
ledger.mark_published(charge.entry_id)
"""

# The worker: charge windows as fast as it can, reporting each one; killed at some point.
CHARGE_FOREVER = """
from tests.stream_app.store.backends import open_ledger_from_spec

ledger = open_ledger_from_spec()
for i in range(10**9):
    charge = ledger.charge("s1", f"w{i}", "laplace", 0.001, 0.0, bytes([i % 256]) * 1000)
    print("charged", charge.entry_id, flush=True)
"""


def _start(backend: LedgerBackend, script: str, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        SPEC_ENV: backend.spec(),
    }
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _read_charged(child: subprocess.Popen[str]) -> int:
    line = child.stdout.readline() if child.stdout else ""
    if not line.startswith("charged "):
        child.kill()
        raise AssertionError(f"worker failed: {line!r} {child.communicate()[1]}")
    return int(line.split()[1])


def _kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL


def _publish_outbox(ledger, topic: list[bytes]) -> None:
    """What the service does on start: publish every stored, unconfirmed release, then mark it."""
    for charge in ledger.unpublished():
        topic.append(charge.release)
        ledger.mark_published(charge.entry_id)


def test_release_stored_before_a_crash_is_published_once_byte_for_byte(
    ledger_backend: LedgerBackend,
) -> None:
    ledger_backend.open(create=True, budgets={"s1": (1.0, 1e-6)}).close()
    release = os.urandom(4096)  # arbitrary bytes, as a serialised release with its noise

    worker = _start(ledger_backend, CHARGE_THEN_HANG, release.hex())
    entry_id = _read_charged(worker)
    _kill(worker)

    topic: list[bytes] = []  # the public topic
    with ledger_backend.open() as ledger:  # the restarted worker
        outbox = ledger.unpublished()
        assert [(c.entry_id, c.window_id, c.release) for c in outbox] == [(entry_id, "w7", release)]
        assert ledger.spent("s1") == (0.5, 1e-7)

        # Replaying the window computes a release with fresh noise; the ledger hands back the stored one.
        replay = ledger.charge("s1", "w7", "laplace", 0.5, 1e-7, os.urandom(4096))
        assert (replay.entry_id, replay.release) == (entry_id, release)
        assert len(ledger.entries("s1")) == 1

        _publish_outbox(ledger, topic)
        assert ledger.unpublished() == []
        _publish_outbox(ledger, topic)  # a second pass finds nothing left to publish

    with ledger_backend.open() as ledger:  # and after another restart
        assert ledger.unpublished() == []
        assert ledger.spent("s1") == (0.5, 1e-7)
        assert [c.entry_id for c in ledger.entries("s1")] == [entry_id]
    assert topic == [release]


def test_a_worker_killed_mid_stream_leaves_a_consistent_ledger(ledger_backend: LedgerBackend) -> None:
    ledger_backend.open(create=True, budgets={"s1": (1000.0, 0.0)}).close()

    worker = _start(ledger_backend, CHARGE_FOREVER)
    reported = [_read_charged(worker) for _ in range(50)]
    _kill(worker)

    with ledger_backend.open() as ledger:  # opening runs the integrity check
        entries = ledger.entries("s1")
        ids = [c.entry_id for c in entries]
        # Everything the worker reported as charged is there (it may have charged one or two more).
        assert ids[: len(reported)] == reported
        assert len(ids) >= len(reported)
        # The stored spend is exactly the sum of the stored charges.
        assert ledger.spent("s1").epsilon == len(entries) / 1000
        assert all(c.release == bytes([int(c.window_id[1:]) % 256]) * 1000 for c in entries)
