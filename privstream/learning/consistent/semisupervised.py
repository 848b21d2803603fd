"""PCSSL: the private semi-supervised learner for a VC class ([B §4.1, Thm 4.11]).

The class is **decision stumps** on R^d: ``1[x_j >= t]`` and ``1[x_j < t]`` for every feature j and
threshold t, plus the two constants (thresholds on R when d = 1). Its VC dimension is at most the
largest m with ``2^m <= 2 + 2d(m - 1)`` (the number of labellings it shows on m points; exactly 2
for d = 1), :func:`stump_vc_bound`.

**Algorithm** (unlabelled rows ``U``, labelled rows ``S`` of one table ``X, y``; ``y = -1``/NaN
marks unlabelled rows):

1. ``f̂ ← PCDE(U; ε_U, δ)`` (:func:`~privstream.learning.consistent.density.pcde_fit`, normalised,
   resolution from the public total row count n): the only access to U.
2. ``Û ← n_semi`` i.i.d. draws from f̂ (post-processing).
3. The semi-private learner ([B Thm 4.10]; Beimel et al. 2016): the cover ``H_Û`` has one stump per distinct
   labelling of Û (thresholds at midpoints of consecutive distinct values of Û, i.e. chosen from
   Û only, never from S), and the exponential mechanism ([S Lemma 3.2]; the exact
   :class:`~privstream.learning.mechanisms.ExponentialMechanism` over blocks of equal score)
   picks ``h ∈ H_Û`` with score ``-#errors_S(h)`` (sensitivity 1) at ``ε_S``: the only access to S.
   The output is a stump: the learner is proper.

**Privacy ((ε_U + ε_S, δ)-DP, replace-one over rows, n public).** A replacement either changes one
row of U (PCDE is (ε_U, δ)-DP and the rest is post-processing), or one row of S (for every Û the
EM is ε_S-DP: each score moves by <= 1), or turns a labelled row into an unlabelled one or back:
then U gains or loses one row (one cube count moves by one: still (ε_U, δ) for the stable
histogram on the fixed grid, which is why its resolution uses n and not |U|) and S loses or gains
one (scores move by <= 1: ε_S). Sequential composition covers all three: ``(ε_U + ε_S, δ)``. The
caller's ε is split as ``ε_U = density_share·ε`` and ``ε_S = ε - ε_U``. Because the split between
labelled and unlabelled rows is private, no count of either is released, and whether the
theorem's labelled sample size is met is reported as unknown (``accuracy_guarantee_holds=None``).

**Add/remove-one (``expected_size=m``, n private).** The density's grid is set by m (or the public
``cells_per_axis``), never by n. Adding or removing one row either adds/removes one row of U (one
cube count moves by one: (ε_U, δ) for the stable histogram on the fixed grid, see
:mod:`.density`) or one row of S (every score moves by <= 1: ε_S for the EM, whose cover Û does
not depend on S). Sequential composition gives the same ``(ε_U + ε_S, δ)``. n_semi, the cover's
size bound and the theorem's labelled size depend on (α, β, d, ε) only; the cover's actual size
and the density's released mass are DP outputs (``dp_outputs``).

**Parameters** (our derivation): ``n_semi = ⌈max((4/α)log2(2/β), (8·VC/α)log2(13/α))⌉``
unlabelled draws (ε-net size), and the labelled size that makes the EM output err <= 6α with
probability >= 1 - β given a good cover, ``m = ⌈max{(3/α)ln(3/β), 2ln(3|H_Û|/β)/(ε_S α),
(4/(3α))ln(3|H_Û|/β)}⌉`` (:func:`labelled_sample_size`), evaluated at the cover's largest possible
size ``2 + 2d(n_semi - 1)`` (:func:`cover_size_bound`; m grows with |H_Û|, so this is sufficient
for every cover, and it keeps the reported size a function of the configuration). The unlabelled
size the proof needs, n(β/n_semi, β, f), depends on the unknown density (not computable):
``dp_outputs`` report what PCDE released instead (released cubes, released mass Σĉ, whether it
fell back to uniform).

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> gen = np.random.default_rng(0)
>>> X = gen.random((20_000, 1)); y = (X[:, 0] >= 0.3).astype(np.int64); y[300:] = -1
>>> res = SemiSupervisedLearner(n_semi=500).fit(X, y, epsilon=1.0, delta=1e-9, bounds=[[0, 1]],
...                                               rng=seeded(1))
>>> m = res.model.to_dict(); m["feature"], m["sign"], abs(m["threshold"] - 0.3) < 0.05
(0, 1, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from privstream.learning.consistent.density import HistogramDensity, pcde_fit
from privstream.learning.consistent.grid import cells_per_axis as grid_cells_per_axis
from privstream.learning.errors import HypothesisFormatError, InvariantError, LearningInputError
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.parameters import Range
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
    "MECHANISM",
    "SemiSupervisedLearner",
    "StumpCover",
    "StumpModel",
    "cover_size_bound",
    "labelled_sample_size",
    "semi_private_learner",
    "stump_cover",
    "stump_vc_bound",
    "unlabelled_sample_size",
]

MECHANISM = "pcssl"


def stump_vc_bound(d: int) -> int:
    """Largest m with ``2^m <= 2 + 2d(m - 1)``: an upper bound on the VC dimension of stumps on R^d.

    >>> stump_vc_bound(1), stump_vc_bound(2), stump_vc_bound(30)
    (2, 3, 8)
    """
    m = 1
    while 2 ** (m + 1) <= 2 + 2 * d * m:
        m += 1
    return m


def unlabelled_sample_size(vc: int, alpha: float, beta: float) -> int:
    """ε-net size ``⌈max((4/α)log2(2/β), (8·VC/α)log2(13/α))⌉`` (Blumer et al. 1989)."""
    return math.ceil(max(4 / alpha * math.log2(2 / beta), 8 * vc / alpha * math.log2(13 / alpha)))


def cover_size_bound(d: int, n_semi: int) -> int:
    """Most stumps a cover of ``n_semi`` points in R^d can hold: the two constants and, per feature,
    two signs at each of at most ``n_semi - 1`` cuts.

    >>> cover_size_bound(1, 500)
    1000
    """
    return 2 + 2 * d * max(n_semi - 1, 0)


def labelled_sample_size(cover_size: int, epsilon: float, alpha: float, beta: float) -> int:
    """Labelled m for error <= 6α w.p. >= 1 - β given a cover with an α-good member ([B Thm 4.10])."""
    log_term = math.log(3 * cover_size / beta)
    return math.ceil(
        max(3 / alpha * math.log(3 / beta), 2 * log_term / (epsilon * alpha), 4 / (3 * alpha) * log_term)
    )


class StumpModel:
    """A released stump: ``1[x_j >= t]`` (sign 1), ``1[x_j < t]`` (sign -1), or a constant."""

    kind = "stump"

    def __init__(
        self, feature: int | None, threshold: float | None, sign: int | None, constant: int | None = None
    ) -> None:
        if constant is not None:
            if constant not in (0, 1) or feature is not None:
                raise HypothesisFormatError("a constant stump has no feature and a 0/1 value")
        elif (
            feature is None
            or threshold is None
            or sign not in (1, -1)
            or not math.isfinite(threshold)
            or feature < 0
        ):
            raise HypothesisFormatError("a stump needs a feature >= 0, a finite threshold and sign 1 or -1")
        self.feature, self.threshold, self.sign, self.constant = feature, threshold, sign, constant

    def predict(self, X: np.ndarray) -> np.ndarray:
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim != 2:
            raise LearningInputError(f"features must have shape (n, d), got {arr.shape}")
        if self.constant is not None:
            return np.full(arr.shape[0], self.constant, dtype=np.uint8)
        if self.feature is None:
            raise InvariantError("invariant broken: self.feature is not None")
        if self.threshold is None:
            raise InvariantError("invariant broken: self.threshold is not None")
        if self.feature >= arr.shape[1]:
            raise LearningInputError(f"the stump reads feature {self.feature}; rows have {arr.shape[1]}")
        above = arr[:, self.feature] >= self.threshold
        return (above if self.sign == 1 else ~above).astype(np.uint8)

    def to_dict(self) -> dict[str, Any]:
        if self.constant is not None:
            return {"kind": self.kind, "constant": self.constant}
        return {"kind": self.kind, "feature": self.feature, "threshold": self.threshold, "sign": self.sign}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StumpModel:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            if "constant" in d:
                return cls(None, None, None, int(d["constant"]))
            return cls(int(d["feature"]), float(d["threshold"]), int(d["sign"]))
        except HypothesisFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StumpModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.to_dict().items())))


class StumpCover:
    """One stump per distinct labelling of the points ``Û``, in a fixed order built from Û only.

    Row i is ``(feature[i], threshold[i], sign[i])``; feature -1 marks the constants (sign 1:
    all ones, -1: all zeros).
    """

    def __init__(self, feature: np.ndarray, threshold: np.ndarray, sign: np.ndarray) -> None:
        self.feature, self.threshold, self.sign = feature, threshold, sign

    def __len__(self) -> int:
        return int(self.feature.shape[0])

    def member(self, i: int) -> StumpModel:
        if self.feature[i] < 0:
            return StumpModel(None, None, None, 1 if self.sign[i] == 1 else 0)
        return StumpModel(int(self.feature[i]), float(self.threshold[i]), int(self.sign[i]))

    def errors(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``#errors_S(h)`` of every member on the labelled rows (vectorised by feature)."""
        m = y.shape[0]
        ones = int(y.sum())
        out = np.empty(len(self), dtype=np.int64)
        const = self.feature < 0
        out[const] = np.where(self.sign[const] == 1, m - ones, ones)
        for j in np.unique(self.feature[~const]):
            rows = np.flatnonzero(self.feature == j)
            order = np.argsort(X[:, j], kind="stable")
            vals, labs = X[order, j], y[order].astype(np.int64)
            cum1 = np.concatenate(([0], np.cumsum(labs)))
            below = np.searchsorted(vals, self.threshold[rows], side="left")  # #{x_j < t}
            ones_below = cum1[below]
            zeros_above = (m - below) - (ones - ones_below)
            err_pos = zeros_above + ones_below
            out[rows] = np.where(self.sign[rows] == 1, err_pos, m - err_pos)
        return out


