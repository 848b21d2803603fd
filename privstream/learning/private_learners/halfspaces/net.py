"""The public net of halfspaces and its scoring: :func:`halfspace_net`, :func:`net_errors`.

**The net.** Features are mapped to the unit box with the public bounds. A member is
``1[⟨w, u⟩ >= b]`` for a unit normal ``w`` and an offset ``b``, or one of the two constants
(``w = 0``, ``b = 0``: all ones; ``b = 1``: all zeros). The public net (:func:`halfspace_net`),
fixed before any data is seen, has the normals

* d = 1: ``±1``; d = 2: ``A = min(R, max_normals)`` equally spaced angles ``2πk/A`` (both
  orientations of every line); d >= 3: the ``2d`` axis directions ``±e_t``, then pseudo-random
  unit vectors from a fixed public seed, ``min(R^{d-1}, max_normals)`` in all;

and, for every normal ``w``, the ``R`` midpoint offsets ``b_j = lo_w + (hi_w - lo_w)(j + ½)/R`` of
the range ``[lo_w, hi_w] = [Σ min(w_t, 0), Σ max(w_t, 0)]`` of ``⟨w, u⟩`` on the box. A
:class:`HalfspaceNet` may hold any normals (the learner adds normals fitted privately to the
data); the offsets and ids are defined the same way for all of them.

**The resolution** ``R = min(max(⌈ε·n/2⌉, 16), max_resolution)`` (rounded up to a multiple of 4,
so the axes are in the d = 2 net) is a function of ε and the public size only (:func:`net_resolution`).
Why ``ε·n/2``: the exponential mechanism picks, among hypotheses whose empirical errors differ by
one, with odds ``e^{ε/2}``; a hypothesis one offset away from the best misclassifies about ``n/R``
more examples, so at ``R ≈ εn/2`` a step costs a constant factor of probability and the net's own
approximation error (one step, ``O(1/R)``) matches the mechanism's spread (``O(1/(εn))``, up to
logarithms). Scoring costs O(n) per normal (:func:`net_errors`), so the normals are capped
(``max_normals``, 2048 by default: an angular step of 0.003 rad in the plane) while offsets,
nearly free, go to ``max_resolution`` (8192).

>>> net = halfspace_net(2, 8); net.normals.shape, len(net)
((8, 2), 66)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privstream.learning.errors import LearningInputError
from privstream.learning.private_learners.halfspaces.model import HalfspaceModel
from privstream.learning.private_learners.vector_base import row_products

__all__ = [
    "DEFAULT_MAX_NORMALS",
    "DEFAULT_MAX_RESOLUTION",
    "NET_SEED",
    "HalfspaceNet",
    "halfspace_net",
    "net_errors",
    "net_resolution",
]

#: The finest net: 2048 normals x 8192 offsets (16.8 M hypotheses, 64 MiB of int32 scores).
DEFAULT_MAX_RESOLUTION = 8192
DEFAULT_MAX_NORMALS = 2048
MIN_RESOLUTION = 16
#: The public seed of the pseudo-random normals in d >= 3 (part of the net's definition).
NET_SEED = 20261127
#: Cells per chunk of normals, rows x normals and normals x (R + 1) (bounds the working memory).
_CHUNK_CELLS = 4_000_000


def net_resolution(size: int, epsilon: float, max_resolution: int = DEFAULT_MAX_RESOLUTION) -> int:
    """``R = min(max(⌈ε·size/2⌉, 16), max_resolution)``, rounded up to a multiple of 4.

    >>> net_resolution(2000, 1.0), net_resolution(10, 1.0), net_resolution(10**6, 1.0)
    (1000, 16, 8192)
    """
    r = min(max(math.ceil(epsilon * max(size, 1) / 2), MIN_RESOLUTION), max_resolution)
    return -(-r // 4) * 4


@dataclass(frozen=True)
class HalfspaceNet:
    """The public net: ``normals`` (shape ``(A, d)``, unit rows) with ``resolution`` offsets each, and
    the two constants. Hypothesis ids: ``0`` all ones, ``1`` all zeros, then ``2 + a·R + j``."""

    normals: np.ndarray
    resolution: int

    def __len__(self) -> int:
        return 2 + int(self.normals.shape[0]) * self.resolution

    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo_w, span_w)`` of ``⟨w, u⟩`` over the unit box, per normal."""
        lo = np.minimum(self.normals, 0.0).sum(axis=1)
        hi = np.maximum(self.normals, 0.0).sum(axis=1)
        return lo, hi - lo

    def offset(self, a: int, j: int) -> float:
        lo, span = self.ranges()
        return float(lo[a] + span[a] * (j + 0.5) / self.resolution)

    def member(self, hypothesis: int, bounds: np.ndarray) -> HalfspaceModel:
        d = self.normals.shape[1]
        if hypothesis < 2:
            return HalfspaceModel(bounds, np.zeros(d), float(hypothesis))
        a, j = divmod(hypothesis - 2, self.resolution)
        return HalfspaceModel(bounds, self.normals[a], self.offset(a, j))


