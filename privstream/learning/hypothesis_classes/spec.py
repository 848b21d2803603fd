"""Parsing of class spec strings: ``thresholds:N``, ``points:N``, ``intervals:N`` or a file path.

``N`` is at most :data:`~privstream.learning.domain.MAX_DOMAIN_SIZE` (2^62): the one domain limit of
the service, the command line and the sanitizers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from privstream.learning.domain import MAX_DOMAIN_SIZE
from privstream.learning.errors import ClassSpecError
from privstream.learning.hypothesis_classes.base import HypothesisClass
from privstream.learning.hypothesis_classes.finite import load_class_file
from privstream.learning.hypothesis_classes.intervals import Intervals
from privstream.learning.hypothesis_classes.points import Points
from privstream.learning.hypothesis_classes.thresholds import Thresholds

STRUCTURED: dict[str, Callable[[int], HypothesisClass]] = {
    "thresholds": Thresholds,
    "points": Points,
    "intervals": Intervals,
}

_POWER = re.compile(r"^(\d+)\s*(?:\^|\*\*)\s*(\d+)$")
#: Digits beyond which a number is over the limit without being parsed (Python refuses to convert
#: thousands of digits, and a power is never computed when its size alone is over the limit).
_MAX_DIGITS = len(str(MAX_DOMAIN_SIZE))


def _too_large(text: str) -> ClassSpecError:
    shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
    return ClassSpecError(
        f"domain size {shown} is too large: a class has at most 2^{MAX_DOMAIN_SIZE.bit_length() - 1} "
        f"points ({MAX_DOMAIN_SIZE:,})"
    )


def parse_size(text: str) -> int:
    """Parse a domain size: decimal (``_`` allowed), ``2^32`` or ``2**32``, at most
    :data:`~privstream.learning.domain.MAX_DOMAIN_SIZE`.

    >>> parse_size("2^32"), parse_size("65_536")
    (4294967296, 65536)
    >>> parse_size("2^64")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privstream.learning.errors.ClassSpecError: domain size 2^64 is too large: ... at most 2^62 points ...
    """
    t = text.strip()
    m = _POWER.match(t)
    if m:
        base_digits, exp_digits = m.group(1).lstrip("0") or "0", m.group(2).lstrip("0") or "0"
        if len(base_digits) > _MAX_DIGITS:
            raise _too_large(t)
        base = int(base_digits)
        if base <= 1:  # 0^k and 1^k, whatever the number of digits of k
            n = 1 if base == 1 or exp_digits == "0" else 0
        elif len(exp_digits) > 3 or int(exp_digits) > MAX_DOMAIN_SIZE.bit_length():
            raise _too_large(t)
        else:
            n = base ** int(exp_digits)
    elif re.fullmatch(r"\d[\d_]*", t) and "__" not in t and not t.endswith("_"):
        if len(t.replace("_", "").lstrip("0")) > _MAX_DIGITS:
            raise _too_large(t)
        n = int(t)
    else:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise ClassSpecError(f"domain size {shown!r} is not a positive integer (e.g. 1024, 2^32 or 2**32)")
    if n < 1:
        raise ClassSpecError(f"domain size must be at least 1, got {n}")
    if n > MAX_DOMAIN_SIZE:
        raise _too_large(t)
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
