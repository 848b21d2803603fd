"""Finite classes given as a truth table (rows = hypotheses, columns = domain points).

Rows are deduplicated (a class is a set of functions) and sorted, so the same set of
functions always gives the same class whatever the row order or repetitions in the file.
Storage is packed bits; the SOA and the dimensions work on column bitmasks
(:class:`~privstream.learning.hypothesis_classes.bitset_search.BitsetClass`).
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.errors import ClassFileError, StateError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_table
from privstream.learning.hypothesis_classes.base import HypothesisClass, VersionSpace, soa_choice
from privstream.learning.hypothesis_classes.bitset_search import BitsetClass, columns_from_matrix


class FiniteVersionSpace(VersionSpace):
    """A nonempty set of rows of a :class:`FiniteClass`, as a bitmask."""

    __slots__ = ("mask", "owner")

    def __init__(self, owner: FiniteClass, mask: int) -> None:
        self.owner, self.mask = owner, mask

    def size(self) -> int:
        return self.mask.bit_count()

    def ldim(self) -> int:
        return self.owner.bitsets.ldim(self.mask)

    def soa_predict(self, x: int, tie: int) -> int:
        bs = self.owner.bitsets
        l1, l0 = bs.compare_sides(self.mask, bs.columns[x])
        return soa_choice(l1, l0, tie)

    def update(self, x: int, y: int) -> bool:
        col = self.owner.bitsets.columns[x]
        new = self.mask & col if y else self.mask & ~col
        if not new:
            return False
        self.mask = new
        return True

    def soa_predictor(self, tie: int) -> Hypothesis:
        return self.owner.soa_predictor_of(self.mask, tie)

    def copy(self) -> FiniteVersionSpace:
        return FiniteVersionSpace(self.owner, self.mask)

    def to_state(self) -> dict[str, Any]:
        return {"rows": format(self.mask, "x")}


class FiniteClass(HypothesisClass):
    """A finite class from a 0/1 matrix. ``spec`` is the file path (or a given name).

    >>> c = FiniteClass(np.array([[0, 0], [1, 0], [1, 1], [1, 0]]), spec="example")
    >>> c.size, c.domain_size
    (3, 2)
    """

    def __init__(self, matrix: np.ndarray, spec: str) -> None:
        m = np.asarray(matrix)
        if m.ndim != 2:
            raise ClassFileError(f"{spec}: a class matrix must be 2-D, got shape {m.shape}")
        if m.shape[0] == 0 or m.shape[1] == 0:
            raise ClassFileError(f"{spec}: empty class (shape {m.shape}); need at least one row and column")
        if m.dtype != bool:
            if m.dtype.kind not in "iu":
                raise ClassFileError(f"{spec}: entries must be bool or 0/1 integers, got dtype {m.dtype}")
            bad = np.argwhere((m != 0) & (m != 1))
            if bad.size:
                r, c = bad[0]
                raise ClassFileError(f"{spec}: entry at row {r}, column {c} is {m[r, c]}, not 0 or 1")
        packed = np.packbits(m.astype(bool), axis=1)
        # Dedupe and sort rows by their packed bytes: equal sets of functions -> equal classes.
        self.packed = np.unique(packed, axis=0)
        self.packed.flags.writeable = False
        self.spec = spec
        self.domain_size = int(m.shape[1])
        self.size = int(self.packed.shape[0])
        self._predictors: dict[tuple[int, int], Hypothesis] = {}

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical packed matrix; identifies the set of functions."""
        h = hashlib.sha256(f"{self.size}x{self.domain_size}:".encode())
        h.update(self.packed.tobytes())
        return h.hexdigest()

    def matrix(self) -> np.ndarray:
        return np.unpackbits(self.packed, axis=1, count=self.domain_size).astype(bool)

    @cached_property
    def bitsets(self) -> BitsetClass:
        return BitsetClass(columns_from_matrix(self.matrix()), self.size)

    def version_space(self) -> FiniteVersionSpace:
        return FiniteVersionSpace(self, self.bitsets.full)

    def version_space_from_state(self, state: dict[str, Any]) -> FiniteVersionSpace:
        try:
            mask = int(state["rows"], 16)
        except (KeyError, TypeError, ValueError):
            raise StateError(f"bad version space {state!r} for {self.spec}") from None
        if mask == 0 or mask > self.bitsets.full:
            raise StateError(f"version space {state['rows']!r} is not a nonempty subset of {self.spec}")
        return FiniteVersionSpace(self, mask)

    def hypothesis(self, index: int) -> Hypothesis:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return hypothesis_from_table(np.unpackbits(self.packed[index], count=self.domain_size))

    def soa_predictor_of(self, mask: int, tie: int) -> Hypothesis:
        """The SOA predictor of the version space ``mask`` (cached: G-style callers repeat it)."""
        key = (mask, tie)
        h = self._predictors.get(key)
        if h is None:
            bs = self.bitsets
            table = np.empty(self.domain_size, dtype=bool)
            for x, col in enumerate(bs.columns):
                table[x] = soa_choice(*bs.compare_sides(mask, col), tie)
            h = hypothesis_from_table(table)
            if len(self._predictors) > 4096:
                self._predictors.clear()
            self._predictors[key] = h
        return h

    def dual(self) -> FiniteClass:
        """The dual class: distinct columns as rows (GGKM21 Sec 2.3)."""
        return FiniteClass(self.matrix().T, spec=f"dual({self.spec})")


def load_class_file(path: str | Path) -> FiniteClass:
    """Load a class from ``.npy`` (2-D bool / 0-1 integer array) or ``.csv`` (rows of 0/1, no header)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            m = np.load(p, allow_pickle=False)
        except ValueError as exc:
            raise ClassFileError(f"{p}: not a plain .npy array ({exc})") from None
    elif suffix == ".csv":
        m = _read_csv_matrix(p)
    else:
        raise ClassFileError(f"{p}: class files must end in .npy or .csv")
    return FiniteClass(m, spec=str(path))


def _read_csv_matrix(p: Path) -> np.ndarray:
    rows: list[list[bool]] = []
    width = None
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.strip()
            if not line:
                continue
            cells = [c.strip() for c in line.split(",")]
            if width is None:
                width = len(cells)
            elif len(cells) != width:
                raise ClassFileError(
                    f"{p}: line {lineno} has {len(cells)} values, expected {width} (ragged rows)"
                )
            row = []
            for col, c in enumerate(cells, start=1):
                if c not in ("0", "1"):
                    raise ClassFileError(f"{p}: line {lineno}, column {col}: {c!r} is not 0 or 1")
                row.append(c == "1")
            rows.append(row)
    if not rows:
        raise ClassFileError(f"{p}: empty class file (no rows)")
    return np.array(rows, dtype=bool)
