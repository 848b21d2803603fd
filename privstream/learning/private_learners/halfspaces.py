"""Halfspaces on a public net: the exponential mechanism over ``1[⟨w, u⟩ >= b]`` (a proper vector learner).

**Class.** Features are mapped to the unit box with the *public* bounds, ``u = (x - lo)/(hi - lo)``
clipped to ``[0, 1]^d`` (a fixed per-row map). A hypothesis is ``h(x) = 1[⟨w, u⟩ >= b]`` for a unit
normal ``w`` and an offset ``b``; the learner chooses among a **public net** of them
(:func:`halfspace_net`), fixed before any data is seen:

* normals: d = 1: ``±1``; d = 2: ``A = min(R, max_normals)`` equally spaced angles ``2πk/A`` (both
  orientations of every line); d >= 3: the ``2d`` axis directions ``±e_t``, then pseudo-random unit
  vectors from a fixed public seed, ``min(R^{d-1}, max_normals)`` in all;
* offsets: for a normal ``w``, ``⟨w, u⟩`` ranges over ``[lo_w, hi_w] = [Σ min(w_t, 0), Σ max(w_t, 0)]``
  on the box; the net takes the ``R`` midpoints ``b_j = lo_w + (hi_w - lo_w)(j + ½)/R``;
* and the two constants (``w = 0``, ``b = 0``: all ones; ``b = 1``: all zeros).

The resolution ``R = min(max(⌈ε·n/2⌉, 16), max_resolution)`` (rounded up to a multiple of 4, so the
axes are in the d = 2 net) is a function of ε and the public size only (n, or ``expected_size`` when
n is private), or the public ``resolution`` parameter. Why ``ε·n/2``: the mechanism below picks,
among hypotheses whose empirical errors differ by one, with odds ``e^{ε/2}``; a hypothesis one net
step away from the best misclassifies about ``n/R`` more examples, so at ``R ≈ εn/2`` a step costs a
constant factor of probability and the net's own approximation error (one step, ``O(1/R)``) matches
the mechanism's spread (``O(1/(εn))``, up to logarithms). A finer net would cost time, not accuracy.
Scoring costs O(n) per normal (:func:`net_errors`), so the normals are capped (``max_normals``,
2048 by default: an angular step of 0.003 rad in the plane) while offsets, nearly free, go to
``max_resolution`` (8192).

**Mechanism.** The exponential mechanism ([S Lemma 3.2], McSherry-Talwar 2007; exact:
:class:`~privstream.learning.mechanisms.ExponentialMechanism` over blocks of equal score) with
score ``-#errors`` on the labelled rows: ``Pr[h] ∝ exp(-ε·errors(h)/2)``. Every hypothesis of one
score is one block; the member is then drawn uniformly (exactly) among them. Unlabelled rows
(``y = -1`` or NaN) do not count.

**Privacy (pure ε-DP; replace-one when n is public, add/remove-one with ``expected_size``).** The
net depends on (d, R, the public seed) only, and R on (ε, n or m) only. Each row adds at most 1 to
each hypothesis's error count, through its own (clipped) features and label, so replacing, adding
or removing a row, or turning it unlabelled, moves every score by at most 1: the exponential
mechanism at sensitivity 1 is ε-DP [S Lemma 3.2]. The release is the chosen net member (normal,
offset, bounds): a function of the mechanism's output only. The certificate reports no data-
dependent figure (not the chosen hypothesis's error, not how many rows were labelled).

**Accuracy** (agnostic, relative to the net; [KLNRS11 Thm 3.4]-style, made explicit here). With
``H`` the net and ``OPT`` the least population error in ``H``: the mechanism's output has empirical
error at most ``OPT_S + 2 ln(2|H|/β)/(εn)`` with probability ``>= 1 - β/2`` (the mass of hypotheses
``t`` worse than the best is at most ``|H| e^{-εnt/2}``), and Hoeffding with a union bound moves every
empirical error by at most ``sqrt(ln(4|H|/β)/(2n))`` with probability ``>= 1 - β/2``; so
``err(h) <= OPT + α`` with probability ``>= 1 - β`` once ``n >= max(8 ln(4|H|/β)/α², 4 ln(2|H|/β)/(εα))``
(:func:`theorem_sample_size`, every row labelled). The certificate gives that size; whether a window
meets it is not decided (``accuracy_guarantee_holds = None``), since the number of labelled rows is
private.

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> gen = np.random.default_rng(0)
>>> X = gen.random((4000, 2)); y = (X[:, 1] >= 0.25 + 0.5 * X[:, 0]).astype(np.uint8)
>>> res = HalfspaceLearner().fit(X, y, epsilon=1.0, bounds=[[0, 1], [0, 1]], rng=seeded(1))
>>> res.parameters["resolution"], res.proper, res.delta
(2000, True, 0.0)
>>> test = gen.random((10_000, 2)); truth = (test[:, 1] >= 0.25 + 0.5 * test[:, 0])
>>> float(np.mean(res.model.predict(test) != truth)) < 0.01
True
>>> HalfspaceModel.from_dict(res.model.to_dict()) == res.model
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.base import (
    check_accuracy_parameter,
    check_expected_size,
    neighbouring_relation,
)
from privstream.learning.private_learners.vector_base import (
    VectorLearnerResult,
    check_bounds,
    check_features,
    finite_epsilon,
    split_labels,
)
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "DEFAULT_MAX_NORMALS",
    "DEFAULT_MAX_RESOLUTION",
    "MECHANISM",
    "HalfspaceLearner",
    "HalfspaceModel",
    "HalfspaceNet",
    "halfspace_net",
    "net_errors",
    "net_resolution",
    "theorem_sample_size",
]

MECHANISM = "halfspace-net-em"
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
        return 2 + self.normals.shape[0] * self.resolution

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
        t = U @ block  # c = floor(t + ½) offsets b_j <= projection, t = (⟨w, u⟩ - lo_w)·R/span_w
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


def theorem_sample_size(hypotheses: int, epsilon: float, alpha: float, beta: float) -> int:
    """``n >= max(8 ln(4|H|/β)/α², 4 ln(2|H|/β)/(εα))``: error <= OPT_net + α w.p. >= 1 - β.

    >>> theorem_sample_size(66, 1.0, 0.1, 0.1)
    6303
    """
    return math.ceil(
        max(
            8 * math.log(4 * hypotheses / beta) / alpha**2,
            4 * math.log(2 * hypotheses / beta) / (epsilon * alpha),
        )
    )


class HalfspaceModel:
    """A released halfspace ``1[⟨w, u⟩ >= b]`` on the public box (``u`` the clipped unit-box features)."""

    kind = "halfspace"

    def __init__(self, bounds: object, normal: object, offset: float) -> None:
        try:
            self.bounds = check_bounds(bounds)
            w = np.array(normal, dtype=np.float64)
            b = float(offset)
        except (TypeError, ValueError, LearningInputError) as exc:
            raise HypothesisFormatError(f"malformed {self.kind} model: {exc}") from None
        if w.shape != (self.bounds.shape[0],) or not np.all(np.isfinite(w)) or not math.isfinite(b):
            raise HypothesisFormatError(
                f"a {self.kind} needs {self.bounds.shape[0]} finite weights and a finite offset"
            )
        self.normal, self.offset = w, b

    def predict(self, X: np.ndarray) -> np.ndarray:
        arr = check_features(X, self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        return ((arr - lo) / (hi - lo) @ self.normal >= self.offset).astype(np.uint8)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bounds": self.bounds.tolist(),
            "normal": self.normal.tolist(),
            "offset": self.offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HalfspaceModel:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            return cls(d["bounds"], d["normal"], d["offset"])
        except (KeyError, TypeError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HalfspaceModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((tuple(self.normal.tolist()), self.offset))


class HalfspaceLearner:
    """The exponential mechanism over a public net of halfspaces, as a
    :class:`~privstream.learning.private_learners.vector_base.VectorLearner`.

    ``resolution`` replaces the schedule in ε·n (or ε·m) by a public R; ``alpha``/``beta`` only set
    the certificate's theorem sample size.
    """

    name = "halfspaces"

    def __init__(
        self,
        *,
        resolution: int | None = None,
        max_resolution: int = DEFAULT_MAX_RESOLUTION,
        max_normals: int = DEFAULT_MAX_NORMALS,
        alpha: float = 0.05,
        beta: float = 0.05,
    ) -> None:
        for name, value in (
            ("resolution", resolution),
            ("max_resolution", max_resolution),
            ("max_normals", max_normals),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 4):
                raise ValueError(f"{name} must be an int >= 4, got {value!r}")
        for name, value in (("max_resolution", max_resolution), ("max_normals", max_normals)):
            if value % 4:  # the schedule rounds to multiples of 4; a cap must be one to hold
                raise ValueError(f"{name} must be a multiple of 4, got {value!r}")
        self.resolution = resolution
        self.max_resolution = max_resolution
        self.max_normals = max_normals
        self.alpha = check_accuracy_parameter(alpha, "alpha")
        self.beta = check_accuracy_parameter(beta, "beta")

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        epsilon: float,
        delta: float = 0.0,
        bounds: np.ndarray,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> VectorLearnerResult:
        eps = finite_epsilon(epsilon)
        m = check_expected_size(expected_size)
        b = check_bounds(bounds)
        arr = check_features(X, b)
        n, d = arr.shape
        size = n if m is None else m  # the public size the schedule may use
        R = net_resolution(size, eps, self.max_resolution) if self.resolution is None else self.resolution
        net = halfspace_net(d, R, self.max_normals)  # a function of (d, R): public
        labels, labelled = split_labels(y, n)
        lo, hi = b[:, 0], b[:, 1]
        errors = net_errors(net, (arr[labelled] - lo) / (hi - lo), labels[labelled])
        src = resolve(rng)
        counts = np.bincount(errors)  # block e: the members with e errors
        levels = np.flatnonzero(counts)
        mech = ExponentialMechanism(eps, 1, rng=src)
        level = int(levels[mech.select_block([(int(counts[e]), -int(e)) for e in levels])])
        members = np.flatnonzero(errors == level)
        model = net.member(int(members[src.uniform_int(members.shape[0])]), b)
        relation = neighbouring_relation(m)
        needed = theorem_sample_size(len(net), eps, self.alpha, self.beta)
        parameters: dict[str, Any] = {
            "hypothesis_class": "halfspaces",
            "resolution": R,
            "schedule": "eps*n/2" if self.resolution is None else "override",
            "normals": net.normals.shape[0],
            "net_size": len(net),
            "normals_rule": {1: "+1, -1", 2: "equally spaced angles"}.get(
                d, f"2d axes + pseudo-random unit vectors (public seed {NET_SEED})"
            ),
            "alpha": self.alpha,
            "beta": self.beta,
            "bounds": b.tolist(),
            "out_of_bounds": "clip",
            "score": "-#errors on labelled rows (sensitivity 1)",
        }
        if m is not None:
            parameters["expected_size"] = m
        return VectorLearnerResult(
            model=model,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=0.0,
            proper=True,
            sample_size=n,
            parameters=parameters,
            theorem="[S Lemma 3.2] exponential mechanism over a public net; agnostic bound in "
            "privstream.learning.private_learners.halfspaces",
            guarantee=(
                f"pure eps-DP ({relation}); error <= OPT_net + alpha w.p. >= 1 - beta once every row "
                f"is labelled and n >= the theorem size"
            ),
            theorem_sample_size=needed,
            accuracy_guarantee_holds=None,
            neighbouring_relation=relation,
        )
