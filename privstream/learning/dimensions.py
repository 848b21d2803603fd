"""Littlestone, VC and threshold dimensions of a class and of its dual.

Structured classes (``thresholds``, ``points``, ``intervals``) use closed forms, documented
with their proofs on the class (e.g. :class:`~privstream.learning.hypothesis_classes.Thresholds`)
and checked against the exact matrix computation in the tests. Finite classes use the exact
bitset search of :mod:`privstream.learning.hypothesis_classes.bitset_search`.

Convention: ``Ldim(empty class) = -1``.

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> c = parse_class_spec("thresholds:7")
>>> littlestone_dimension(c), vc_dimension(c), threshold_dimension(c)
(3, 1, 7)
>>> dual_littlestone_dimension(c), dual_vc_dimension(c)
(2, 1)
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from privstream.learning.errors import TooExpensiveError
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, StructuredClass
from privstream.learning.hypothesis_classes.bitset_search import MistakeTree

_FIELDS = ("littlestone", "vc", "threshold", "dual_littlestone", "dual_vc")


def littlestone_dimension(cls: HypothesisClass) -> int:
    """Exact Littlestone dimension (the SOA's optimal mistake bound)."""
    if isinstance(cls, FiniteClass):
        return cls.bitsets.ldim(cls.bitsets.full)
    return _structured(cls).littlestone()


def vc_dimension(cls: HypothesisClass, max_work: int = 10**7) -> int:
    """Exact VC dimension; raises :class:`TooExpensiveError` past ``max_work`` cell splits (files)."""
    if isinstance(cls, FiniteClass):
        return cls.bitsets.vc(max_work)
    return _structured(cls).vc()


def threshold_dimension(cls: HypothesisClass, max_nodes: int = 10**5) -> int:
    """Largest k with ``x_1..x_k``, ``h_1..h_k`` in the class, ``h_i(x_j) = 1 iff i <= j``.

    Raises :class:`TooExpensiveError` past ``max_nodes`` search nodes (file classes).
    """
    if isinstance(cls, FiniteClass):
        return cls.bitsets.threshold_dim(max_nodes)
    return _structured(cls).threshold()


def dual_littlestone_dimension(cls: HypothesisClass) -> int:
    """Ldim of the dual class ``{x -> (h -> h(x))}`` (GGKM21 Sec 2.4)."""
    if isinstance(cls, FiniteClass):
        return littlestone_dimension(cls.dual())
    return _structured(cls).dual_littlestone()


def dual_vc_dimension(cls: HypothesisClass, max_work: int = 10**7) -> int:
    """VC dimension of the dual class (GGKM21 Sec 2.3)."""
    if isinstance(cls, FiniteClass):
        return vc_dimension(cls.dual(), max_work)
    return _structured(cls).dual_vc()


def witness_tree(cls: FiniteClass) -> MistakeTree | None:
    """A mistake tree of depth ``Ldim`` shattered by a finite class.

    Nodes are ``{"x": point, "0": subtree, "1": subtree}``; leaves are ``None``.
    """
    return cls.bitsets.witness_tree()


def all_dimensions(cls: HypothesisClass) -> dict[str, Any]:
    """Every dimension of ``cls`` as a JSON-able dict; a value too expensive to compute is
    ``None`` with an entry in ``"reasons"`` (never a guess)."""
    funcs = {
        "littlestone": littlestone_dimension,
        "vc": vc_dimension,
        "threshold": threshold_dimension,
        "dual_littlestone": dual_littlestone_dimension,
        "dual_vc": dual_vc_dimension,
    }
    out: dict[str, Any] = {"class": cls.spec, "size": cls.size, "domain": cls.domain_size}
    reasons: dict[str, str] = {}
    for name in _FIELDS:
        try:
            out[name] = funcs[name](cls)
        except TooExpensiveError as exc:
            out[name] = None
            reasons[name] = exc.reason
    if reasons:
        out["reasons"] = reasons
    return out


def _structured(cls: HypothesisClass) -> StructuredClass:
    if not isinstance(cls, StructuredClass):  # pragma: no cover - every class is one of the two
        raise TypeError(f"no dimension formulas for {type(cls).__name__}")
    return cls


def littlestone_dimension_reference(matrix: np.ndarray) -> int:
    """The plain recursion of the Littlestone dimension (BLM20 Sec 3.2), memoised on frozensets of
    row indices.

    Deliberately naive (no pruning, no bitsets): the oracle for tests and the baseline of
    ``benchmarks/bench_ldim.py``.
    """
    m = np.asarray(matrix, dtype=bool)
    rows = sorted({tuple(r) for r in m.tolist()})
    cols = [frozenset(i for i, r in enumerate(rows) if r[x]) for x in range(m.shape[1])]

    @cache
    def ldim(v: frozenset[int]) -> int:
        if not v:
            return -1
        best = 0
        for c in cols:
            one, zero = v & c, v - c
            if one and zero:
                best = max(best, 1 + min(ldim(one), ldim(zero)))
        return best

    return ldim(frozenset(range(len(rows))))
