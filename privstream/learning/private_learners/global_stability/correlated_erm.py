"""Correlated ERM: a replicable (globally stable) learner for many batches at once.

The practical per-batch learner of Algorithm M (:mod:`privstream.learning.private_learners.global_stability`).
Algorithm G (:mod:`.algorithm_g`) outputs its most frequent function with
probability ``η_G = 2^{-2^{d+2}}/(d+1)``; the stable histogram of M needs one function output by
``T`` (28 at ε = 1, δ = 1e-6) of the K batches, so G cannot work below ~10^12 examples. Correlated
ERM replaces it in practical mode by the classic replicable learner (correlated sampling, as in
Impagliazzo–Lei–Pitassi–Sorrell 2022 and Bun et al. 2023 "Stability is stable"):

* a **shared** sequence ``h_1, h_2, ...`` of hypotheses drawn i.i.d. uniformly from the class
  with the learner's own coins (independent of the data);
* batch B outputs the first ``h_j`` with empirical error ``errors_B(h_j) <= τ·|B|`` (exact integer
  comparison, τ a :class:`~fractions.Fraction`), or "Fail" (``None``) when ``|B| < min_batch`` or
  none of the first ``max_draws`` hypotheses qualifies.

**Why it is stable.** Batch B outputs a uniform member of its *good set* ``A_B = {h : err_B(h) <= τ}``;
two batches output the same function with probability ``|A_B ∩ A_B'| / |A_B ∪ A_B'|`` (the first
draw landing in the union decides both), which is close to 1 when the batches are large enough for
the good sets to differ only at their fringes. Every batch of realizable data contains the target in
its good set, and its output has empirical error at most τ.

**What privacy needs** (and all it needs): each batch's output is a function of that batch and of
the shared sequence only. With the sequence fixed, changing one example of batch B changes B's
output alone; the sequence is independent of the data, so the guarantee of the histogram over the
batch outputs holds for every sequence, hence for the mixture.

**Cost.** Draws are evaluated in chunks until every batch has its first hit: about ``|H| / |A_B|``
draws, so classes whose good sets are a tiny fraction of the class (points over 2^32) exhaust
``max_draws`` and give Fail. A draw of thresholds, points or intervals (at most two change points)
costs two binary searches per batch; any other hypothesis is evaluated on every example.

>>> import numpy as np
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> H = parse_class_spec("thresholds:64")
>>> xs = np.arange(400) % 64; ys = (xs >= 20).astype(np.uint8); batch = np.arange(400) // 100
>>> out = correlated_erm(H, xs, ys, batch, 4, ErmParameters(Fraction(0), 10, 4096), seeded(1))
>>> len(set(out)), out[0].predict(19), out[0].predict(20)
(1, 0, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privstream.learning.domain import INT64_MAX
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.randomness import RandomSource

__all__ = ["ErmParameters", "correlated_erm"]

#: predictions evaluated at once (draws x examples), bounding the temporary arrays
_CHUNK_CELLS = 1 << 22


@dataclass(frozen=True)
class ErmParameters:
    """Public parameters: empirical-error tolerance τ, least batch size, draw budget."""

    tolerance: Fraction
    min_batch: int
    max_draws: int

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance}")
        if self.min_batch < 1 or self.max_draws < 1:
            raise ValueError("min_batch and max_draws must be >= 1")


class _SortedBatches:
    """Every batch's points sorted with prefix counts of ones: the errors of a hypothesis with at most
    two change points (thresholds, points, intervals) on all batches by two binary searches each."""

    def __init__(self, pts: np.ndarray, lab: np.ndarray, owner: np.ndarray, num_batches: int) -> None:
        order = np.lexsort((pts, owner))
        xs, ones, who = pts[order], lab[order].astype(np.int64), owner[order]
        bounds = np.searchsorted(who, np.arange(num_batches + 1))
        self.batches = [
            (xs[lo:hi], np.concatenate(([0], np.cumsum(ones[lo:hi]))))
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        ]

    def errors(self, hyps: list[Hypothesis], domain_size: int) -> np.ndarray:
        """``errors[j, b]``: mistakes of ``hyps[j]`` on batch b."""
        first = np.empty(len(hyps), dtype=np.int64)
        cuts = np.full((2, len(hyps)), domain_size, dtype=np.int64)  # no change: a cut past the domain
        for j, h in enumerate(hyps):
            f, changes = h.change_points()
            first[j] = f
            cuts[: len(changes), j] = changes
        out = np.empty((len(hyps), len(self.batches)), dtype=np.int64)
        for b, (xs, prefix) in enumerate(self.batches):
            m = xs.shape[0]
            i1, i2 = np.searchsorted(xs, cuts[0]), np.searchsorted(xs, cuts[1])
            ones = (prefix[i1], prefix[i2] - prefix[i1], prefix[m] - prefix[i2])
            zeros = (i1 - ones[0], i2 - i1 - ones[1], m - i2 - ones[2])
            # values f, 1-f, f on the three segments: f = 1 errs on zeros outside and ones inside
            out[:, b] = np.where(first == 1, zeros[0] + ones[1] + zeros[2], ones[0] + zeros[1] + ones[2])
        return out


def correlated_erm(
    hclass: HypothesisClass,
    points: np.ndarray,
    labels: np.ndarray,
    batch_of: np.ndarray,
    num_batches: int,
    params: ErmParameters,
    rng: RandomSource,
) -> list[Hypothesis | None]:
    """The output of every batch (None = Fail); ``batch_of[i]`` is example i's batch (-1: none).

    ``points``/``labels`` are validated arrays; the shared draws come from ``rng``.
    """
    batch_of = np.asarray(batch_of, dtype=np.int64)
    inside = batch_of >= 0
    pts, lab, owner = points[inside], labels[inside].astype(bool), batch_of[inside]
    sizes = np.bincount(owner, minlength=num_batches)[:num_batches]
    allowed = (params.tolerance.numerator * sizes) // params.tolerance.denominator
    out: list[Hypothesis | None] = [None] * num_batches
    pending = [b for b in range(num_batches) if sizes[b] >= params.min_batch]
    sorted_batches = (
        _SortedBatches(pts, lab, owner, num_batches)
        if isinstance(hclass, Thresholds | Points | Intervals)
        and pts.dtype != object
        and hclass.domain_size <= INT64_MAX
        else None
    )
    largest = 256 if sorted_batches else max(1, min(256, _CHUNK_CELLS // max(1, int(pts.shape[0]))))
    chunk, drawn = 8, 0
    seen: dict[int, tuple[Hypothesis, np.ndarray]] = {}
    while pending and drawn < params.max_draws:
        count = min(chunk, largest, params.max_draws - drawn)
        chunk *= 2  # most batches hit early: start small, then double
        indices = [rng.uniform_int(hclass.size) for _ in range(count)]
        drawn += count
        fresh = sorted({i for i in indices if i not in seen})  # small classes repeat draws
        hyps = [hclass.hypothesis(i) for i in fresh]
        if sorted_batches is not None:
            rows = sorted_batches.errors(hyps, hclass.domain_size) if hyps else np.empty((0, num_batches))
        else:
            rows = np.array(
                [
                    np.bincount(owner, weights=h.predict(pts).astype(bool) != lab, minlength=num_batches)[
                        :num_batches
                    ]
                    for h in hyps
                ]
            )
        seen.update({i: (h, row) for i, h, row in zip(fresh, hyps, rows, strict=True)})
        errors = np.array([seen[i][1] for i in indices], dtype=np.int64)
        still = []
        for b in pending:
            hits = np.flatnonzero(errors[:, b] <= allowed[b])
            if hits.size:
                out[b] = seen[indices[int(hits[0])]][0]
            else:
                still.append(b)
        pending = still
    return out
