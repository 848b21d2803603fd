"""Messages for a name the user got wrong: every name that would do, and the closest one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["unknown_name"]


def unknown_name(what: str, name: str, known: Iterable[str]) -> str:
    """The message for an unknown name: every known one, and the closest if one is close.

    >>> unknown_name("learner", "gneric", ["generic", "proper"])
    "unknown learner 'gneric' (did you mean 'generic'?); known: generic, proper"
    """
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {what} {name!r}{hint}; known: {', '.join(names)}"
