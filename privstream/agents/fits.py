"""One learner call on one node, as shipped to the stream's learner process.

Everything whose run time depends on the data happens inside the call, in the learner process,
never on the worker's event loop (where it would delay every stream's publications): putting a
histogram node's rows in a random order, keeping the first ``cap`` of them (the public input cap
that bounds the learner's run time), and the fit itself.

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.private_learners import make_learner
>>> from privstream.learning.randomness import seeded
>>> xs, ys = prepared_input(np.arange(16), np.ones(16, np.uint8), order=seeded(1), cap=10)
>>> len(xs), len(set(xs.tolist()))  # a uniformly random subset of 10 of the 16 rows: the cap
(10, 10)
>>> call = LearnerCall(make_learner("generic"), "hypotheses", parse_class_spec("thresholds:16"),
...                    options={"epsilon": 1.0, "delta": 0.0, "rng": seeded(0)})
>>> NodeFit(call, np.arange(16), (np.arange(16) >= 8).astype(np.uint8), order=seeded(1), cap=10)().mechanism
'generic-exponential'
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from privstream.learning.randomness import RandomSource

__all__ = ["LearnerCall", "NodeFit", "SlotParts", "prepared_input", "slot_parts", "slot_seconds"]


@dataclass(frozen=True)
class LearnerCall:
    """An algorithm's ``fit`` with every argument but the examples: a learner of a class
    (``fit(hclass, xs, ys, ...)``), a vector learner (``fit(xs, ys, ...)``) or a sanitizer
    (``fit(hclass, xs, ys or None, ...)``)."""

    algorithm: Any
    kind: Literal["hypotheses", "sanitized", "vectors"]
    hypothesis_class: Any = None
    labelled: bool = False  # sanitizers: answer Pr[h(x) = y] (the labels go in)
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, xs: np.ndarray, ys: np.ndarray) -> Any:
        if self.kind == "vectors":
            return self.algorithm.fit(xs, ys, **self.options)
        if self.kind == "hypotheses":
            return self.algorithm.fit(self.hypothesis_class, xs, ys, **self.options)
        return self.algorithm.fit(self.hypothesis_class, xs, ys if self.labelled else None, **self.options)


def prepared_input(
    xs: np.ndarray, ys: np.ndarray, order: RandomSource | None, cap: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The rows the learner reads: in a uniformly random order drawn from ``order`` (exact
    Fisher-Yates; ``None``: as given, the arrival order), then the first ``cap`` of them.

    A random order makes the kept rows a uniformly random subset of the node, of the public size
    ``min(n, cap)``; without one (rows in arrival order) they are the first ``cap`` to arrive.

    >>> from privstream.learning.randomness import seeded
    >>> xs, ys = prepared_input(np.arange(6), np.zeros(6, np.uint8), None, 4)
    >>> xs.tolist()
    [0, 1, 2, 3]
    >>> sorted(prepared_input(np.arange(6), np.zeros(6, np.uint8), seeded(3), None)[0].tolist())
    [0, 1, 2, 3, 4, 5]
    """
    if order is not None and len(xs) > 1:
        permutation = np.array(order.permutation(len(xs)), dtype=np.int64)
        xs, ys = xs[permutation], ys[permutation]
    if cap is not None and len(xs) > cap:
        xs, ys = xs[:cap], ys[:cap]
    return xs, ys


@dataclass(frozen=True)
class NodeFit:
    """``call`` on a node's examples, prepared (:func:`prepared_input`) in the learner process."""

    call: LearnerCall
    xs: np.ndarray
    ys: np.ndarray
    order: RandomSource | None = None
    cap: int | None = None

    def __call__(self) -> Any:
        return self.call(*prepared_input(self.xs, self.ys, self.order, self.cap))


class SlotParts(NamedTuple):
    """What a node's slot spends in the learner process, in seconds: the defaults, the fits'
    preparation of their input (random order and cap) and the fits themselves."""

    default: float
    prepare: float
    fit: float


def slot_parts(workload: Sequence[tuple[NodeFit, Sequence[NodeFit]]]) -> SlotParts:
    """How long one node's slot needs at worst in the learner process, part by part: for each
    product in turn, its default and its slowest fit (preparation and fit together; a fit that
    raises counts the time it took), summed over the products. Measured in the stream's learner
    process at start-up, on public inputs only.

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> from privstream.learning.private_learners import make_learner
    >>> call = LearnerCall(make_learner("generic"), "hypotheses", parse_class_spec("thresholds:16"),
    ...                    options={"epsilon": 1.0, "delta": 0.0})
    >>> fit = NodeFit(call, np.arange(16), np.zeros(16, np.uint8))
    >>> parts = slot_parts([(fit, [fit, fit])])
    >>> 0 < sum(parts) < 60 and all(part >= 0 for part in parts)
    True
    """
    default = prepare = fit = 0.0
    for first, fits in workload:
        default += _seconds(first)
        slowest = max((_prepared_and_fitted(one) for one in fits), key=sum, default=(0.0, 0.0))
        prepare, fit = prepare + slowest[0], fit + slowest[1]
    return SlotParts(default, prepare, fit)


def slot_seconds(workload: Sequence[tuple[NodeFit, Sequence[NodeFit]]]) -> float:
    """How long one node's slot needs at worst in the learner process: the sum of
    :func:`slot_parts`.

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> from privstream.learning.private_learners import make_learner
    >>> call = LearnerCall(make_learner("generic"), "hypotheses", parse_class_spec("thresholds:16"),
    ...                    options={"epsilon": 1.0, "delta": 0.0})
    >>> fit = NodeFit(call, np.arange(16), np.zeros(16, np.uint8))
    >>> 0 < slot_seconds([(fit, [fit, fit])]) < 60
    True
    """
    return sum(slot_parts(workload))


def _prepared_and_fitted(fit: NodeFit) -> tuple[float, float]:
    """A fit call's preparation and its learner's run, timed apart (as :meth:`NodeFit.__call__`
    runs them)."""
    start = time.perf_counter()
    xs, ys = prepared_input(fit.xs, fit.ys, fit.order, fit.cap)
    prepared = time.perf_counter()
    with contextlib.suppress(Exception):  # a failing fit still takes its time (its default covers it)
        fit.call(xs, ys)
    return prepared - start, time.perf_counter() - prepared


def _seconds(fit: NodeFit) -> float:
    start = time.perf_counter()
    with contextlib.suppress(Exception):  # a failing fit still takes its time (its default covers it)
        fit()
    return time.perf_counter() - start
