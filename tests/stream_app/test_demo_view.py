"""The demo's live view and the command it prints for a second terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from privstream.stream_app.embedded.demo import privstream_command
from privstream.stream_app.embedded.demo_view import ProgressView


def test_the_subscribe_command_printed_runs_without_the_virtualenv_on_path(monkeypatch) -> None:
    """After ``scripts/demo.sh`` (which does not activate .venv) a bare ``privstream`` is not found:
    the demo prints the path of its own installation's command, which runs from the checkout."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    checkout = Path(sys.executable).parents[2]
    command = privstream_command(cwd=checkout)
    assert command != "privstream"
    done = subprocess.run(
        f"{command} subscribe --help",
        shell=True,
        cwd=checkout,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "--level" in done.stdout, done.stderr


def status(examples: int) -> dict[str, object]:
    return {"streams": {"demo": {"examples": examples, "mistakes": 3, "mistake_bound": 16}}, "budget": {}}


def test_the_first_line_with_examples_shows_their_rate_since_the_producer_started() -> None:
    """A worker can learn a whole backlog between two polls: its first progress line shows the
    rate since production started, not 0 ex/s."""
    out, now = io.StringIO(), [0.0]
    view = ProgressView(20000, out, clock=lambda: now[0])
    view.show(status(0))  # joined, nothing learned yet
    view.producing()
    now[0] = 4.0
    view.show(status(20000))
    first = out.getvalue().splitlines()[-1]
    assert first.startswith("examples 20000/20000") and first.endswith("5,000 ex/s"), first
    now[0] = 8.0
    view.show(status(20000), final=True)
    assert out.getvalue().splitlines()[-1].endswith("2,500 ex/s")
