"""The layering of DESIGN.md §2 holds, and the tree is ruff-clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "privstream"

#: Which project layers each layer may import (besides itself).
ALLOWED = {
    "learning": set(),
    "schemas": set(),
    "agents": {"learning", "schemas"},
    "stream_app": {"agents", "learning", "schemas"},
}


def project_imports(path: Path) -> set[str]:
    """The project layers a module imports (``privstream.<layer>...``)."""
    layers = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "privstream" and len(parts) > 1:
                layers.add(parts[1])
    return layers


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_design_allows(layer):
    violations = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for imported in project_imports(path) - {layer} - ALLOWED[layer]:
            if imported in ALLOWED:
                violations.append(f"{path.relative_to(ROOT)} imports privstream.{imported}")
    assert not violations, "\n".join(violations)


def test_every_layer_is_known():
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(ALLOWED)


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the test extra; install with pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", "--quiet", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
