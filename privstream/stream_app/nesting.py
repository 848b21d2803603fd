"""A depth limit for settings text (TOML files, JSON files and ``PRIVSTREAM_*`` JSON values).

Python's TOML and JSON readers recurse once per nested array or table, so a file of 200,000
``[`` ends in a ``RecursionError`` thousands of lines long. Settings nest a handful of levels (a
stream's release window is four deep), so the text is measured before it is parsed and refused
past :data:`MAX_SETTINGS_DEPTH`, in one line; the parsed value is measured again without recursion,
since TOML's dotted keys (``a.b.c = 1``) and table headers nest tables without a bracket.

>>> check_text_depth('{"streams": [{"release": {"window": {"size": 5}}}]}', "json", "PRIVSTREAM_X")
>>> check_text_depth("x = " + "[" * 100 + "]" * 100, "toml", "config file a.toml")
Traceback (most recent call last):
...
privstream.stream_app.nesting.NestingError: config file a.toml is nested more than 64 deep (line 1)
"""

from __future__ import annotations

import re
from typing import Any, Literal

__all__ = ["MAX_SETTINGS_DEPTH", "NestingError", "check_text_depth", "check_value_depth"]

#: How deep settings may nest: far above what any setting needs, far below Python's recursion limit.
MAX_SETTINGS_DEPTH = 64

# What is not structure: strings (whose brackets are text) and TOML comments. Multi-line strings
# come first so that ``"""`` is not read as an empty string and a quote. A string left open runs
# to the end (of the line, where TOML ends it) instead of failing to match: each pattern matches
# wherever it starts, so the scan is linear whatever the text.
_JSON_SKIP = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_TOML_SKIP = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*(?:""")?'
    r"|'''(?:[^']|'(?!''))*(?:''')?"
    r'|"(?:[^"\\\n]|\\.)*"?'
    r"|'[^'\n]*'?"
    r"|#[^\n]*",
    re.DOTALL,
)
_SKIP = {"json": _JSON_SKIP, "toml": _TOML_SKIP}
_TOKENS = {kind: re.compile(f"{skip.pattern}|[\\[{{]|[\\]}}]", re.DOTALL) for kind, skip in _SKIP.items()}


class NestingError(ValueError):
    """Settings text or data nested deeper than :data:`MAX_SETTINGS_DEPTH` (a user error)."""


def check_text_depth(
    text: str, kind: Literal["json", "toml"], where: str, limit: int = MAX_SETTINGS_DEPTH
) -> None:
    """Raise :class:`NestingError` naming ``where`` and the line if brackets in ``text`` (outside
    strings and comments) nest deeper than ``limit``.

    >>> check_text_depth('x = "[[[[[["  # [[[[', "toml", "f", limit=1)
    >>> check_text_depth("[[1], [2]]", "json", "f", limit=1)
    Traceback (most recent call last):
    ...
    privstream.stream_app.nesting.NestingError: f is nested more than 1 deep (line 1)
    """
    depth = 0
    for match in _TOKENS[kind].finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, match.start()) + 1
                raise NestingError(f"{where} is nested more than {limit} deep (line {line})")
        elif token in ("]", "}"):
            depth = max(0, depth - 1)


def check_value_depth(value: Any, where: str, limit: int = MAX_SETTINGS_DEPTH) -> None:
    """Raise :class:`NestingError` if lists and dicts in ``value`` nest deeper than ``limit``
    (measured with a stack, not recursion).

    >>> deep: dict = {}
    >>> inner = deep
    >>> for _ in range(10):
    ...     inner["a"] = inner = {}
    >>> check_value_depth(deep, "f", limit=11)
    >>> check_value_depth(deep, "f", limit=10)
    Traceback (most recent call last):
    ...
    privstream.stream_app.nesting.NestingError: f is nested more than 10 deep
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            raise NestingError(f"{where} is nested more than {limit} deep")
        stack.extend((child, depth + 1) for child in children)
