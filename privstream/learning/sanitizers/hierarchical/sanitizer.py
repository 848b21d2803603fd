"""The hierarchical sanitizer: a PrivTree partition, then consistent noisy counts on a tree over its leaves.

For the 1-D integer classes (``thresholds:N``, ``intervals:N``, ``points:N``; N up to 2^62, the
domain limit of every class): every threshold, interval and point query is answered from a
:class:`SyntheticDistribution` whose blocks are the leaves of a private partition, each holding a
noisy, consistent share of the data, uniform inside. Its size grows with the number of leaves
(about ``n / (depth·δ)``), never with N.

1. **Partition** (ε_p = ``partition_share``·ε): PrivTree (Zhang, Xiao, Xie, SIGMOD 2016;
   :mod:`.privtree`) with fanout β: split a node iff ``max(c - d·δ, θ - δ) + Lap(λ) > θ``,
   ``δ = λ ln β``, decided by an exact Bernoulli with the exact probability.
2. **Heavy points** (ε_h = ``point_share``·ε, by default growing with log N:
   :func:`default_point_share`): each leaf draws one of its points by the exponential mechanism
   on the number of examples there, or "no point" (:mod:`.heavy_points`); a drawn point becomes
   a cell of its own, the rest of the leaf another. This recovers point masses (defaults, zeros,
   popular values) that the depth bias leaves inside wide leaves on large domains.
3. **Counts** (ε_c = ε - ε_p - ε_h): the cells (per label for a labelled release) are the
   cells of a balanced b-ary tree (:mod:`.consistent_tree`); every node's count gets discrete
   Laplace noise of scale ``S/ε_c`` (:class:`~privstream.learning.mechanisms.DiscreteLaplaceMechanism`,
   exact sampler), S the tree's ℓ1-sensitivity.
4. **Inference** (post-processing): least squares under "children sum to their parent" (Hay,
   Rastogi, Miklau, Suciu, VLDB 2010; branching after Qardaji, Yang, Li, VLDB 2013), then a
   top-down projection making every count non-negative with parents still equal to the sum of their
   children, then normalisation by the root (a zero or negative root gives the uniform distribution).

**Privacy.** Sequential composition of three mechanisms, each chosen from the previous ones'
outputs: (ε_p + ε_h + ε_c = ε, 0)-DP, then post-processing (the caller's δ is not used: the
result states δ = 0). The heavy points are ε_h-DP under either relation given the partition
(parallel over the disjoint leaves; weights ``e^{ε_h·c}`` under add/remove-one, where counts only
move one way, ``e^{ε_h·c/2}`` under replace-one: :mod:`.heavy_points`).

* *n private* (``expected_size=m``, add/remove-one neighbours): PrivTree's theorem gives ε_p for
  ``λ = (2β - 1)/((β - 1)·ε_p)`` whatever the depth (re-derived for the exact decision in
  :mod:`.privtree`). Given the cells, one example lies in one cell (its leaf's point or the
  leaf's rest), so it changes one count per level by 1: S = h for a tree of h levels (root
  included), and the root is released noisily and used as the total. Nothing reported depends
  on n: the parameters are the configuration and the partition's shape (itself part of the DP release).
* *n public* (``expected_size=None``, replace-one, the default of count windows and the CLI):
  replacing x by x' is removing x then adding x'. The partition pays PrivTree's bound for the
  addition plus ``1/λ`` for the removal (only the leaf's decision can gain), so
  ``λ = ((2β - 1)/(β - 1) + 1)/ε_p`` -- 4/ε_p at β = 2, tighter than 2·3/ε_p from group privacy. The
  counts use the public n as the root, unreleased: per level below the root one cell's path loses 1
  and the other's gains 1, so S = 2(h - 1).

**Exact noise only.** The split decisions are exact Bernoullis, the counts exact discrete Laplace
draws from the injected :class:`~privstream.learning.randomness.RandomSource`; floats appear only in
the post-processing.

**Accuracy: no theorem is claimed** (``theorem_sample_size=None``, ``accuracy_guarantee_holds=False``).
Two parts are provable: a leaf's count exceeds ``D·δ + θ + λ·ln(D·n/β)`` (D = log_β N) with
probability at most β, which bounds the within-leaf (uniformity) error, and each noisy count
exceeds its scale times ``ln(#nodes/β)`` with probability at most β. What is missing is an
∞-norm bound through the least-squares and non-negativity steps that is not far looser than what
they achieve; rather than a vacuous guarantee, the measured errors are in
``benchmarks/bench_sanitizers.py`` (n = 10,000, ε = 1, at 2^16 and at 2^32, on smooth data and on
data with point masses).

**Defaults** (measured with that benchmark's skewed and bimodal data at 2^16 and 2^32, n = 10,000,
ε = 1, replace-one, 80 releases per setting, before the heavy points): ``partition_share``
0.125 (mean interval error 0.0063-0.0070; 0.15: 0.0069-0.0073, 0.2: 0.0073-0.0079, 0.3: 0.0091-0.0094,
more leaves and each count noisier; 0.1: 0.0068-0.0080, leaves too coarse), fanout 2, θ = 0 (θ < 0,
smaller leaves, and fanouts 3 and 4 were no better), a balanced count tree (b = 12 for the ~130
leaves of that workload; a fixed b = 16: 0.0071-0.0074, it adds a level between 256 and 4096 leaves).

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> xs = np.array([3, 3, 3, 10, 12] * 40)
>>> res = HierarchicalSanitizer().fit(parse_class_spec("thresholds:2^32"), xs, epsilon=1.0, rng=seeded(1))
>>> res.mechanism, res.parameters["neighbouring_relation"], res.distribution.num_blocks < 60
('hierarchical', 'replace-one', True)
"""

