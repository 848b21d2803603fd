"""A Kafka that cannot be reached is one line on the standard error, the command's own: aiokafka's
log line about the same failure is not printed before it, and the command leaves no file behind
(a worker creates its data_dir only once Kafka answered)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privstream.stream_app.embedded.broker import free_port

COMMANDS = {
    "privstream produce": [
        "privstream",
        "produce",
        "--stream",
        "clicks",
        "--synthetic",
        "5",
        "--class",
        "thresholds:16",
    ],
    "privstream subscribe": ["privstream", "subscribe", "clicks", "--count", "1"],
    "privstream worker": ["privstream", "worker"],
    "privstream-subscribe": ["privstream-subscribe", "clicks", "--count", "1"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unreachable_kafka_is_one_line_of_the_command(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    env["PRIVSTREAM_KAFKA_BOOTSTRAP"] = f"127.0.0.1:{free_port()}"  # nobody listens there
    argv = COMMANDS[name]
    command = [str(Path(sys.executable).parent / argv[0]), *argv[1:]]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(name), done.stderr
    assert "Unable connect to" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no var/
