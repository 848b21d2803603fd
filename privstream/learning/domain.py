"""Validation of domain points ``x in {0, ..., N-1}`` and labels ``y in {0, 1}``.

A class named by a spec string, and so every stream, every command and every sanitizer, has a
domain of at most :data:`MAX_DOMAIN_SIZE` points. The class objects and the learners compute
exactly on any ``N`` (points are Python ints; arrays of points are ``int64`` when every point fits
and ``object`` otherwise), which the library's own tests use.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

import numpy as np

from privstream.learning.errors import DomainError, LabelError

INT64_MAX = 2**63 - 1

#: The largest domain size ``N`` of a class named by a spec (``thresholds:2^62``): the one limit of
#: the service, the command line and the sanitizers. Every point and every block edge ``0..N`` of a
#: released distribution is then an ``int64`` with room to spare (the window stores, the sanitizers'
#: block edges and their prefix sums are ``int64``).
MAX_DOMAIN_SIZE = 2**62


def check_point(x: object, n: int) -> int:
    """Return ``x`` as a Python int, or raise :class:`DomainError` unless ``0 <= x < n``.

    >>> check_point(3, 10)
    3
    """
    if type(x) is not int:
        if isinstance(x, bool | float | np.floating | np.bool_) or not isinstance(x, SupportsIndex):
            raise DomainError(f"domain point {x!r} is not an integer")
        try:
            x = operator.index(x)  # numpy integers and other int-likes
        except TypeError:
            raise DomainError(f"domain point {x!r} is not an integer") from None
    if not 0 <= x < n:
        # A point of hundreds of digits is named by its size: the message stays short (it ends up in
        # a dead-letter header) and cheap (printing an int is quadratic in its digits).
        shown = x if x.bit_length() <= 256 else f"of {x.bit_length()} bits"
        raise DomainError(f"domain point {shown} is outside the domain [0, {n})")
    return x


def json_int(value: object) -> int | None:
    """An integer read from JSON: an int, or its decimal string (how public messages write integers
    beyond 2^53, see ``privstream.schemas.numbers``); None for anything else.

    >>> json_int(5), json_int("9223372036854775808"), json_int("5.0"), json_int(True)
    (5, 9223372036854775808, None, None)
    """
    if type(value) is int:
        return value
    if type(value) is str and value.lstrip("-").isdigit() and value.isascii():
        return int(value)
    return None


def check_label(y: object) -> int:
    """Return ``y`` as 0 or 1, or raise :class:`LabelError`."""
    if y == 0 or y == 1:
        if isinstance(y, float | np.floating | str):
            raise LabelError(f"label {y!r} is not 0 or 1")
        return int(y)
    raise LabelError(f"label {y!r} is not 0 or 1")


def as_points(xs: object, n: int) -> np.ndarray:
    """Validate an array of domain points; returns ``int64`` if ``n - 1`` fits, else ``object``."""
    arr = np.asarray(xs)
    if arr.ndim != 1:
        raise DomainError(f"expected a 1-D array of domain points, got shape {arr.shape}")
    if arr.dtype == object:
        out = np.empty(arr.shape[0], dtype=object)
        for i, x in enumerate(arr):
            out[i] = check_point(x, n)
        if n - 1 <= INT64_MAX:
            return out.astype(np.int64)
        return out
    if arr.dtype.kind not in "iu":
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        raise DomainError(f"domain points must be integers, got an array of dtype {arr.dtype}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise DomainError(f"domain point {bad} is outside the domain [0, {n})")
        if hi > INT64_MAX:  # uint64 beyond int64: keep exact Python ints
            return arr.astype(object)
    return arr.astype(np.int64, copy=False)


def as_labels(ys: object, length: int | None = None) -> np.ndarray:
    """Validate an array of 0/1 labels; returns ``uint8``."""
    arr = np.asarray(ys)
    if arr.ndim != 1:
        raise LabelError(f"expected a 1-D array of labels, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise LabelError(f"{arr.shape[0]} labels for {length} points")
    if arr.dtype == bool:
        return arr.astype(np.uint8, copy=False)
    if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > 1):
        bad = next((y for y in arr.tolist() if y not in (0, 1) or isinstance(y, float)), arr[0])
        raise LabelError(f"label {bad!r} is not 0 or 1")
    return arr.astype(np.uint8, copy=False)
