"""Errors of a synthetic distribution against data, over *all* queries of a class, without enumeration.

The signed error of query h is ``q_h(D) - n·q_h(A)`` in counts (``q_h`` = number of x with h(x) = 1,
or of (x, y) with h(x) = y). :func:`score_inputs` maps each supported (class, labelled) pair to the
prefix form used by the selection step (:mod:`.selection`): integer point weights ``a_i``, signed
block masses ``w``, a base mass and an integer offset, so that

* thresholds ``1[x >= t]``: error ``= sign·(offset + G(t))`` with ``G`` of :class:`PrefixScore`
  (unlabelled: ``-G(t)``), for t = 0..N;
* intervals ``[a, b)`` (unlabelled): error ``= G(b) - G(a)``; the max over all intervals is
  ``max G - min G`` (take a, b at the argmax/argmin in either order);
* points ``1[x = i]``: error ``= offset + P(i)`` (:class:`PointScore`), and the all-zero function;
* file classes: the truth table times the data histogram and the dense distribution.

:func:`class_errors` returns the maximum and the mean of ``|error|/n`` over the class. ``G`` is
linear between breakpoints, so the max over all ``2^32`` thresholds is attained at piece ends:
O(n log n + blocks).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.sanitizers.base import SanitizerInputError
from privstream.learning.sanitizers.distribution import SyntheticDistribution
from privstream.learning.sanitizers.selection import PointScore, PrefixScore

__all__ = ["class_errors", "finite_signed_errors", "score_inputs"]

#: Largest domain on which the mean over all intervals is computed (densely, O(N log N)).
MEAN_INTERVALS_LIMIT = 1 << 24


def score_inputs(
    hclass: HypothesisClass, ys_sorted: np.ndarray | None, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """``(a, w, base, offset)`` for the prefix/point score of a structured class.

    Unlabelled thresholds: error(t) = count(x >= t) - n·A(x >= t) = -G(t) (the sign is immaterial).
    Labelled thresholds: agreement = n1 - C1(t) + C0(t), so ``a = 1[y=0] - 1[y=1]``,
    ``w = w0 - w1``, ``base = W1``, ``offset = n1``. Labelled points: agreement = n0 + c1(i) - c0(i),
    so ``a = 1[y=1] - 1[y=0]``, ``w = w1 - w0``, ``base = W0``, ``offset = n0``.
    """
    n = 0 if ys_sorted is None else ys_sorted.shape[0]
    if ys_sorted is None:
        return np.ones(0, dtype=np.int64), weights, 0.0, 0  # a = 1 per point, filled in by the caller
    y = ys_sorted.astype(np.int64)
    w0, w1 = weights[:, 0], weights[:, 1]
    if isinstance(hclass, Thresholds):
        return 1 - 2 * y, w0 - w1, float(w1.sum()), int(y.sum())
    if isinstance(hclass, Points):
        return 2 * y - 1, w1 - w0, float(w0.sum()), int(n - y.sum())
    raise SanitizerInputError(
        "labelled queries are supported for thresholds, points and file classes; "
        "intervals support unlabelled data only"
    )


def finite_signed_errors(
    hclass: FiniteClass, xs: np.ndarray, ys: np.ndarray | None, density: np.ndarray, scale: int | None = None
) -> list[Fraction]:
    """Exact signed errors ``q_f(D) - fl(ν·q_f(A))`` for every row f of a file class.

    ``ν`` is ``scale`` (a public normaliser; default n). ``fl(ν·q_f(A))`` is a float computed from
    public values only, so each error is an exact rational whose data-dependent part is an integer
    count (sensitivity exactly 1).
    """
    m = hclass.matrix().astype(np.int64)
    n = xs.shape[0] if scale is None else scale
    if ys is None:
        counts = m @ np.bincount(xs, minlength=hclass.domain_size)
        syn = m @ density
    else:
        h1 = np.bincount(xs[ys == 1], minlength=hclass.domain_size)
        h0 = np.bincount(xs[ys == 0], minlength=hclass.domain_size)
        counts = m @ h1 + (1 - m) @ h0
        syn = m @ density[:, 1] + (1 - m) @ density[:, 0]
    scaled = (n * syn).tolist()
    return [int(c) - Fraction(s) for c, s in zip(counts.tolist(), scaled, strict=True)]


def _abs_linear_sum(a: np.ndarray, b: np.ndarray, length: np.ndarray) -> float:
    """``Σ_i Σ_{k < L_i} |a_i + b_i k|`` in closed form (split at the sign change)."""
    total = 0.0
    for ai, bi, li in zip(a.tolist(), b.tolist(), length.tolist(), strict=True):
        end = ai + bi * (li - 1)
        if ai * end >= 0:
            total += abs(li * ai + bi * li * (li - 1) / 2)
            continue
        k0 = min(max(math.floor(-ai / bi) + 1, 0), li)  # terms k < k0 have the sign of a_i
        s1 = k0 * ai + bi * k0 * (k0 - 1) / 2
        s2 = (li - k0) * ai + bi * (li * (li - 1) - k0 * (k0 - 1)) / 2
        total += abs(s1) + abs(s2)
    return total


def class_errors(
    hclass: HypothesisClass, dist: SyntheticDistribution, xs: np.ndarray, ys: np.ndarray | None = None
) -> tuple[float, float]:
    """``(max, mean)`` over all queries of the class of ``|q_h(D)/n - answer(h)|``.

    ``xs``/``ys`` must be validated points of the class's domain (non-empty). The mean over
    intervals is NaN above 2^24 points (it is computed densely); the max is always exact.
    """
    if dist.domain_size != hclass.domain_size:
        raise SanitizerInputError(
            f"the release is over domain {dist.domain_size} but the class "
            f"{hclass.spec} has domain {hclass.domain_size}"
        )
    if dist.labelled != (ys is not None):
        raise SanitizerInputError("a labelled release needs labelled data (a y column) and vice versa")
    n = xs.shape[0]
    if n == 0:
        raise SanitizerInputError("empty data: nothing to evaluate on")
    if isinstance(hclass, FiniteClass):
        errs = np.abs(np.array([float(e) for e in finite_signed_errors(hclass, xs, ys, dist.density())]))
        return float(errs.max()) / n, float(errs.mean()) / n
    order = np.argsort(xs, kind="stable")
    xs_s = xs[order]
    ys_s = None if ys is None else ys[order]
    edges = np.array(dist.edges, dtype=np.int64)
    a, w, base, offset = score_inputs(hclass, ys_s, dist.weights)
    if ys is None:
        a = np.ones(n, dtype=np.int64)
    if isinstance(hclass, Points):
        score = PointScore(xs_s, a, edges, w, n, base=base)
        vals = offset + score.p_value
        empty = abs(offset - n * base)
        mx = max(float(np.abs(vals).max()), empty)
        mean = (float(np.abs(vals) @ score.lengths) + empty) / hclass.size
        return mx / n, mean / n
    if not isinstance(hclass, Thresholds | Intervals):
        raise SanitizerInputError(f"no sanitizer evaluation for the class {hclass.spec}")
    prefix = PrefixScore(xs_s, a, edges, w, n, base=base)
    starts = offset + prefix.g_start
    ends = starts + prefix.g_slope * (prefix.lengths - 1)
    if isinstance(hclass, Thresholds):
        mx = float(np.maximum(np.abs(starts), np.abs(ends)).max())
        mean = _abs_linear_sum(starts, prefix.g_slope, prefix.lengths) / hclass.size
        return mx / n, mean / n
    if ys is not None:
        raise SanitizerInputError("labelled queries are not supported for intervals")
    mx = float(max(starts.max(), ends.max()) - min(starts.min(), ends.min()))
    if hclass.domain_size > MEAN_INTERVALS_LIMIT:
        return mx / n, math.nan  # the mean over ~N²/2 intervals is computed densely up to 2^24 only
    g = np.sort(prefix.values())  # all N+1 values; Σ_{a<b} |G_b - G_a| = Σ_i G_(i)·(2i - M + 1)
    m_count = g.shape[0]
    pair_sum = float(g @ (2 * np.arange(m_count) - m_count + 1))
    return mx / n, pair_sum / hclass.size / n  # the empty interval (error 0) is one of the |class| queries
