"""No module of the package imports another module's private (underscore) name.

A name another module needs is part of its module's interface: it is public there, or it moves
to where both use it. An underscore name stays free to change inside its own module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "privstream"


def private_imports(path: Path) -> list[str]:
    """``module:name`` for each underscore name of a ``privstream`` module that ``path`` imports
    (``from privstream.m import _x``) or reads off an imported module (``m._x``)."""
    tree = ast.parse(path.read_text(), str(path))
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privstream"):
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{node.module}:{alias.name}")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("privstream"):
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{modules[node.value.id]}:{node.attr}")
    return found


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_name():
    found = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in private_imports(path)
    ]
    assert not found, "private names imported across modules: " + "; ".join(found)


def test_the_check_finds_both_forms(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from privstream.agents import validation_schema as schema\n"
        "from privstream.agents.validation import _hidden, read_json\n"
        "import privstream.learning.errors\n"
        "def f():\n"
        "    return schema._show(1), schema.__name__, read_json\n"
    )
    assert private_imports(module) == [
        "privstream.agents.validation:_hidden",
        "privstream.agents.validation_schema:_show",
    ]