from __future__ import annotations

import bisect
import itertools
import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privstream.learning.hypothesis_classes import HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.mechanisms import DiscreteLaplaceMechanism
from privstream.learning.randomness import RandomSource, resolve
from privstream.learning.sanitizers.base import SanitizerInputError, SanitizerResult, check_sanitizer_fit
from privstream.learning.sanitizers.distribution import SyntheticDistribution
from privstream.learning.sanitizers.hierarchical.consistent_tree import CountTree, least_squares, nonnegative
from privstream.learning.sanitizers.hierarchical.heavy_points import heaviest_value_cells, heavy_point_cells
from privstream.learning.sanitizers.hierarchical.privtree import Relation, privtree_partition, privtree_scale

__all__ = ["MECHANISM", "HierarchicalSanitizer", "default_point_share", "privacy_split"]

MECHANISM = "hierarchical"


def default_point_share(domain_size: int) -> float:
    """The heavy points' share of ε: ``(log2 N - 12)/80`` within ``[1/16, 1/4]`` (public: the class's N).

    PrivTree alone isolates a point once its count passes the depth bias ``λ ln N``
    (:mod:`.privtree`); the heavy points take over below that (:mod:`.heavy_points`), which
    matters more the larger N: 1/16 of ε at 2^16 (smooth data loses almost nothing to it), 1/4
    at 2^32 and beyond, where a value of 2% of 10,000 examples is isolated at ε = 1.

    >>> [default_point_share(n) for n in (2**16, 2**24, 2**32, 2**63, 8)]
    [0.0625, 0.15, 0.25, 0.25, 0.0625]
    """
    bits = (max(domain_size, 2) - 1).bit_length()
    return min(max((bits - 12) / 80, 1 / 16), 1 / 4)


def privacy_split(
    epsilon: float, partition_share: float, point_share: float = 0.0
) -> tuple[Fraction, Fraction, Fraction]:
    """``(ε_p, ε_h, ε_c)`` as exact rationals with ``ε_p + ε_h + ε_c = ε`` (the float ε read exactly).

    >>> privacy_split(1.0, 0.25, 0.125)
    (Fraction(1, 4), Fraction(1, 8), Fraction(5, 8))
    """
    total = Fraction(epsilon)
    eps_p = total * Fraction(partition_share)
    eps_h = total * Fraction(point_share)
    return eps_p, eps_h, total - eps_p - eps_h


