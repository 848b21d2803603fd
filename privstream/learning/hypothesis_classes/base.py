"""Abstract hypothesis classes and version spaces (the SOA's state).

A :class:`HypothesisClass` is a set of functions ``{0..N-1} -> {0, 1}`` named by a canonical
spec string. Its :class:`VersionSpace` is the set of hypotheses consistent with the examples
seen so far, with the operations the SOA needs: the Littlestone dimension of the current set,
the SOA prediction ``argmax_y Ldim(V restricted to (x, y))``, and the in-place update.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from privstream.learning.domain import check_label, check_point
from privstream.learning.hypotheses import Hypothesis


def floor_log2(k: int) -> int:
    """``floor(log2 k)`` for ``k >= 1`` and ``-1`` for ``k == 0``: the Ldim of a chain of k functions.

    >>> [floor_log2(k) for k in range(6)]
    [-1, 0, 1, 1, 2, 2]
    """
    return k.bit_length() - 1


def soa_choice(ldim_one: int, ldim_zero: int, tie: int) -> int:
    """The SOA rule: the label whose restriction has the larger Ldim, ``tie`` when equal."""
    if ldim_one > ldim_zero:
        return 1
    if ldim_one < ldim_zero:
        return 0
    return tie


class VersionSpace(ABC):
    """A nonempty, mutable subset of a class. ``update`` refuses to make it empty."""

    @abstractmethod
    def size(self) -> int:
        """Number of distinct hypotheses left."""

    @abstractmethod
    def ldim(self) -> int:
        """Littlestone dimension of the current set."""

    @abstractmethod
    def soa_predict(self, x: int, tie: int) -> int:
        """SOA prediction at a validated point ``x``; no state change."""

    @abstractmethod
    def update(self, x: int, y: int) -> bool:
        """Restrict to ``{h : h(x) = y}`` and return True, or return False (unchanged) if that is empty."""

    @abstractmethod
    def soa_predictor(self, tie: int) -> Hypothesis:
        """The SOA's current predictor as a canonical (possibly improper) hypothesis."""

    @abstractmethod
    def copy(self) -> VersionSpace:
        """An independent copy."""

    @abstractmethod
    def to_state(self) -> dict[str, Any]:
        """JSON-able state; the class's ``version_space_from_state`` inverts it."""

    def soa_batch(self, xs: np.ndarray, ys: np.ndarray, tie: int) -> tuple[np.ndarray, int]:
        """Run the SOA over validated arrays until the first example that would empty the set.

        Returns ``(predictions for the first k examples, k)``; the state has absorbed exactly
        those k examples, and ``k < len(xs)`` means example ``k`` is not realizable.
        Subclasses vectorise this; the loop here is the reference behaviour.
        """
        preds = np.empty(xs.shape[0], dtype=np.uint8)
        predict, update = self.soa_predict, self.update
        for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist(), strict=True)):
            preds[i] = predict(x, tie)
            if not update(x, y):
                return preds[:i], i
        return preds, xs.shape[0]


class HypothesisClass(ABC):
    """A hypothesis class on the domain ``{0, ..., domain_size - 1}`` (labels 0/1)."""

    spec: str
    domain_size: int
    size: int

    def check_point(self, x: object) -> None:
        """Raise :class:`~privstream.learning.errors.DomainError` unless x is an int in [0, N)."""
        check_point(x, self.domain_size)

    @abstractmethod
    def version_space(self) -> VersionSpace:
        """The full class as a version space."""

    @abstractmethod
    def version_space_from_state(self, state: dict[str, Any]) -> VersionSpace:
        """Inverse of :meth:`VersionSpace.to_state` (raises StateError on bad input)."""

    @abstractmethod
    def hypothesis(self, index: int) -> Hypothesis:
        """The hypothesis number ``index`` (``0 <= index < size``) in the class's canonical order."""

    def evaluate(self, index: int, x: Any) -> Any:
        """``h_index(x)`` for one point or an array of points."""
        return self.hypothesis(index).predict(x)

    def version_space_of(self, xs: Any, ys: Any) -> VersionSpace | None:
        """The hypotheses consistent with the examples, or None if there are none."""
        vs = self.version_space()
        for x, y in zip(xs, ys, strict=True):
            if not vs.update(check_point(x, self.domain_size), check_label(y)):
                return None
        return vs

    def matrix(self) -> np.ndarray:
        """The ``size x N`` truth table (``bool``), rows in canonical order; small classes only."""
        return np.stack([self.hypothesis(i).truth_table() for i in range(self.size)])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"
