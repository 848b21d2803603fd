"""Every example of the README and the documentation site runs, or is validated (see ``examples.py``)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

from privstream.stream_app.cli import main
from privstream.stream_app.settings import ENV_PREFIX, FAUST_ENV_PREFIX, Settings

from .examples import (
    MARKERS,
    Block,
    blocks,
    broker_ports,
    clean_environment,
    console_steps,
    environment_assignments,
    local_bootstrap_ports,
    markdown_files,
    markers_in,
    output_matches,
    run_python,
    run_shell,
)

#: Variables the product reads besides the settings (the CLI's, the test servers').
OTHER_VARIABLES = {
    "PRIVSTREAM_CONFIG_FILE",
    "PRIVSTREAM_DEBUG",
    "PRIVSTREAM_PG_BINDIR",
    "PRIVSTREAM_PG_OS_USER",
}

ALL_BLOCKS = [b for path in markdown_files() for b in blocks(path)]


def runnable(block: Block) -> bool:
    return block.is_shell and block.marker not in ("needs-broker", "skip", "file")


def pages_with_runnable_blocks() -> list[Path]:
    return sorted({b.path for b in ALL_BLOCKS if runnable(b)})


def page_id(path: Path) -> str:
    return str(path.relative_to(Path(__file__).resolve().parents[2]))


@pytest.mark.parametrize("page", pages_with_runnable_blocks(), ids=page_id)
def test_the_shell_examples_of_a_page_run_and_print_what_is_shown(page: Path, tmp_path: Path) -> None:
    """The page's blocks in order, in one directory: bash blocks exit 0; console commands print
    output of the shape shown (exit 2 where the output shown is an error, else 0)."""
    env = clean_environment()
    for block in blocks(page):
        if block.marker == "file":
            (tmp_path / str(block.argument)).write_text(block.text)
            continue
        if not runnable(block):
            continue
        if block.lang != "console":
            done = run_shell(block.text, tmp_path, env)
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}"
            assert "deprecated" not in done.stdout, f"{block.where}: {done.stdout}"
            continue
        for step in console_steps(block.text):
            done = run_shell(step.command, tmp_path, env)
            printed = done.stdout.splitlines()
            shown_error = any("error:" in line for line in step.expected)
            assert done.returncode == (2 if shown_error else 0), (
                f"{block.where}: `{step.command}` exited {done.returncode}\n{done.stdout}"
            )
            assert output_matches(step.expected, printed), (
                f"{block.where}: `{step.command}` printed\n{done.stdout}\n"
                "which does not have the shape shown:\n" + "\n".join(step.expected)
            )


def test_the_documentation_has_runnable_examples() -> None:
    """The examples above are a real check: the guide and the references hold many of them."""
    assert len([b for b in ALL_BLOCKS if runnable(b)]) >= 15
    assert len(pages_with_runnable_blocks()) >= 5


SHELL_NOT_RUN = [b for b in ALL_BLOCKS if b.is_shell and b.marker in ("needs-broker", "skip")]


@pytest.mark.parametrize("block", SHELL_NOT_RUN, ids=lambda b: b.where)
def test_examples_that_need_a_broker_are_valid_shell(block: Block) -> None:
    script = (
        "\n".join(s.command for s in console_steps(block.text)) if block.lang == "console" else block.text
    )
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert checked.returncode == 0, f"{block.where}: {checked.stderr}"


SETTINGS_FILES = [
    b
    for b in ALL_BLOCKS
    if b.marker != "skip" and (b.lang == "toml" or (b.lang == "json" and b.marker == "settings"))
]


@pytest.mark.parametrize("block", SETTINGS_FILES, ids=lambda b: b.where)
def test_every_configuration_file_example_is_valid(block: Block, tmp_path: Path, monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # relative paths (class files, data_dir) resolve in a scratch directory
    path = tmp_path / f"settings.{block.lang}"
    path.write_text(block.text)
    Settings(config_file=path)
    # `privstream config check` accepts it too, as a worker would, and creates nothing.
    before = sorted(tmp_path.rglob("*"))
    assert main(["config", "check", str(path), "--no-simulation", "--json"]) == 0, block.where
    assert sorted(tmp_path.rglob("*")) == before, f"{block.where}: config check created files"


ENVIRONMENTS = [b for b in ALL_BLOCKS if b.is_shell and environment_assignments(b)]


@pytest.mark.parametrize("block", ENVIRONMENTS, ids=lambda b: b.where)
def test_every_environment_example_is_valid(block: Block, monkeypatch, tmp_path: Path) -> None:
    for name in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    fields = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    assignments = environment_assignments(block)
    for name, value in assignments.items():
        known = name in fields or name in OTHER_VARIABLES or name.startswith(FAUST_ENV_PREFIX)
        assert known, f"{block.where}: {name} is not a setting privstream reads"
        if name in fields and name != "PRIVSTREAM_CONFIG_FILE":
            monkeypatch.setenv(name, value)
    Settings()


PYTHON = [b for b in ALL_BLOCKS if b.lang in ("python", "py")]


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.where)
def test_every_python_example_is_a_whole_script(block: Block) -> None:
    """It compiles as a file (no top-level ``await``/``async for``: asynchronous code runs under
    ``asyncio.run``), and a subscriber's code imports the client, not the service."""
    compile(block.text, block.where, "exec")
    tree = ast.parse(block.text)
    asynchronous = any(isinstance(node, ast.AsyncFunctionDef) for node in ast.walk(tree))
    assert not asynchronous or "asyncio.run(" in block.text, (
        f"{block.where}: defines a coroutine it never runs"
    )
    assert "privstream.stream_app.sdk" not in block.text, (
        f"{block.where}: a subscriber imports privstream_client (pip install privstream-client)"
    )


