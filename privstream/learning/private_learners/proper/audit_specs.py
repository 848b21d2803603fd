"""The proper learner in the privacy audit (:mod:`privstream.learning.audit`): ``"proper"`` (replace-one)
and ``"proper-add-remove"`` (``expected_size``, add/remove-one; :func:`add_remove_audit_spec`).

* **Production path**: :meth:`ProperLearner.fit` on ``points:3`` with explicit practical
  parameters (80 blocks of one example, k' = 1, α_Δ = 0.1, 20 examples for the generic stage,
  no shuffling so the pair stays worst-case), claimed (ε, δ) = (1, 1e-6).
* **Worst-case pair**: the blocks hold ``(0, 1)`` forty times and ``(1, 1)`` forty times, so
  ReduceTree returns ``{δ_0}`` or ``{δ_1}`` per block (both members, so the cover is the function
  itself and the release *is* the sparse selection's output); S' replaces one ``(0, 1)`` by
  ``(1, 1)``: one count goes down while the competing count goes up, so the numerator and the
  normaliser of ``Pr[δ_0]`` move against each other (exact loss ≈ 0.62 at ε = 1; see
  :func:`exact_laws`). Part B is 20 copies of ``(2, 0)``.
* **Broken variants** (same claim, must be caught): ``scores_not_halved`` weights
  ``exp(ε'·count)`` (sensitivity taken as 1/2: loss ≈ 1.44), ``no_noise`` outputs the most
  frequent element (ties to the smallest key): δ_0 under S, δ_1 under S' -- unbounded loss.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import Points
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.proper.irreducibility import lattice_of
from privstream.learning.private_learners.proper.learner import (
    PART_B,
    UNUSED,
    ProperLearner,
    ProperParameters,
)
from privstream.learning.private_learners.proper.reduce_tree import reduce_tree, row_mistakes
from privstream.learning.private_learners.proper.sparse_selection import (
    guarantee,
    inner_epsilon,
    selection_law,
)
from privstream.learning.randomness import RandomSource

__all__ = [
    "ADD_REMOVE_PAIR",
    "AUDIT_CLASS",
    "AUDIT_PAIR",
    "add_remove_audit_spec",
    "exact_laws",
    "proper_audit_spec",
]

AUDIT_CLASS = Points(3)
AUDIT_DELTA = 1e-6
_BLOCKS, _PART_B = 80, 20
_LEARNER_PARAMS: dict[str, Any] = {
    "blocks": _BLOCKS,
    "k_prime": 1,
    "alpha_delta": 0.1,
    "generic_fraction": 0.2,
    "shuffle": False,
}


def _dataset(zeros_point_blocks: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    xs = (0,) * zeros_point_blocks + (1,) * (_BLOCKS - zeros_point_blocks) + (2,) * _PART_B
    ys = (1,) * _BLOCKS + (0,) * _PART_B
    return xs, ys


#: Datasets are ``(xs, ys)`` tuples; the two differ in block 39 only (replace-one).
AUDIT_PAIR: tuple[Any, Any] = (_dataset(40), _dataset(39))


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = dataset
    return np.array(xs, dtype=np.int64), np.array(ys, dtype=np.uint8)


def _point_of(h: Hypothesis) -> int:
    """The point i of ``1[x = i]`` (-1 for the all-zero function)."""
    hits = np.flatnonzero(h.predict(np.arange(AUDIT_CLASS.domain_size)))
    return int(hits[0]) if hits.size else -1


def _block_sets(dataset: Any) -> list[frozenset[int]]:
    """The ReduceTree output of every block, as sets of points (deterministic)."""
    lattice = lattice_of(AUDIT_CLASS)
    xs, ys = _arrays(dataset)
    alpha_delta = (
        ProperLearner(**_LEARNER_PARAMS)
        .parameters_for(len(xs), 1, 1.0, AUDIT_DELTA, 0.25, 0.25)[0]
        .alpha_delta
    )
    out = []
    for j in range(_BLOCKS):
        res = reduce_tree(
            lattice, row_mistakes(lattice.counts_matrix, xs[j : j + 1], ys[j : j + 1]), 1, 1, alpha_delta
        )
        out.append(frozenset(_point_of_table(t) for t in res.s_hat.values()))
    return out


def _point_of_table(table: np.ndarray) -> int:
    hits = np.flatnonzero(table)
    return int(hits[0]) if hits.size == 1 else -1


def exact_laws(epsilon: float = 1.0) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
    """Exact output laws on the pair: the sparse selection's law (members: the cover is the function).

    The ⊥ outcome releases row 0 of ``points:3``, i.e. δ_0 (its canonical first row).
    """
    laws = []
    for d in AUDIT_PAIR:
        law = selection_law(_block_sets(d), epsilon=epsilon, delta=AUDIT_DELTA, ell=3, default=0)
        laws.append(dict(law))
    return laws[0], laws[1]


def proper_audit_spec(epsilon: float = 1.0) -> AuditSpec:
    """The :class:`AuditSpec` of the proper learner at ``epsilon`` (see the module docstring)."""
    learner = ProperLearner(**_LEARNER_PARAMS)

    def production(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> int:
            xs, ys = _arrays(dataset)
            res = learner.fit(AUDIT_CLASS, xs, ys, epsilon=epsilon, delta=AUDIT_DELTA, rng=rng)
            return _point_of(res.hypothesis)

        return release

    def selection_variant(kind: str) -> MechanismFactory:
        def factory(rng: RandomSource) -> Callable[[Any], Any]:
            cache: dict[Any, list[frozenset[int]]] = {}

            def release(dataset: Any) -> int:
                if dataset not in cache:
                    cache[dataset] = _block_sets(dataset)
                sets = cache[dataset]
                counts: dict[int, int] = {}
                for s in sets:
                    for u in s:
                        counts[u] = counts.get(u, 0) + 1
                keys = sorted(counts)
                if kind == "no_noise":
                    return max(keys, key=lambda u: (counts[u], -u))
                em = ExponentialMechanism(inner_epsilon(epsilon, AUDIT_DELTA), 0.5, rng=rng)
                blocks = [(1, counts[u]) for u in keys] + [(int(3 / AUDIT_DELTA) + 1, 1)]
                i = em.select_block(blocks)
                return 0 if i == len(keys) else keys[i]

            return release

        return factory

    return AuditSpec(
        name="proper",
        description=(
            f"GGKM proper learner on {AUDIT_CLASS.spec}, 80 one-example blocks, eps={epsilon:g}, "
            f"delta={AUDIT_DELTA:g}; pair: one block (0, 1) -> (1, 1)"
        ),
        claimed=guarantee(epsilon, AUDIT_DELTA),
        build=production,
        pair=AUDIT_PAIR,
        discretise=lambda o: o,
        broken={"scores_not_halved": selection_variant("halved"), "no_noise": selection_variant("no_noise")},
        samples=10_000,
        exact=lambda: exact_laws(epsilon),
    )


# -- add/remove-one neighbours (expected_size) -------------------------------------------------

ADD_REMOVE_EPSILON, ADD_REMOVE_DELTA = 2.0, 0.05
_PAIR_BLOCKS = 20  # blocks of two: (0,1),(0,1) / (1,1),(1,1) alternating, then part B


def _add_remove_dataset(extra: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    xs = (0, 0, 1, 1) * (_PAIR_BLOCKS // 2) + (2,) * 4
    ys = (1,) * (2 * _PAIR_BLOCKS) + (0,) * 4
    return ((0, *xs), (1, *ys)) if extra else (xs, ys)


#: Add/remove pair: D' = D plus one ``(0, 1)`` in front.
ADD_REMOVE_PAIR: tuple[Any, Any] = (_add_remove_dataset(False), _add_remove_dataset(True))
_EXPECTED = len(ADD_REMOVE_PAIR[0][0])
_ADD_REMOVE_PARAMS: dict[str, Any] = {
    "blocks": _PAIR_BLOCKS,
    "k_prime": 1,
    "alpha_delta": 0.1,
    "generic_fraction": 0.1,
}


class _PositionalSplit(ProperLearner):
    """The broken variant: the expected layout applied by position (what a removed example breaks)."""

    def _split(self, n: int, params: ProperParameters, rng: RandomSource) -> np.ndarray:
        layout = ProperParameters(**{**params.__dict__, "expected_size": None})
        out = np.full(n, UNUSED, dtype=np.int64)
        m, n0 = layout.blocks, layout.block_size
        out[: min(n, m * n0)] = (np.arange(m * n0, dtype=np.int64) // n0)[:n]
        out[max(m * n0, n - layout.generic_size) :] = PART_B
        return out


def add_remove_audit_spec(epsilon: float = ADD_REMOVE_EPSILON) -> AuditSpec:
    """The add/remove-one :class:`AuditSpec` of the proper learner with ``expected_size``.

    D: 20 blocks' worth of pairs ``(0,1),(0,1)`` / ``(1,1),(1,1)`` alternating, then four ``(2, 0)``;
    D' = D with one more ``(0, 1)`` in front; ``expected_size = |D|``, 20 blocks of 2, α_Δ = 0.1 (the
    version-space regime), at (ε, δ) = (2, 0.05). The production split assigns every example on its
    own, so D' changes one block's set. The broken variant ``positional`` splits by position: the extra
    example shifts every pair, every block but the first becomes ``(0,1),(1,1)`` or ``(1,1),(0,1)``
    (no consistent point function: Ŝ = ∅), and δ_1, held by 10 blocks under D, is held by none under
    D' (so it cannot be selected).
    """

    def factory(learner: ProperLearner) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: Any) -> int:
                xs, ys = _arrays(dataset)
                res = learner.fit(
                    AUDIT_CLASS,
                    xs,
                    ys,
                    epsilon=epsilon,
                    delta=ADD_REMOVE_DELTA,
                    rng=rng,
                    expected_size=_EXPECTED,
                )
                return _point_of(res.hypothesis)

            return release

        return build

    return AuditSpec(
        name="proper-add-remove",
        description=(
            f"GGKM proper learner with expected_size={_EXPECTED} (random split) on "
            f"{AUDIT_CLASS.spec}, eps={epsilon:g}, delta={ADD_REMOVE_DELTA:g}; pair: D vs D plus "
            f"one (0, 1) in front"
        ),
        claimed=guarantee(epsilon, ADD_REMOVE_DELTA),
        build=factory(ProperLearner(**_ADD_REMOVE_PARAMS)),
        pair=ADD_REMOVE_PAIR,
        discretise=lambda o: o,
        broken={"positional": factory(_PositionalSplit(**_ADD_REMOVE_PARAMS))},
        samples=1_000,
    )
