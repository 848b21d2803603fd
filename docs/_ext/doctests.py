"""A griffe extension for the API pages: docstrings written for people reading the code, and for
doctest, rendered as Markdown.

* Each run of ``>>>`` lines and their output, up to a blank line, is fenced as a ``pycon`` block at
  its own indentation (in Markdown a doctest's output such as ``[1, 2]`` would read as a link).
* Sphinx roles (``:class:`~a.B```, ``:meth:`f```) become inline code, as Sphinx shows them.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """Sphinx roles as inline code: ``~`` keeps the last component, as Sphinx does."""
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


def fence_doctests(text: str) -> str:
    """Wrap every doctest block of ``text`` in a fenced ``pycon`` block (tested in ``tests/docs``)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the doctest examples of every documented object."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(fence_doctests(obj.docstring.value))
