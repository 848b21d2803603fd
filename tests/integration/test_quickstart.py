"""The by-hand quick start (docs/getting-started/first-worker.md), run exactly as the page shows it.

Every block of the page runs in order in one directory: the broker and the worker in the background
(as in their own terminals), the other commands to completion, each printing output of the shape the
page shows. Only the ports change: the page's 9092, 6066 and 9466 become free ones.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.embedded.demo import fetch_json

from ..docs.examples import (
    DOCS,
    ConsoleStep,
    blocks,
    clean_environment,
    console_steps,
    output_matches,
    run_shell,
)
from .conftest import wait_until

pytestmark = pytest.mark.live

PAGE = DOCS / "getting-started" / "first-worker.md"
#: Commands that run until stopped, each in its own terminal on the page.
BACKGROUND = re.compile(r"\bprivstream (broker|worker)\b(?!.*--help)")
READY_SECONDS = 120.0  # a cold consumer-group join on the embedded broker takes 5-30 s


class Background:
    """A documented long-running command, started in its own process group."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str], name: str) -> None:
        self.log = cwd / f"{name}.log"
        self.out = cwd / f"{name}.out"
        with self.log.open("w") as log, self.out.open("w") as out:
            self.process = subprocess.Popen(
                ["bash", "-c", command], cwd=cwd, env=env, stdout=out, stderr=log, start_new_session=True
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def test_the_first_worker_page_runs_as_documented(tmp_path: Path) -> None:
    ports = {"9092": free_port(), "6066": free_port(), "9466": free_port()}

    def localise(text: str) -> str:
        return re.sub(r"\b(9092|6066|9466)\b", lambda m: str(ports[m.group(1)]), text)

    env = clean_environment()
    env["PRIVSTREAM_PUBLIC_PORT"], env["PRIVSTREAM_OPERATOR_PORT"] = str(ports["6066"]), str(ports["9466"])
    running: list[Background] = []
    ran = 0
    try:
        for block in blocks(PAGE):
            text = localise(block.text)
            if block.marker == "file":
                (tmp_path / str(block.argument)).write_text(text)
                continue
            if not block.is_shell or block.marker == "skip":
                continue
            steps = console_steps(text) if block.lang == "console" else [ConsoleStep(text, [])]
            for step in steps:
                if BACKGROUND.search(step.command) and block.marker == "needs-broker":
                    running.append(start(step, tmp_path, env, ports, len(running)))
                    continue
                done = run_shell(step.command, tmp_path, env)
                ran += 1
                shown_error = any("error:" in line for line in step.expected)
                assert done.returncode == (2 if shown_error else 0), f"`{step.command}`:\n{done.stdout}"
                assert output_matches(step.expected, done.stdout.splitlines()), (
                    f"`{step.command}` printed\n{done.stdout}\nnot the shape shown:\n"
                    + "\n".join(step.expected)
                )
        assert len(running) == 2 and ran >= 5, "the page no longer starts a broker and a worker by hand"
    finally:
        for process in reversed(running):
            process.stop()


def start(step: ConsoleStep, cwd: Path, env: dict[str, str], ports: dict[str, int], index: int) -> Background:
    """Start a documented broker or worker and wait until it is ready, as a user would."""
    name = "broker" if "privstream broker" in step.command else "worker"
    process = Background(step.command, cwd, env, f"{index}-{name}")

    def logs() -> str:
        return process.out.read_text()[-2000:] + process.log.read_text()[-4000:]

    if name == "broker":  # ready when it prints its address, as shown
        printed = wait_until(
            lambda: not process.alive() or process.out.read_text().strip(), 60, what="the broker's address"
        )
        assert process.alive(), logs()
        assert output_matches(step.expected, str(printed).splitlines()), logs()
    else:
        ready = f"http://127.0.0.1:{ports['9466']}/readyz"
        wait_until(
            lambda: not process.alive() or fetch_json(ready), READY_SECONDS, what="the worker's /readyz"
        )
        assert process.alive(), logs()
    return process
