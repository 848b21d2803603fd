"""The hierarchical sanitizer in the privacy audit (:mod:`privstream.learning.audit`): two specs.

**The pair** (replace-one, on ``thresholds:1024``). A cluster of 23 points at 1 (inside the depth-9
node ``[0, 2)``), a cluster of 15 points at 895, and the moving point: at 0 in d0, at 1023 in d1.
Along 0's path the count stays 23 (24 in d0) down to depth 9, the constant count
``θ + (m - 1)·δ`` of the worst case in :mod:`.privtree`'s derivation (θ = 1, δ = 4 ln 2, m = 9), and
1023's path is alone below depth 2 (where the missing depth bias shows). This pair was the worst
of a search over such clusters: the exact loss of the partition on it is 0.81 of the claimed ε_p
(:func:`partition_laws`).

* ``"hierarchical-partition"``: PrivTree alone (:func:`~.privtree.privtree_partition`, the function
  the sanitizer calls) at ε_p = 1, replace-one (λ = 4). Output: the depths of the leaves holding 0
  and 1023, a sufficient statistic (every other node has the same count under d0 and d1, so the
  likelihood ratio of a whole partition depends on these depths only): :func:`partition_laws` are
  its exact laws, and their privacy loss is the partition's exact ε on the pair. Broken variants:
  ``no_noise`` (decisions ``b(v) > θ``: the leaf depths differ deterministically) and
  ``no_depth_bias`` (``b(v) = max(c(v), θ - δ)``: along 1023's lone path the count 1 vs 0 sits at the
  threshold at every level; exact loss 2.0, twice the claim, but in events of probability ~1e-3
  under d0, so a Monte Carlo audit needs ~10^5 runs per dataset: the exact check catches it cheaply).
* ``"hierarchical"``: the whole :meth:`HierarchicalSanitizer.fit` at ε = 2 (half for the partition),
  a flat count tree (sensitivity 2: the public root n is not released). Output, by post-processing
  of the release: the first and the last block edge (the widths of the blocks holding 0 and 1023)
  and the released count of ``[0, 512)`` (n times its mass), clipped. Broken variants:
  ``no_partition_noise`` and ``no_count_noise`` (exact counts: the count is 24 under d0, 23 under d1).
* ``"hierarchical-points"``: the heavy-point step alone (:func:`~.heavy_points.heavy_point_cells`, the
  function the sanitizer calls) on one leaf ``[0, 16)``, add/remove-one at ε_h = 1 (weights
  ``e^{count}``, "no point" at score 6). Pair: three examples at 2 and three at 5, and one more at
  5. Output: the point cut out, or -1. :func:`point_laws` are its exact laws (loss 0.93 of the
  claim, at the output 5). Broken variants: ``no_noise`` (the most frequent value, the first on
  a tie: 2 under d0, 5 under d1) and ``weights_doubled`` (``e^{2·count}``: the monotone-scores
  argument applied as if it halved the sensitivity once more; exact loss 1.13).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit import AuditSpec, MechanismFactory, privacy_loss
from privstream.learning.hypothesis_classes import Thresholds
from privstream.learning.randomness import RandomSource
from privstream.learning.sanitizers.hierarchical.heavy_points import (
    heaviest_value_cells,
    heavy_point_cells,
    none_score,
    weight_coefficient,
)
from privstream.learning.sanitizers.hierarchical.privtree import (
    Relation,
    privtree_partition,
    privtree_scale,
    split_probability,
)
from privstream.learning.sanitizers.hierarchical.sanitizer import HierarchicalSanitizer

__all__ = [
    "AUDIT_PAIR",
    "POINTS_PAIR",
    "hierarchical_audit_spec",
    "partition_audit_spec",
    "partition_laws",
    "point_laws",
    "points_audit_spec",
]

DOMAIN = 1024
THETA = 1
FANOUT = 2
PARTITION_EPSILON = 1.0
_CLUSTERS = (1,) * 23 + (895,) * 15
_LEFT, _RIGHT = 0, DOMAIN - 1

#: Datasets are sorted tuples of points; the moving point is at 0 in d0 and at 1023 in d1.
AUDIT_PAIR: tuple[tuple[int, ...], tuple[int, ...]] = (
    tuple(sorted((*_CLUSTERS, _LEFT))),
    tuple(sorted((*_CLUSTERS, _RIGHT))),
)

_DEPTH = DOMAIN.bit_length() - 1


def _leaf_depth(edges: list[int], x: int) -> int:
    j = int(np.searchsorted(edges, x, side="right")) - 1
    return _DEPTH - (edges[j + 1] - edges[j]).bit_length() + 1


def _path_counts(dataset: tuple[int, ...], x: int) -> list[int]:
    out = []
    for depth in range(_DEPTH + 1):
        width = DOMAIN >> depth
        lo = (x // width) * width
        out.append(sum(1 for v in dataset if lo <= v < lo + width))
    return out


def partition_laws(
    variant: str | None = None,
    epsilon: float = PARTITION_EPSILON,
    pair: tuple[tuple[int, ...], tuple[int, ...]] = AUDIT_PAIR,
    relation: Relation = "replace-one",
) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
    """Exact laws of (depth of 0's leaf, depth of 1023's leaf) on ``pair`` (default :data:`AUDIT_PAIR`).

    The two paths share the root only; along each path a node splits with the (float) probability
    of :func:`~.privtree.split_probability`, independently, and a singleton is a leaf. Every other
    node has the same count in both datasets when they differ only at 0 and 1023.
    """
    lam = float(privtree_scale(epsilon, FANOUT, relation))

    def split(count: int, depth: int) -> float:
        if depth == _DEPTH:
            return 0.0
        bias = depth if variant != "no_depth_bias" else 0
        if variant == "no_noise":
            delta = lam * math.log(FANOUT)
            return 1.0 if max(count - bias * delta, THETA - delta) > THETA else 0.0
        return split_probability(count, bias, lam, FANOUT, THETA)

    def stops(counts: list[int]) -> dict[int, float]:  # law of the leaf depth below the root
        law, alive = {}, 1.0
        for depth in range(1, _DEPTH + 1):
            s = split(counts[depth], depth)
            law[depth] = alive * (1 - s)
            alive *= s
        return law

    laws = []
    for dataset in pair:
        root = split(len(dataset), 0)
        law: dict[Hashable, float] = {(0, 0): 1 - root}
        left, right = stops(_path_counts(dataset, _LEFT)), stops(_path_counts(dataset, _RIGHT))
        for a, pa in left.items():
            for b, pb in right.items():
                law[(a, b)] = root * pa * pb
        laws.append(law)
    return laws[0], laws[1]


def partition_audit_spec(epsilon: float = PARTITION_EPSILON) -> AuditSpec:
    """PrivTree alone at ``epsilon`` (replace-one); see the module docstring."""
    lam = privtree_scale(epsilon, FANOUT, "replace-one")

    def factory(**switches: bool) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: tuple[int, ...]) -> tuple[int, int]:
                edges = privtree_partition(
                    np.array(dataset, dtype=np.int64), DOMAIN, lam, FANOUT, rng, THETA, **switches
                )
                return min(_leaf_depth(edges, _LEFT), 10), min(_leaf_depth(edges, _RIGHT), 10)

            return release

        return build

    return AuditSpec(
        name="hierarchical-partition",
        description=(
            f"PrivTree (fanout {FANOUT}, theta {THETA}) on {DOMAIN} points, eps={epsilon:g} "
            "replace-one; pair: clusters of 23 and 15, one point moved 0 -> 1023"
        ),
        claimed=PrivacyGuarantee(epsilon),
        build=factory(),
        pair=AUDIT_PAIR,
        discretise=lambda o: o,
        broken={"no_noise": factory(noise=False), "no_depth_bias": factory(depth_bias=False)},
        samples=4000,
        exact=lambda: partition_laws(None, epsilon),
    )


def _release_summary(result: Any, n: int) -> tuple[int, int, int]:
    """(first block edge, width of the last block, released count of [0, 512) - 23), clipped."""
    dist = result.distribution
    left = round(float(dist.cdf(np.array([DOMAIN // 2]))[0, 0]) * n) - 23
    return min(dist.edges[1], 64), min(DOMAIN - dist.edges[-2], 64), max(-4, min(left, 5))


def hierarchical_audit_spec(epsilon: float = 2.0) -> AuditSpec:
    """The whole sanitizer at ``epsilon`` (half for the partition, a flat count tree); see above."""
    hclass = Thresholds(DOMAIN)

    def factory(**switches: bool) -> MechanismFactory:
        sanitizer = HierarchicalSanitizer(
            partition_share=0.5, fanout=FANOUT, branching=DOMAIN, theta=THETA, **switches
        )

        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: tuple[int, ...]) -> tuple[int, int, int]:
                res = sanitizer.fit(hclass, np.array(dataset, dtype=np.int64), epsilon=epsilon, rng=rng)
                return _release_summary(res, len(dataset))

            return release

        return build

    return AuditSpec(
        name="hierarchical",
        description=(
            f"hierarchical sanitizer on {hclass.spec}, eps={epsilon:g} (partition {epsilon / 2:g}), "
            "flat count tree; pair: clusters of 23 and 15, one point moved 0 -> 1023"
        ),
        claimed=PrivacyGuarantee(epsilon),
        build=factory(),
        pair=AUDIT_PAIR,
        discretise=lambda o: o,
        broken={
            "no_partition_noise": factory(noisy_partition=False),
            "no_count_noise": factory(noisy_counts=False),
        },
        samples=2000,
    )


POINTS_LEAF = (0, 16)
POINTS_EPSILON = 1.0
#: Add/remove-one: one example more at 5 (sorted tuples of points).
POINTS_PAIR: tuple[tuple[int, ...], tuple[int, ...]] = ((2, 2, 2, 5, 5, 5), (2, 2, 2, 5, 5, 5, 5))


def _point_of(edges: list[int], cell_of_block: list[int]) -> int:
    """The point cut out of the audit's single leaf, or -1 when the leaf stayed one cell."""
    for (lo, _hi), cell in zip(itertools.pairwise(edges), cell_of_block, strict=True):
        if cell == 1:
            return lo
    return -1


