"""The pages whose examples need a broker, run as a user runs them (the live tier).

Every block of such a page runs in order in one directory, as in a user's terminals: the broker and
the worker in the background (each in its own terminal on the page), waited for as a user would
(the broker prints its address, the worker answers ``/readyz``), every other command to completion
with output of the shape shown, the Python blocks as scripts. ``export PRIVSTREAM_*`` lines carry
over to the later blocks, as in one terminal. Only the ports change: the page's 9092, 6066 and 9466
become free ones. A page that starts no broker of its own continues the quick start of
``docs/getting-started/first-worker.md``, run first in the same directory.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.embedded.demo import fetch_json

from ..integration.conftest import wait_until
from .examples import (
    DOCS,
    ROOT,
    Block,
    ConsoleStep,
    blocks,
    clean_environment,
    console_steps,
    markdown_files,
    output_matches,
    run_python,
    run_shell,
)

pytestmark = pytest.mark.live

QUICK_START = DOCS / "getting-started" / "first-worker.md"
#: Commands that run until stopped, each in its own terminal on the page.
BACKGROUND = re.compile(r"\bprivstream (broker|worker)\b(?!.*--help)")
READY_SECONDS = 120.0  # a cold consumer-group join on the embedded broker takes 5-30 s
PYTHON_SECONDS = 120.0
_EXPORT = re.compile(r"^\s*export\s+(PRIVSTREAM_[A-Z0-9_]+)=(\S+)\s*$", re.MULTILINE)

#: Pages whose own live test runs them (with more checks of what they did), by that test.
DEDICATED = {DOCS / "guide" / "tabular-streams.md": "tests/integration/test_live_tabular.py"}
LIVE_PAGES = sorted(
    {b.path for path in markdown_files() for b in blocks(path) if b.marker == "needs-broker"} - set(DEDICATED)
)


def starts_a_broker(page: Path) -> bool:
    return any(b.marker == "needs-broker" and "privstream broker" in b.text for b in blocks(page))


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

    def logs(self) -> str:
        return self.out.read_text()[-2000:] + self.log.read_text()[-4000:]

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Terminals:
    """The user's terminals: one directory, the background commands, the exported settings."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.ports = {"9092": free_port(), "6066": free_port(), "9466": free_port()}
        self.env = clean_environment()
        self.env["PRIVSTREAM_PUBLIC_PORT"] = str(self.ports["6066"])
        self.env["PRIVSTREAM_OPERATOR_PORT"] = str(self.ports["9466"])
        self.running: list[Background] = []
        self.ran = 0

    def localise(self, text: str) -> str:
        return re.sub(r"\b(9092|6066|9466)\b", lambda m: str(self.ports[m.group(1)]), text)

    def run_page(self, page: Path) -> None:
        for block in blocks(page):
            text = self.localise(block.text)
            if block.marker == "file":
                (self.cwd / str(block.argument)).write_text(text)
            elif block.marker == "skip":
                continue
            elif block.lang in ("python", "py"):
                self.run_python(block, text)
            elif block.is_shell:
                for step in self.steps(block, text):
                    self.run_step(block, step)

    @staticmethod
    def steps(block: Block, text: str) -> list[ConsoleStep]:
        if block.lang == "console":
            return console_steps(text)
        if block.marker != "needs-broker":
            return [ConsoleStep(text, [])]
        # one command per line (a trailing backslash continues it): the page's terminals
        commands: list[str] = []
        pending = ""
        for line in text.splitlines():
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1] + "\n"
                continue
            if pending.strip() and not pending.lstrip().startswith("#"):
                commands.append(pending)
            pending = ""
        return [ConsoleStep(command, []) for command in commands]

    def run_step(self, block: Block, step: ConsoleStep) -> None:
        if block.marker == "needs-broker" and BACKGROUND.search(step.command):
            self.start(block, step)
            return
        done = run_shell(step.command, self.cwd, self.env)
        self.ran += 1
        shown_error = any("error:" in line for line in step.expected)
        assert done.returncode == (2 if shown_error else 0), (
            f"{block.where}: `{step.command}` exited {done.returncode}:\n{done.stdout}\n{self.logs()}"
        )
        assert output_matches(step.expected, done.stdout.splitlines()), (
            f"{block.where}: `{step.command}` printed\n{done.stdout}\nnot the shape shown:\n"
            + "\n".join(step.expected)
        )
        assert "deprecated" not in done.stdout, f"{block.where}: {done.stdout}"
        for name, value in _EXPORT.findall(step.command):
            self.env[name] = shlex.split(value)[0]

    def run_python(self, block: Block, text: str) -> None:
        done = run_python(text, self.cwd, self.env, timeout=PYTHON_SECONDS)
        self.ran += 1
        assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}\n{self.logs()}"
        assert done.stdout.strip(), f"{block.where}: printed nothing"

    def start(self, block: Block, step: ConsoleStep) -> None:
        """A documented broker or worker, waited for as a user would."""
        name = "broker" if "privstream broker" in step.command else "worker"
        process = Background(step.command, self.cwd, self.env, f"{len(self.running)}-{name}")
        self.running.append(process)
        if name == "broker":  # ready when it prints its address, as shown
            printed = wait_until(
                lambda: not process.alive() or process.out.read_text().strip(),
                60,
                what="the broker's address",
            )
            assert process.alive(), f"{block.where}:\n{process.logs()}"
            assert output_matches(step.expected, str(printed).splitlines()), process.logs()
        else:
            ready = f"http://127.0.0.1:{self.ports['9466']}/readyz"
            wait_until(
                lambda: not process.alive() or fetch_json(ready), READY_SECONDS, what="the worker's /readyz"
            )
            assert process.alive(), f"{block.where}:\n{process.logs()}"

    def logs(self) -> str:
        return "\n".join(f"-- {p.log.name}:\n{p.logs()}" for p in self.running)

    def stop(self) -> None:
        for process in reversed(self.running):
            process.stop()


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[Terminals]:
    opened = Terminals(tmp_path)
    try:
        yield opened
    finally:
        opened.stop()


@pytest.mark.parametrize("page", LIVE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_that_needs_a_broker_runs_as_documented(page: Path, terminals: Terminals) -> None:
    if not starts_a_broker(page):
        terminals.run_page(QUICK_START)
    terminals.run_page(page)
    assert len(terminals.running) >= 2, f"{page}: no broker and worker started by hand"
    assert terminals.ran >= 2


def test_the_live_tier_runs_the_quick_start_and_the_pages_that_need_a_broker() -> None:
    assert QUICK_START in LIVE_PAGES and starts_a_broker(QUICK_START)
    assert len(LIVE_PAGES) >= 5
    for page, test in DEDICATED.items():
        assert "Terminals" in (ROOT / test).read_text(), f"{test} runs {page} with Terminals"