def stump_cover(points: np.ndarray, rng: RandomSource) -> StumpCover:
    """The cover H_Û of stumps on ``points`` (duplicate labellings removed, first kept).

    Duplicates across features are found by hashing each labelling with random 64-bit weights per
    point (a collision, probability ~2^-64 per pair, would only drop a stump: utility, not privacy).
    """
    n, d = points.shape
    gen = np.random.default_rng(rng.getrandbits(128))
    weights = gen.integers(0, 2**63, size=(n,), dtype=np.uint64)
    total = np.uint64(weights.sum(dtype=np.uint64))
    feats = [np.array([-1, -1])]
    thrs = [np.array([np.nan, np.nan])]
    signs = [np.array([1, -1])]
    hashes = [np.array([total, 0], dtype=np.uint64)]
    with np.errstate(over="ignore"):
        for j in range(d):
            order = np.argsort(points[:, j], kind="stable")
            vals = points[order, j]
            distinct = np.flatnonzero(np.diff(vals) > 0)  # cut between vals[i] and vals[i+1]
            if distinct.size == 0:
                continue
            mids = (vals[distinct] + vals[distinct + 1]) / 2
            suffix = np.cumsum(weights[order][::-1], dtype=np.uint64)[::-1]  # weight of vals[i:]
            pos_hash = suffix[distinct + 1]
            k = mids.shape[0]
            feats.append(np.full(2 * k, j))
            thrs.append(np.concatenate((mids, mids)))
            signs.append(np.concatenate((np.ones(k, dtype=np.int64), -np.ones(k, dtype=np.int64))))
            hashes.append(np.concatenate((pos_hash, total - pos_hash)))
    h = np.concatenate(hashes)
    _, first = np.unique(h, return_index=True)
    keep = np.sort(first)
    return StumpCover(
        np.concatenate(feats)[keep].astype(np.int64),
        np.concatenate(thrs)[keep],
        np.concatenate(signs)[keep].astype(np.int64),
    )