def point_laws(
    epsilon: float = POINTS_EPSILON, pair: tuple[tuple[int, ...], tuple[int, ...]] = POINTS_PAIR
) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
    """Exact laws of the point drawn in ``[0, 16)`` (-1: none) under add/remove-one, from the weights."""
    lo, hi = POINTS_LEAF
    c = float(weight_coefficient(epsilon, "add-remove-one"))
    none = none_score(hi - lo, weight_coefficient(epsilon, "add-remove-one"))
    laws: list[dict[Hashable, float]] = []
    for dataset in pair:
        weights = {x: math.exp(c * dataset.count(x)) for x in range(lo, hi)}
        weights[-1] = math.exp(c * none)
        total = math.fsum(weights.values())
        laws.append({x: w / total for x, w in weights.items()})
    return laws[0], laws[1]


def points_audit_spec(epsilon: float = POINTS_EPSILON) -> AuditSpec:
    """The heavy-point step alone at ``epsilon``, add/remove-one; see the module docstring."""
    edges = list(POINTS_LEAF)

    def honest(eps: float) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: tuple[int, ...]) -> int:
                points = np.array(dataset, dtype=np.int64)
                return _point_of(*heavy_point_cells(points, edges, eps, "add-remove-one", rng))

            return release

        return build

    def argmax(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: tuple[int, ...]) -> int:
            return _point_of(*heaviest_value_cells(np.array(dataset, dtype=np.int64), edges))

        return release

    loss = privacy_loss(*point_laws(epsilon))
    return AuditSpec(
        name="hierarchical-points",
        description=(
            f"heavy point of one leaf [0, 16), eps={epsilon:g} add/remove-one; pair: 3 examples at 2 "
            f"and 3 at 5, one more at 5 (exact loss {loss:.3f})"
        ),
        claimed=PrivacyGuarantee(epsilon),
        build=honest(epsilon),
        pair=POINTS_PAIR,
        discretise=lambda o: o,
        broken={"no_noise": argmax, "weights_doubled": honest(2 * epsilon)},
        samples=4000,
        exact=lambda: point_laws(epsilon),
    )