class HierarchicalSanitizer:
    """PrivTree + consistent count tree as a :class:`~privstream.learning.sanitizers.base.Sanitizer`.

    ``partition_share`` of ε for the partition (the rest for the counts), ``fanout`` β of PrivTree,
    ``theta`` its threshold, ``branching`` b of the count tree (``None``: balanced, see
    :mod:`.consistent_tree`). ``noisy_partition=False``, ``depth_bias=False`` and
    ``noisy_counts=False`` are deliberately broken variants for the privacy audits; never use them
    otherwise.
    """

    name: ClassVar[str] = "hierarchical"

    def __init__(
        self,
        partition_share: float = 0.125,
        fanout: int = 2,
        branching: int | None = None,
        theta: int = 0,
        point_share: float | None = None,
        *,
        noisy_partition: bool = True,
        depth_bias: bool = True,
        noisy_points: bool = True,
        noisy_counts: bool = True,
    ) -> None:
        if (
            isinstance(partition_share, bool)
            or not isinstance(partition_share, int | float)
            or not 0 < partition_share < 1
        ):
            raise SanitizerInputError(f"partition_share must be in (0, 1), got {partition_share!r}")
        if point_share is not None and (
            isinstance(point_share, bool)
            or not isinstance(point_share, int | float)
            or not 0 <= point_share < 1 - partition_share
        ):
            raise SanitizerInputError(f"point_share must be in [0, 1 - partition_share), got {point_share!r}")
        if isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 2:
            raise SanitizerInputError(f"fanout must be an int >= 2, got {fanout!r}")
        if branching is not None and (
            isinstance(branching, bool) or not isinstance(branching, int) or branching < 2
        ):
            raise SanitizerInputError(f"branching must be None or an int >= 2, got {branching!r}")
        if isinstance(theta, bool) or not isinstance(theta, int):
            raise SanitizerInputError(f"theta must be an int, got {theta!r}")
        self.partition_share, self.fanout, self.branching, self.theta = (
            float(partition_share),
            fanout,
            branching,
            theta,
        )
        self.point_share = None if point_share is None else float(point_share)
        self.noisy_partition, self.depth_bias, self.noisy_counts = noisy_partition, depth_bias, noisy_counts
        self.noisy_points = noisy_points

    def fit(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray | None = None,
        *,
        epsilon: float,
        delta: float = 0.0,
        alpha: float = 0.1,
        beta: float = 0.1,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> SanitizerResult:
        if not isinstance(hclass, Thresholds | Intervals | Points):
            raise SanitizerInputError(
                f"the hierarchical sanitizer answers the 1-D integer classes (thresholds, intervals, "
                f"points), not {getattr(hclass, 'spec', type(hclass).__name__)}; use mwem for file classes"
            )
        eps, _, a, b, expected_size, points, labels = check_sanitizer_fit(
            hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, expected_size=expected_size
        )
        order = np.argsort(points, kind="stable")
        points = points[order]
        labels = None if labels is None else labels[order]
        relation: Relation = "replace-one" if expected_size is None else "add-remove-one"
        source = resolve(rng)
        n = int(points.shape[0])

        point_share = (
            default_point_share(hclass.domain_size) if self.point_share is None else self.point_share
        )
        eps_p, eps_h, eps_c = privacy_split(eps, self.partition_share, point_share)
        lam = privtree_scale(eps_p, self.fanout, relation)
        edges = privtree_partition(
            points,
            hclass.domain_size,
            lam,
            self.fanout,
            source,
            self.theta,
            noise=self.noisy_partition,
            depth_bias=self.depth_bias,
        )
        partition_leaves = len(edges) - 1
        if eps_h > 0 and self.noisy_points:
            edges, cell_of_block = heavy_point_cells(points, edges, eps_h, relation, source)
        elif eps_h > 0:  # BROKEN on purpose (audits only): each leaf split at its most frequent value
            edges, cell_of_block = heaviest_value_cells(points, edges)
        else:
            cell_of_block = list(range(len(edges) - 1))
        leaves = max(cell_of_block) + 1
        cells = _cell_counts(points, labels, edges, cell_of_block)
        tree = CountTree.balanced(leaves, self.branching, labelled=labels is not None)
        true_counts = tree.aggregate(cells)
        root = float(n) if relation == "replace-one" else None
        measured = true_counts[:-1] if root is not None else true_counts
        sensitivity = 2 * (tree.levels - 1) if root is not None else tree.levels
        noisy: list[np.ndarray] = [np.zeros(0)] * tree.levels
        if measured:  # a public root over a single cell needs no noisy count at all
            flat = [int(v) for level in measured for v in level.tolist()]
            if self.noisy_counts:
                mech = DiscreteLaplaceMechanism(eps_c, sensitivity, dimension=len(flat), rng=source)
                released = mech.release(flat)  # scale S/ε_c, ε_c the exact rational
            else:  # BROKEN on purpose (audits only): exact counts
                released = flat
            cuts = np.cumsum([len(level) for level in measured])[:-1]
            for level, counts in enumerate(np.split(np.array(released, dtype=np.float64), cuts)):
                noisy[level] = counts
        if root is not None:
            noisy[-1] = np.array([root])
        values = nonnegative(tree, least_squares(tree, noisy, root))
        distribution = _distribution(hclass.domain_size, edges, cell_of_block, values[0], labels is not None)

        scale = Fraction(sensitivity) / eps_c
        parameters: dict[str, Any] = {
            "alpha": a,
            "beta": b,
            "partition_share": self.partition_share,
            "fanout": self.fanout,
            "theta": self.theta,
            "branching": "balanced" if self.branching is None else self.branching,
            "neighbouring_relation": relation,
            "expected_size": expected_size,
            "epsilon_partition": float(eps_p),
            "point_share": point_share,
            "epsilon_points": float(eps_h),
            "epsilon_counts": float(eps_c),
            "privtree_lambda": float(lam),
            "privtree_delta": float(lam) * math.log(self.fanout),
            "partition_leaves": partition_leaves,
            "leaves": leaves,
            "count_tree_levels": tree.levels,
            "count_tree_branching": _branching_used(tree),
            "count_sensitivity": sensitivity if measured else 0,
            "count_noise_scale": float(scale) if measured else 0.0,
            "partition": "PrivTree (Zhang-Xiao-Xie 2016), exact Bernoulli split decisions",
            "points": "one point per leaf by the exponential mechanism on its count, cut out as a cell",
            "counts": "discrete Laplace on every node of the count tree",
            "inference": "least squares (children sum to parents), non-negative projection, normalised",
            "theorem": None,
        }
        return SanitizerResult(
            distribution=distribution,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=0.0,
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=None,
            accuracy_guarantee_holds=False,
            neighbouring_relation=relation,
        )

    def __repr__(self) -> str:
        return (
            f"HierarchicalSanitizer(partition_share={self.partition_share}, fanout={self.fanout}, "
            f"branching={self.branching})"
        )


def _cell_counts(
    points: np.ndarray, labels: np.ndarray | None, edges: list[int], cell_of_block: list[int]
) -> np.ndarray:
    """Counts per cell (sorted points), label 0's cells then label 1's when labelled."""
    cells = max(cell_of_block) + 1
    inner = edges[1:-1]
    if points.dtype == object:
        block = np.array([bisect.bisect_right(inner, int(x)) for x in points.tolist()], dtype=np.int64)
    else:
        block = np.searchsorted(np.array(inner, dtype=np.int64), points, side="right")
    cell = np.array(cell_of_block, dtype=np.int64)[block]
    if labels is None:
        return np.bincount(cell, minlength=cells).astype(np.float64)
    return np.bincount(cell + cells * labels.astype(np.int64), minlength=2 * cells).astype(np.float64)


def _branching_used(tree: CountTree) -> int | None:
    """The largest number of children of a node (None for a tree of one cell)."""
    return max((int(np.diff(g).max()) for g in tree.bounds), default=None)


def _distribution(
    domain_size: int, edges: list[int], cell_of_block: list[int], cells: np.ndarray, labelled: bool
) -> SyntheticDistribution:
    """Cells' masses spread over their blocks by width, normalised (uniform when the total is 0);
    runs of empty blocks merged."""
    count = max(cell_of_block) + 1
    per_cell = cells.reshape(2, count).T if labelled else cells
    total = float(per_cell.sum())
    if not total > 0:
        return SyntheticDistribution.uniform(domain_size, labelled=labelled)
    index = np.array(cell_of_block, dtype=np.int64)
    widths = np.array([float(hi - lo) for lo, hi in itertools.pairwise(edges)])
    cell_width = np.bincount(index, weights=widths, minlength=count)
    share = widths / cell_width[index]
    weights = per_cell[index] * (share[:, None] if labelled else share)
    blocks = len(edges) - 1
    mass = weights / total
    empty = (mass.reshape(blocks, -1) == 0).all(axis=1)
    keep = ~(empty[1:] & empty[:-1])  # drop the edge between two empty blocks
    kept_edges = [edges[0]] + [e for e, k in zip(edges[1:-1], keep.tolist(), strict=True) if k] + [edges[-1]]
    group = np.concatenate([[0], np.cumsum(keep)])
    merged = np.zeros((len(kept_edges) - 1, *mass.shape[1:]))
    np.add.at(merged, group, mass)
    return SyntheticDistribution(domain_size, kept_edges, merged / merged.sum())
