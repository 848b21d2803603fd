"""The layers hold, no import cycle is in the package, and the tree is ruff-clean and formatted."""

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
    "testing": {"agents", "learning", "schemas", "stream_app"},  # the contract suite, shipped
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


def module_name(path: Path) -> str:
    """``privstream/learning/audit/__init__.py`` -> ``privstream.learning.audit``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, at module level or inside functions alike.

    ``from a.b import c`` is an edge to module ``a.b.c`` if that is a module, else to ``a.b`` (a
    package's ``__init__`` included: a package that imports a module importing it back is a cycle
    too). Relative imports are resolved against the importing module's package.
    """
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets.update(f"{base}.{alias.name}" for alias in node.names)
                targets.add(base)
        resolved = {resolve(t) for t in targets if t.split(".")[0] == PACKAGE.name}
        graph[module] = {r for r in resolved if r is not None and r != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_import_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_is_in_an_import_cycle():
    graph = import_graph()
    assert "privstream.learning.audit.harness" in graph["privstream.learning.audit"]  # the graph is real
    cycles = import_cycles(graph)
    assert not cycles, "\n".join("import cycle: " + " <-> ".join(c) for c in cycles)


#: File names that say a module's role in its package rather than its concept: any package may have one.
ROLE_NAMES = {"__init__", "base", "learner", "audit_specs"}


def test_no_two_modules_of_learning_share_a_name():
    """One concept, one module: two ``global_stability.py`` (Algorithm G and the learner) were two."""
    seen: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / "learning").rglob("*.py")):
        if path.stem not in ROLE_NAMES:
            seen.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_every_layer_is_known():
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(ALLOWED)


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the test extra; install with pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", "--quiet", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the test extra; install with pip install -e '.[test]'"
    result = subprocess.run([ruff, "format", "--check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr
