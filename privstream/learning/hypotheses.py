"""Released / serialisable functions on a domain ``{0, ..., N-1}`` with canonical JSON forms.

Two representations, chosen by a fixed rule that depends only on the function, so equal
functions always serialise to equal dicts:

* ``runs``: the value at 0 and the sorted *change points* ``c`` (where ``h(c) != h(c-1)``).
  Compact for predictors on ordered domains (thresholds, intervals, points, patched versions).
* ``bits``: the truth table as little-endian packed bits, base64-encoded.

Rule: ``runs`` iff ``64 * (number of change points) <= N`` (runs of 64 points on average or
longer), else ``bits``. Build hypotheses with :func:`hypothesis_from_runs` or
:func:`hypothesis_from_table`, never with the constructors, so the rule is applied.

>>> h = hypothesis_from_runs(2**40, 0, [5])   # the threshold 1[x >= 5]
>>> h.predict(4), h.predict(5)
(0, 1)
>>> h.to_dict()
{'kind': 'runs', 'domain': 1099511627776, 'first': 0, 'changes': [5]}
>>> hypothesis_from_dict(h.to_dict()) == h
True
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np

from privstream.learning.domain import INT64_MAX, as_points, check_point, json_int
from privstream.learning.errors import HypothesisFormatError


def _runs_is_canonical(domain_size: int, num_changes: int) -> bool:
    return 64 * num_changes <= domain_size


class Hypothesis(ABC):
    """A function ``{0..N-1} -> {0, 1}``; equality and hashing are by function value."""

    domain_size: int

    @overload
    def predict(self, x: np.ndarray) -> np.ndarray: ...
    @overload
    def predict(self, x: int | np.integer) -> int: ...
    @abstractmethod
    def predict(self, x: np.ndarray | int | np.integer) -> np.ndarray | int:
        """Label of one point (int) or of an array of points (``uint8`` array)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON-able form with a ``kind`` key; equal functions give equal dicts."""

    @abstractmethod
    def key(self) -> tuple[Any, ...]:
        """Canonical hashable key (same information as :meth:`to_dict`)."""

    @abstractmethod
    def change_points(self) -> tuple[int, list[int]]:
        """``(value at 0, sorted change points)``: the run-length form of the function."""

    def truth_table(self) -> np.ndarray:
        """All ``N`` labels as a ``bool`` array (only for domains that fit in memory)."""
        labels: np.ndarray = self.predict(np.arange(self.domain_size, dtype=np.int64)).astype(bool)
        return labels

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hypothesis) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"


class RunsHypothesis(Hypothesis):
    """Run-length (change-point) form. Use :func:`hypothesis_from_runs` to build one."""

    __slots__ = ("_arr", "changes", "domain_size", "first")

    def __init__(self, domain_size: int, first: int, changes: tuple[int, ...]) -> None:
        self.domain_size = domain_size
        self.first = first
        self.changes = changes
        big = domain_size - 1 > INT64_MAX
        self._arr = np.array(changes, dtype=object if big else np.int64)

    @overload
    def predict(self, x: np.ndarray) -> np.ndarray: ...
    @overload
    def predict(self, x: int | np.integer) -> int: ...
    def predict(self, x: np.ndarray | int | np.integer) -> np.ndarray | int:
        if isinstance(x, np.ndarray):
            xs = as_points(x, self.domain_size)
            if not self.changes:
                return np.full(xs.shape[0], self.first, dtype=np.uint8)
            k = np.searchsorted(self._arr, xs, side="right")
            return ((np.asarray(k, dtype=np.int64) & 1) ^ self.first).astype(np.uint8)
        x = check_point(x, self.domain_size)
        return (bisect_right(self.changes, x) & 1) ^ self.first

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "runs",
            "domain": self.domain_size,
            "first": self.first,
            "changes": list(self.changes),
        }

    def key(self) -> tuple[Any, ...]:
        return ("runs", self.domain_size, self.first, self.changes)

    def change_points(self) -> tuple[int, list[int]]:
        return self.first, list(self.changes)


class BitsHypothesis(Hypothesis):
    """Packed truth table. Use :func:`hypothesis_from_table` to build one."""

    __slots__ = ("_packed", "domain_size", "table")

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.ascontiguousarray(table, dtype=bool)
        self.table.flags.writeable = False
        self.domain_size = int(self.table.shape[0])
        self._packed = np.packbits(self.table, bitorder="little").tobytes()

    @overload
    def predict(self, x: np.ndarray) -> np.ndarray: ...
    @overload
    def predict(self, x: int | np.integer) -> int: ...
    def predict(self, x: np.ndarray | int | np.integer) -> np.ndarray | int:
        if isinstance(x, np.ndarray):
            labels: np.ndarray = self.table[as_points(x, self.domain_size)].astype(np.uint8)
            return labels
        return int(self.table[check_point(x, self.domain_size)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "bits",
            "domain": self.domain_size,
            "bits": base64.b64encode(self._packed).decode("ascii"),
        }

    def key(self) -> tuple[Any, ...]:
        return ("bits", self.domain_size, self._packed)

    def change_points(self) -> tuple[int, list[int]]:
        t = self.table
        return int(t[0]), (np.flatnonzero(t[1:] != t[:-1]) + 1).tolist()

    def truth_table(self) -> np.ndarray:
        return self.table


def hypothesis_from_runs(domain_size: int, first: int, changes: Iterable[int]) -> Hypothesis:
    """Canonical hypothesis from its value at 0 and its strictly increasing change points."""
    ch = tuple(int(c) for c in changes)
    if first not in (0, 1):
        raise HypothesisFormatError(f"value at 0 must be 0 or 1, got {first!r}")
    prev = 0
    for c in ch:
        if not prev < c < domain_size:
            raise HypothesisFormatError(
                f"change points must be strictly increasing in (0, {domain_size}), got {list(ch)[:10]}"
            )
        prev = c
    if _runs_is_canonical(domain_size, len(ch)):
        return RunsHypothesis(domain_size, first, ch)
    table = np.zeros(domain_size, dtype=np.int8)
    if ch:
        np.add.at(table, np.array(ch, dtype=np.int64), 1)
    return BitsHypothesis((np.cumsum(table) + first) % 2 == 1)


def hypothesis_from_table(table: Sequence[int] | np.ndarray) -> Hypothesis:
    """Canonical hypothesis from a full truth table (a 1-D bool or 0/1 array)."""
    t = np.asarray(table)
    if t.ndim != 1 or t.shape[0] == 0:
        raise HypothesisFormatError("a truth table must be a non-empty 1-D array")
    if t.dtype != bool:
        if not np.isin(t, (0, 1)).all():
            raise HypothesisFormatError("a truth table must hold only 0/1")
        t = t.astype(bool)
    changes = np.flatnonzero(t[1:] != t[:-1]) + 1
    if _runs_is_canonical(t.shape[0], changes.shape[0]):
        return RunsHypothesis(t.shape[0], int(t[0]), tuple(changes.tolist()))
    return BitsHypothesis(t)


def hypothesis_from_dict(d: Mapping[str, Any]) -> Hypothesis:
    """Inverse of :meth:`Hypothesis.to_dict`; rejects malformed or non-canonical input."""
    try:
        kind, n = d["kind"], json_int(d["domain"])  # integers beyond 2^53 arrive as decimal strings
        if n is None or n < 1:
            raise HypothesisFormatError(f"domain must be a positive integer, got {d['domain']!r}")
        if kind == "runs":
            raw = d["changes"]
            read = [json_int(c) for c in raw] if isinstance(raw, list) else [None]
            changes = [c for c in read if c is not None]
            if len(changes) < len(read):
                raise HypothesisFormatError("changes must be a list of integers")
            if not _runs_is_canonical(n, len(changes)):
                raise HypothesisFormatError("too many change points for the runs form (use bits)")
            return hypothesis_from_runs(n, d["first"], changes)
        if kind == "bits":
            raw = base64.b64decode(d["bits"], validate=True)
            bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
            if bits.shape[0] != -(-n // 8) * 8 or bits[n:].any():
                raise HypothesisFormatError(f"bits do not encode a table of length {n}")
            h = hypothesis_from_table(bits[:n].astype(bool))
            if not isinstance(h, BitsHypothesis):
                raise HypothesisFormatError("few enough change points for the runs form (use runs)")
            return h
    except (KeyError, TypeError, binascii.Error) as exc:
        raise HypothesisFormatError(f"malformed hypothesis dict: {exc}") from None
    raise HypothesisFormatError(f"unknown hypothesis kind {d.get('kind')!r}")


def patched(h: Hypothesis, patches: Mapping[int, int]) -> Hypothesis:
    """``h`` with ``h(x) := patches[x]`` at the patched points (the extended SOA's update)."""
    if not patches:
        return h
    if isinstance(h, BitsHypothesis):
        t = h.table.copy()
        t[np.fromiter(patches.keys(), dtype=np.int64, count=len(patches))] = np.fromiter(
            patches.values(), dtype=bool, count=len(patches)
        )
        return hypothesis_from_table(t)
    _, changes = h.change_points()
    n = h.domain_size

    def value(x: int) -> int:
        v = patches.get(x)
        return v if v is not None else h.predict(x)

    # A change of the patched function can only be at an old change point or next to a patch.
    candidates = set(changes)
    for p in patches:
        candidates.add(p)
        candidates.add(p + 1)
    new_changes = [c for c in sorted(candidates) if 0 < c < n and value(c) != value(c - 1)]
    return hypothesis_from_runs(n, value(0), new_changes)