def semi_private_learner(
    cover: StumpCover, X: np.ndarray, y: np.ndarray, epsilon: float, rng: RandomSource
) -> StumpModel:
    """The exponential mechanism over ``cover`` with score ``-#errors`` on (X, y): ε-DP in (X, y)."""
    errors = cover.errors(X, y)
    levels, counts = np.unique(errors, return_counts=True)
    mech = ExponentialMechanism(epsilon, 1, rng=rng)
    level = int(levels[mech.select_block([(int(c), -int(e)) for e, c in zip(levels, counts, strict=True)])])
    members = np.flatnonzero(errors == level)
    return cover.member(int(members[rng.uniform_int(members.shape[0])]))


class SemiSupervisedLearner:
    """PCSSL behind the :class:`~privstream.learning.private_learners.vector_base.VectorLearner` interface."""

    name = "semi-supervised"
    parameter_ranges: ClassVar[dict[str, Range]] = {
        "alpha": Range(0, 1, low_open=True, high_open=True),
        "beta": Range(0, 1, low_open=True, high_open=True),
        "n_semi": Range(low=1, integer=True, optional=True),
        "density_share": Range(0, 1, low_open=True, high_open=True),
        "cells_per_axis": Range(low=1, integer=True, optional=True),
    }

    def __init__(
        self,
        *,
        alpha: float = 0.1,
        beta: float = 0.1,
        n_semi: int | None = None,
        density_share: float = 0.5,
        cells_per_axis: int | None = None,
    ) -> None:
        self.alpha = check_accuracy_parameter(alpha, "alpha")
        self.beta = check_accuracy_parameter(beta, "beta")
        if n_semi is not None and (isinstance(n_semi, bool) or not isinstance(n_semi, int) or n_semi < 1):
            raise ValueError(f"n_semi must be an int >= 1, got {n_semi!r}")
        self.n_semi = n_semi
        if not 0 < density_share < 1:
            raise ValueError(f"density_share must be in (0, 1), got {density_share!r}")
        self.density_share = float(density_share)
        self.cells_per_axis = cells_per_axis  # a public resolution instead of the schedule in n (or m)

    def configuration_error(self, *, features: int, sizes: list[int], delta: float) -> str | None:
        """Refused without a δ in (0, 1) (its density estimator is (ε, δ)-DP), or where a node's
        density grid would not fit 63-bit cell ids."""
        if not 0 < delta < 1:
            return (
                "the semi-supervised learner's density estimator is (ε, δ)-DP: set release.delta in "
                f"(0, 1) (e.g. n^-2), got {delta:g}"
            )
        for size in sorted(sizes):
            k = self.cells_per_axis or grid_cells_per_axis(max(size, 1), features)
            if k**features - 1 > 2**63 - 1:
                return (
                    f"the semi-supervised learner on {features} features needs K^d = {k}^{features} "
                    f"density cubes at a node of {size} examples: too many; use fewer features or another "
                    f"learner (halfspaces, kernel)"
                )
        return None

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
        if not 0 < float(delta) < 1:
            raise LearningInputError(
                "the semi-supervised learner needs 0 < delta < 1 for its density "
                f"estimator (e.g. n^-2), got {delta!r}"
            )
        m = check_expected_size(expected_size)
        src = resolve(rng)
        b = check_bounds(bounds)
        arr = check_features(X, b)
        n, d = arr.shape
        labels, labelled = split_labels(y, n)
        eps_u = eps * self.density_share
        eps_s = eps - eps_u
        vc = stump_vc_bound(d)
        n_semi = unlabelled_sample_size(vc, self.alpha, self.beta) if self.n_semi is None else self.n_semi
        size = {"n": max(n, 1)} if m is None else {"expected_size": m}  # the grid's public size
        density: HistogramDensity = pcde_fit(
            arr[~labelled],
            epsilon=eps_u,
            delta=float(delta),
            bounds=b,
            rng=src,
            cells_per_axis_override=self.cells_per_axis,
            **size,
        )
        u_hat = density.sample(n_semi, src)
        cover = stump_cover(u_hat, src)
        model = semi_private_learner(cover, arr[labelled], labels[labelled], eps_s, src)
        m_needed = labelled_sample_size(cover_size_bound(d, n_semi), eps_s, self.alpha, self.beta)
        relation = neighbouring_relation(m)
        parameters: dict[str, Any] = {
            "hypothesis_class": "stumps",
            "alpha": self.alpha,
            "beta": self.beta,
            "n_semi": n_semi,
            "vc_bound": vc,
            "epsilon_density": eps_u,
            "epsilon_labels": eps_s,
            "composition": "sequential",
            "density_cells_per_axis": density.grid.k,
            "bounds": b.tolist(),
            "out_of_bounds": "clip",
            "cover_size_bound": cover_size_bound(d, n_semi),
            "unlabelled_size_needed": "depends on the unknown marginal (not computable)",
        }
        if m is not None:
            parameters["expected_size"] = m
        return VectorLearnerResult(
            model=model,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=float(delta),
            proper=True,
            sample_size=n,
            parameters=parameters,
            theorem="[B Thm 4.11] (PCDE [B Alg 3] + semi-private learner [B Thm 4.10])",
            guarantee=(
                f"({eps:g}, {float(delta):g})-DP ({relation} rows, sequential composition); "
                f"error <= 6*alpha w.p. >= 1 - 3*beta once the labelled rows reach the theorem size "
                f"and the unlabelled rows suffice for the (unknown) marginal"
            ),
            theorem_sample_size=m_needed,
            accuracy_guarantee_holds=None,
            dp_outputs={
                "cover_size": len(cover),
                "density_released_cells": int(density.cells.size),
                "density_released_mass": density.total_mass(),
                "density_fallback_used": density.fallback_used,
            },
            neighbouring_relation=relation,
        )
