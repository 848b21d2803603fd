"""The documentation site builds without a warning, and its references cover the code."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privstream.stream_app.cli import build_parser
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig

from .examples import DOCS, ROOT
from .figure_pages import placeholders


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the tests below (a build takes a minute on a busy machine)."""
    site = tmp_path_factory.mktemp("site") / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return site


def test_mkdocs_build_strict(site: Path) -> None:
    """Every page in the navigation, every link and anchor resolved, every API page rendered."""
    assert (site / "index.html").is_file()


def test_the_built_site_shows_every_figure_where_its_page_asks(site: Path) -> None:
    for name, pages in placeholders().items():
        for page in pages:
            stem = page.removesuffix(".md").removesuffix("index")  # a.md -> a/, a/index.md -> a/
            html = (site / stem / "index.html").read_text()
            assert f'id="figure-{name}"' in html and "<!-- figure:" not in html, (name, page)


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command path (``worker``, ``bench ingest``) and its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                inner = subcommands(sub, path)
                found.update(inner or {path: sub})
    return found


def test_the_cli_reference_documents_every_command_and_option() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    headings = set(re.findall(r"^## `privstream ([^`]+)`", text, re.M))
    commands = subcommands(build_parser())
    assert headings == set(commands), "commands without a section, or sections without a command"
    sections = re.split(r"^## ", text, flags=re.M)
    for path, parser in commands.items():
        section = next(s for s in sections if s.startswith(f"`privstream {path}`"))
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or [action.metavar or action.dest.upper()]
            assert any(f"`{name}" in section for name in names), f"privstream {path}: {names[0]} undocumented"


def test_the_configuration_reference_documents_every_setting() -> None:
    text = (DOCS / "guide" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)`", text, re.M))
    for model in (Settings, StreamConfig, ReleaseConfig, WindowConfig):
        missing = set(model.model_fields) - documented - {"config_file"}
        assert not missing, f"{model.__name__}: settings missing from the configuration reference: {missing}"


def test_operations_documents_every_metric_and_alert() -> None:
    text = (DOCS / "guide" / "operations.md").read_text()
    source = (ROOT / "privstream/stream_app/metrics.py").read_text()
    metrics = set(re.findall(r'"(privstream_[a-z_]+)"', source))  # a counter's name gains _total
    assert metrics and not {m for m in metrics if f"`{m}" not in text}, "metrics missing from operations.md"
    alerts = set(re.findall(r"- alert: (\w+)", (ROOT / "deploy/prometheus/alerts.yml").read_text()))
    assert alerts and not {a for a in alerts if f"`{a}`" not in text}, "alerts missing from operations.md"
