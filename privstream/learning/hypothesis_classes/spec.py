"""Parsing of class spec strings: ``thresholds:N``, ``points:N``, ``intervals:N`` or a file path."""

from __future__ import annotations

import re

from privstream.learning.errors import ClassSpecError
from privstream.learning.hypothesis_classes.base import HypothesisClass
from privstream.learning.hypothesis_classes.finite import load_class_file
from privstream.learning.hypothesis_classes.intervals import Intervals
from privstream.learning.hypothesis_classes.points import Points
from privstream.learning.hypothesis_classes.thresholds import Thresholds

STRUCTURED = {"thresholds": Thresholds, "points": Points, "intervals": Intervals}
MAX_DOMAIN_BITS = 1024  # far beyond any real domain; stops "2^10^9" from eating the CPU

_POWER = re.compile(r"^(\d+)\s*(?:\^|\*\*)\s*(\d+)$")


def parse_size(text: str) -> int:
    """Parse a domain size: decimal (``_`` allowed), ``2^32`` or ``2**32``.

    >>> parse_size("2^32"), parse_size("65_536")
    (4294967296, 65536)
    """
    t = text.strip()
    m = _POWER.match(t)
    if m:
        base, exp = int(m.group(1)), int(m.group(2))
        if base >= 2 and exp * base.bit_length() > MAX_DOMAIN_BITS + 1:
            raise ClassSpecError(f"domain size {t} is too large (limit 2^{MAX_DOMAIN_BITS})")
        n = base**exp
    elif re.fullmatch(r"\d[\d_]*", t) and "__" not in t and not t.endswith("_"):
        n = int(t)
    else:
        raise ClassSpecError(f"domain size {text!r} is not a positive integer (e.g. 1024, 2^32 or 2**32)")
    if n < 1:
        raise ClassSpecError(f"domain size must be at least 1, got {n}")
    if n.bit_length() > MAX_DOMAIN_BITS:
        raise ClassSpecError(f"domain size {t} is too large (limit 2^{MAX_DOMAIN_BITS})")
    return n


def parse_class_spec(spec: str) -> HypothesisClass:
    """Build a class from its spec.

    >>> parse_class_spec("thresholds:2^32").size
    4294967297
    >>> parse_class_spec("intervals:4").spec
    'intervals:4'
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ClassSpecError(
            "empty class spec; expected e.g. thresholds:1024, points:10, intervals:24 or a .npy/.csv file"
        )
    s = spec.strip()
    if s.lower().endswith((".npy", ".csv")):
        return load_class_file(s)
    name, sep, size = s.partition(":")
    cls = STRUCTURED.get(name.strip().lower())
    if cls is None or not sep:
        raise ClassSpecError(
            f"unknown class spec {spec!r}; expected thresholds:N, points:N, intervals:N "
            "(N like 1024, 2^32 or 2**32) or a path ending in .npy or .csv"
        )
    return cls(parse_size(size))
