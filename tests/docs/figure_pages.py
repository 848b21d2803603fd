"""The site's figure hook (``docs/_ext/figures.py``), its data extractor, and where the pages ask
for figures: shared by the figure tests and the built-site test."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .examples import DOCS, ROOT


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


figures = load(DOCS / "_ext" / "figures.py", "docs_figures")
figure_data = load(ROOT / "benchmarks" / "figure_data.py", "figure_data")


@functools.cache
def drawn(name: str) -> str:
    """The figure's HTML, drawn once per test process (matplotlib takes seconds a figure)."""
    return figures.figure(name)


def placeholders() -> dict[str, list[str]]:
    """figure name -> the pages that ask for it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for name in figures.PLACEHOLDER.findall(page.read_text()):
            found.setdefault(name, []).append(str(page.relative_to(DOCS)))
    return found