OFFLINE_PYTHON = [
    b for b in PYTHON if b.marker not in ("needs-broker", "skip", "file")
]  # a file: its page runs it


@pytest.mark.parametrize("block", OFFLINE_PYTHON, ids=lambda b: b.where)
def test_every_offline_python_example_runs(block: Block, tmp_path: Path) -> None:
    done = run_python(block.text, tmp_path, clean_environment())
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}"
    assert "deprecated" not in done.stdout, f"{block.where}: {done.stdout}"


def test_a_skipped_example_says_why() -> None:
    for block in ALL_BLOCKS:
        if block.marker == "skip":
            assert len(str(block.argument or "").split()) >= 3, (
                f"{block.where}: <!-- docs-example: skip REASON --> says why no test runs it"
            )


def test_no_example_uses_a_deprecated_setting_or_a_safety_switch_in_a_file() -> None:
    """``levels`` was renamed ``top_level``; ``ledger_create_if_missing`` belongs to a first start's
    environment, never to a file that later starts read too (it would switch the guard off for good)."""
    for block in ALL_BLOCKS:
        assert not re.search(r"(?m)(^\s*levels\s*=|\"levels\"\s*:|--levels\b)", block.text), (
            f"{block.where}: `levels` is deprecated: top_level (--top-level)"
        )
        if block.lang in ("toml", "json", "yaml"):
            assert not re.search(r"ledger_create_if_missing", block.text, re.IGNORECASE), (
                f"{block.where}: ledger_create_if_missing in a settings file: set "
                "PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true on the first start only"
            )


def test_every_local_broker_port_is_one_a_documented_broker_uses() -> None:
    ports = broker_ports(ALL_BLOCKS)
    assert ports == {"9092"}, ports
    for block in ALL_BLOCKS:
        for port in local_bootstrap_ports(block):
            assert port in ports, (
                f"{block.where}: a broker on port {port}, which no `privstream broker --port` uses"
            )


def test_every_example_marker_is_known_and_placed_before_a_block() -> None:
    marked = {(b.path, b.line) for b in ALL_BLOCKS if b.marker}
    for path in markdown_files():
        for line, kind in markers_in(path):
            assert kind in MARKERS, f"{path}:{line}: unknown example marker {kind!r}"
        count = sum(1 for _ in markers_in(path))
        assert count == sum(1 for p, _ in marked if p == path), (
            f"{path}: a marker is not right before a block"
        )
    assert all(b.argument for b in ALL_BLOCKS if b.marker == "file")
