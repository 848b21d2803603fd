"""Nothing in the product points outside the repository: no design notes, specs or issue numbers.

A user of the package has the code, its docstrings, the README and the documentation site, and
nothing else: every explanation is written there, in the module's own words, with the papers cited.
"""

from __future__ import annotations

import re
from pathlib import Path

from .examples import ROOT

OUTSIDE = re.compile(
    r"DESIGN\.md|E-DESIGN|DESIGN §|\.\./shared|\bspecs/|\bseeds/|\[00\d[ \]]"
    r"|\b(?:blm_almm|ggkm|bayes_overview|streaming_notes|hierarchical_sanitizer|dp_landscape)(?:\.md| ?§)"
    r"|\b(?:[Ii]ssues?|[Ff]indings?) \d|\bspecs? §|§[A-Z]\.\d"
)
#: The tests too: they explain themselves in their own words, like the code they check.
PRODUCT = ("README.md", "docs", "privstream", "deploy", "benchmarks", "scripts", "tests")
SUFFIXES = {".py", ".md", ".json", ".yml", ".yaml", ".toml", ".js", ".html", ".css", ".sh", ".txt", ""}

#: Files being rewritten by their owners that still point outside; the test asserts they still do,
#: so an entry goes the day its file is clean.
PENDING: set[str] = set()


def product_files() -> list[Path]:
    files: list[Path] = []
    for top in PRODUCT:
        path = ROOT / top
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [
            p
            for p in candidates
            if p.is_file()
            and p.suffix in SUFFIXES
            and "__pycache__" not in p.parts
            and "results" not in p.parts
            and p != Path(__file__).resolve()  # the patterns themselves
        ]
    return files


def test_no_product_file_points_outside_the_repository() -> None:
    offending = {}
    for path in product_files():
        name = str(path.relative_to(ROOT))
        hits = [
            f"{number}: {match.group(0)}"
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            for match in [OUTSIDE.search(line)]
            if match
        ]
        if hits and name not in PENDING:
            offending[name] = hits
        if name in PENDING:
            assert hits, f"{name} is clean now: remove it from PENDING"
    assert not offending, offending
