"""Production code of the learning and agents layers states its invariants with explicit raises.

``python -O`` removes ``assert`` statements, and several of these invariants protect privacy (a
reservation exists before a release is made, the window a charge covers, the per-user bound): an
invariant must raise whatever the interpreter's flags
(:class:`privstream.learning.errors.InvariantError`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "privstream"


def asserts_in(path: Path) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Assert)
    ]


@pytest.mark.parametrize("layer", ["learning", "agents"])
def test_no_assert_statement_in_production_code(layer):
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for line in asserts_in(path)
    ]
    assert not found, "assert statements (removed by python -O): " + ", ".join(found)


def test_the_check_finds_an_assert(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    if x:\n        assert x > 0, 'positive'\n    return x\n")
    assert asserts_in(module) == [3]
