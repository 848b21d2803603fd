"""Production code states its invariants with explicit raises, in every layer of the package.

``python -O`` removes ``assert`` statements, and several of these invariants protect privacy (a
reservation exists before a release is made, the window a charge covers, the per-user bound): an
invariant must raise whatever the interpreter's flags
(:class:`privstream.learning.errors.InvariantError`). The shipped contract suite
(``privstream.testing``) raises ``AssertionError`` itself, so a third party's check cannot pass
under ``-O`` by its checks vanishing.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "privstream"


def asserts_in(path: Path) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Assert)
    ]


def test_no_assert_statement_in_production_code():
    checked = {path.relative_to(PACKAGE).parts[0] for path in PACKAGE.rglob("*.py")}
    assert {"agents", "learning", "schemas", "stream_app", "testing", "__main__.py"} <= checked
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in asserts_in(path)
    ]
    assert not found, "assert statements (removed by python -O): " + ", ".join(found)


def test_the_check_finds_an_assert(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    if x:\n        assert x > 0, 'positive'\n    return x\n")
    assert asserts_in(module) == [3]