def halfspace_net(d: int, resolution: int, max_normals: int = DEFAULT_MAX_NORMALS) -> HalfspaceNet:
    """The public net of halfspaces on ``[0, 1]^d`` at ``resolution`` (see the module docstring).

    >>> net = halfspace_net(2, 8); net.normals.shape, len(net)
    ((8, 2), 66)
    >>> halfspace_net(2, 8192).normals.shape, halfspace_net(3, 64).normals.shape
    ((2048, 2), (2048, 3))
    >>> np.round(net.normals[2], 12).tolist(), halfspace_net(1, 4).normals.tolist()
    ([0.0, 1.0], [[1.0], [-1.0]])
    """
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"need d >= 1 features, got {d!r}")
    if d == 1:
        normals = np.array([[1.0], [-1.0]])
    elif d == 2:
        count = -(-min(resolution, max_normals) // 4) * 4  # a multiple of 4: the axes are in the net
        angles = 2 * np.pi * np.arange(count) / count
        normals = np.stack((np.cos(angles), np.sin(angles)), axis=1)
    else:
        count = max(2 * d, min(resolution ** (d - 1), max_normals))
        axes = np.concatenate((np.eye(d), -np.eye(d)))
        extra = np.random.default_rng(NET_SEED).standard_normal((count - 2 * d, d))
        extra /= np.linalg.norm(extra, axis=1, keepdims=True)
        normals = np.concatenate((axes, extra))
    return HalfspaceNet(normals, int(resolution))


def net_errors(net: HalfspaceNet, U: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``#errors`` of every net member (int32, ids as in :class:`HalfspaceNet`) on unit-box rows ``U``.

    Per normal, each row's projection gives ``c`` = how many offsets lie at or below it (the members
    ``j < c`` say 1); a label-0 row errs for ``j < c``, a label-1 row for ``j >= c``. Histograms of
    ``c`` by label and two cumulative sums give every offset's count: O(n) per normal, no sorting.

    >>> net = halfspace_net(1, 4)
    >>> net_errors(net, np.array([[0.1], [0.9]]), np.array([0, 1], dtype=np.uint8)).tolist()
    [1, 1, 0, 0, 0, 0, 2, 2, 2, 2]
    """
    R, A = net.resolution, net.normals.shape[0]
    n = U.shape[0]
    if n >= 2**31:
        raise LearningInputError(f"{n} rows: the error counts are int32")
    lo, span = net.ranges()
    order = np.argsort(y, kind="stable")  # label-0 rows first: each label's rows are one slice
    U, zeros = U[order], int(n - np.count_nonzero(y))
    out = np.empty(len(net), dtype=np.int32)
    out[0], out[1] = zeros, n - zeros  # all ones errs on the 0s; all zeros on the 1s
    step = max(1, _CHUNK_CELLS // max(n, R + 1))  # both t (n x a) and the histograms (a x (R + 1))
    for first in range(0, A, step):
        scale = R / span[first : first + step]
        block = net.normals[first : first + step].T * scale
        a = block.shape[1]
        # c = floor(t + ½) offsets b_j <= projection, t = (⟨w, u⟩ - lo_w)·R/span_w; each row's t
        # whatever the other rows, so a neighbour moves every error count by at most one
        t = row_products(U, block)
        t += 0.5 - lo[first : first + step] * scale
        np.floor(t, out=t)
        np.clip(t, 0, R, out=t)
        flat = t.astype(np.int64)
        flat += np.arange(a, dtype=np.int64) * (R + 1)
        h0 = np.bincount(flat[:zeros].ravel(), minlength=a * (R + 1)).reshape(a, R + 1)
        h1 = np.bincount(flat[zeros:].ravel(), minlength=a * (R + 1)).reshape(a, R + 1)
        zeros_above = h0[:, ::-1].cumsum(axis=1)[:, ::-1][:, 1:]  # label 0 with c > j
        ones_at_or_below = h1.cumsum(axis=1)[:, :R]  # label 1 with c <= j
        out[2 + first * R : 2 + (first + a) * R] = (zeros_above + ones_at_or_below).ravel()
    return out
