"""The consistent learners in the privacy audit (:mod:`privstream.learning.audit`): four specs.

* ``bayes-consistent``: PCL (the production learner
  :class:`~privstream.learning.consistent.pcl.BayesConsistentLearner`, noise drawn from the random
  source) on [0, 1] with n = 2 (so K = 2 cubes) and the **tight pair** of
  cube 0 holds labels {1, 0} (vote 0) vs {0, 0} (vote -2), so
  ``Pr[label 1] = ½`` vs ``½e^{-ε}``: the privacy loss is exactly ε. Broken variants:
  ``noise_halved`` (the Bernoulli(e^{-ε|v|/2}) drawn at 2ε: loss 2ε) and ``no_noise`` (the
  majority vote, ties broken by the coin: loss ∞).
* ``bayes-consistent-empty-cell``: a point moves from cube 1 (then empty) into cube 0. Broken
  variants: ``empty_cells_unkeyed`` (noise drawn only for occupied cubes, empty cubes predicted
  0: a cube going empty changes its law from Bernoulli(1 - ½e^{-ε/2}) to a point mass) and
  ``bounds_from_data`` (the box taken as [min, max] of the data: released, so
  it reveals the extreme points).
* ``pcde``: the density estimator's δ part, a lone point in cube 5 vs none (released with
  probability <= δ); broken: ``no_threshold`` (stable histogram threshold 1: probability ~½).
* ``semi-supervised``: the full semi-supervised learner with the unlabelled rows fixed and one
  labelled row's label flipped; broken: ``no_noise`` (ERM over the cover instead of the
  exponential mechanism).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.consistent.density import pcde_fit
from privstream.learning.consistent.grid import CubeGrid, cells_per_axis
from privstream.learning.consistent.pcl import (
    BayesConsistentLearner,
    GridLabelModel,
    cell_label,
    cell_votes,
    label_probability,
    pcl_fit,
)
from privstream.learning.consistent.semisupervised import SemiSupervisedLearner, StumpModel, stump_cover
from privstream.learning.errors import InvariantError
from privstream.learning.mechanisms import StableHistogram
from privstream.learning.randomness import RandomSource

__all__ = [
    "AUDIT_EPSILON",
    "EMPTY_CELL_PAIR",
    "PCDE_PAIR",
    "SSL_PAIR",
    "TIGHT_PAIR",
    "bayes_consistent_audit_spec",
    "empty_cell_audit_spec",
    "pcde_audit_spec",
    "semi_supervised_audit_spec",
]

AUDIT_EPSILON = 1.0
UNIT = np.array([[0.0, 1.0]])
#: Datasets are tuples of ``(x, y)`` rows (hashable); replace-one neighbours.
TIGHT_PAIR: tuple[Any, Any] = (((0.1, 1), (0.2, 0)), ((0.1, 0), (0.2, 0)))
EMPTY_CELL_PAIR: tuple[Any, Any] = (((0.1, 1), (0.9, 1)), ((0.1, 1), (0.2, 1)))


def _arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.array([[row[0]] for row in dataset], dtype=np.float64)
    y = np.array([row[1] for row in dataset], dtype=np.int64)
    return X, y


def _table_key(model: GridLabelModel) -> Hashable:
    d = model.to_dict()
    return (str(d["bounds"]), d["labels"])


def _production(epsilon: float) -> MechanismFactory:
    learner = BayesConsistentLearner()

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> GridLabelModel:
            X, y = _arrays(dataset)
            model = learner.fit(X, y, epsilon=epsilon, bounds=UNIT, rng=rng).model
            if not isinstance(model, GridLabelModel):
                raise InvariantError("invariant broken: isinstance(model, GridLabelModel)")
            return model

        return release

    return build


def _at_epsilon(epsilon: float) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        return lambda dataset: pcl_fit(*_arrays(dataset), epsilon=epsilon, bounds=UNIT, rng=rng).release()

    return build


def _majority(rng: RandomSource) -> Callable[[Any], Any]:
    def release(dataset: Any) -> GridLabelModel:
        X, y = _arrays(dataset)
        cells = pcl_fit(X, y, epsilon=1.0, bounds=UNIT, rng=rng)
        table = cells.table()
        ids, votes = cell_votes(cells.grid, X, y.astype(np.uint8))
        for c, v in zip(ids.tolist(), votes.tolist(), strict=True):
            if v != 0:
                table[c] = int(v > 0)
        return GridLabelModel(cells.grid, table)

    return release


def _unkeyed_empty_zero(epsilon: float) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> GridLabelModel:
            X, y = _arrays(dataset)
            grid = CubeGrid(UNIT, cells_per_axis(X.shape[0], 1))
            table = np.zeros(int(grid.num_cells), dtype=np.uint8)
            ids, votes = cell_votes(grid, X, y.astype(np.uint8))
            for c, v in zip(ids.tolist(), votes.tolist(), strict=True):  # fresh, unkeyed draws
                table[c] = cell_label(v, Fraction(epsilon), rng, rng.getrandbits(1))
            return GridLabelModel(grid, table)

        return release

    return build


def _bounds_from_data(epsilon: float) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> GridLabelModel:
            X, y = _arrays(dataset)
            lo, hi = float(X.min()), float(X.max())
            bounds = [[lo, hi if hi > lo else lo + 1.0]]
            return pcl_fit(X, y, epsilon=epsilon, bounds=bounds, rng=rng).release()

        return release

    return build


def _pcl_law(votes: tuple[int, ...], epsilon: float) -> dict[Hashable, float]:
    """Exact law of the label table for the given per-cube votes (cubes independent)."""
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for v in votes:
        p = label_probability(v, epsilon)
        law = {(*k, b): q * (p if b else 1 - p) for k, q in law.items() for b in (0, 1)}
    return {table: q for table, q in law.items()}


def bayes_consistent_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """PCL on the tight pair (see the module docstring)."""

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        return _pcl_law((0, 0), epsilon), _pcl_law((-2, 0), epsilon)

    return AuditSpec(
        name="bayes-consistent",
        description=(
            f"PCL on [0,1], n=2 (K=2), eps={epsilon:g}; tight pair: cube 0 labels {{1,0}} "
            "vs {0,0} (exact loss = eps)"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism="pcl"),
        build=_production(epsilon),
        pair=TIGHT_PAIR,
        discretise=_table_key,
        broken={"noise_halved": _at_epsilon(2 * epsilon), "no_noise": _majority},
        samples=20_000,
        exact=exact,
    )


def empty_cell_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """PCL when a cube becomes empty (see the module docstring)."""

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        return _pcl_law((1, 1), epsilon), _pcl_law((2, 0), epsilon)

    return AuditSpec(
        name="bayes-consistent-empty-cell",
        description=f"PCL on [0,1], n=2, eps={epsilon:g}; a point moves from cube 1 (then empty) to cube 0",
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=0.0, mechanism="pcl"),
        build=_production(epsilon),
        pair=EMPTY_CELL_PAIR,
        discretise=_table_key,
        broken={
            "empty_cells_unkeyed": _unkeyed_empty_zero(epsilon),
            "bounds_from_data": _bounds_from_data(epsilon),
        },
        samples=20_000,
        exact=exact,
    )


PCDE_DELTA = 1e-3
PCDE_PAIR: tuple[Any, Any] = (((0.95,),) + ((0.05,),) * 29, ((0.05,),) * 30)  # K = 6: cube 5 vs none


def pcde_audit_spec() -> AuditSpec:
    """PCDE's δ part: is the lone point's cube released?"""
    eps = AUDIT_EPSILON

    def factory(threshold: int | None) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            hist = StableHistogram(eps, PCDE_DELTA, rng=rng)
            if threshold is not None:
                hist.threshold = threshold  # deliberately broken: the constructor refuses it
            return lambda d: pcde_fit(
                np.array(d), epsilon=eps, delta=PCDE_DELTA, bounds=UNIT, rng=rng, histogram=hist
            )

        return build

    return AuditSpec(
        name="pcde",
        description=(
            f"PCDE on [0,1], n=30 (K=6), eps={eps:g}, delta={PCDE_DELTA:g}; lone point in cube 5 vs none"
        ),
        claimed=PrivacyGuarantee(epsilon=eps, delta=PCDE_DELTA, mechanism="pcde"),
        build=factory(None),
        pair=PCDE_PAIR,
        discretise=lambda f: 5 in f.cells.tolist(),
        broken={"no_threshold": factory(1)},
        samples=20_000,
    )


# Unlabelled rows (fixed) and labelled rows; the pair flips the label of the labelled row at 0.5.
_SSL_UNLABELLED = tuple(((i + 0.5) / 40,) for i in range(40))
_SSL_LABELLED = ((0.2, 0), (0.3, 0), (0.5, 1), (0.7, 1), (0.8, 1))
SSL_PAIR: tuple[Any, Any] = (_SSL_LABELLED, ((0.2, 0), (0.3, 0), (0.5, 0), (0.7, 1), (0.8, 1)))
SSL_DELTA = 1e-3


def _ssl_arrays(labelled: Any) -> tuple[np.ndarray, np.ndarray]:
    X = np.array([[x] for (x,) in _SSL_UNLABELLED] + [[x] for x, _ in labelled], dtype=np.float64)
    y = np.array([-1] * len(_SSL_UNLABELLED) + [lab for _, lab in labelled], dtype=np.int64)
    return X, y


def _stump_key(model: StumpModel) -> Hashable:
    return int(model.predict(np.array([[0.45]]))[0]), int(model.predict(np.array([[0.55]]))[0])


def semi_supervised_audit_spec(epsilon: float = AUDIT_EPSILON) -> AuditSpec:
    """The semi-supervised learner, one labelled row's label flipped (see the module docstring)."""
    learner = SemiSupervisedLearner(n_semi=20, density_share=0.5)

    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(labelled: Any) -> StumpModel:
            X, y = _ssl_arrays(labelled)
            model = learner.fit(X, y, epsilon=epsilon, delta=SSL_DELTA, bounds=UNIT, rng=rng).model
            if not isinstance(model, StumpModel):
                raise InvariantError("invariant broken: isinstance(model, StumpModel)")
            return model

        return release

    def erm(rng: RandomSource) -> Callable[[Any], Any]:
        def release(labelled: Any) -> StumpModel:
            X, y = _ssl_arrays(labelled)
            f = pcde_fit(X[y < 0], epsilon=epsilon / 2, delta=SSL_DELTA, bounds=UNIT, rng=rng, n=X.shape[0])
            cover = stump_cover(f.sample(20, rng), rng)
            errors = cover.errors(X[y >= 0], y[y >= 0].astype(np.uint8))
            return cover.member(int(np.argmin(errors)))

        return release

    return AuditSpec(
        name="semi-supervised",
        description=(
            f"semi-supervised stumps on [0,1], 40 unlabelled + 5 labelled rows, eps={epsilon:g}, "
            f"delta={SSL_DELTA:g}; the labelled row at 0.5 flips 1 -> 0"
        ),
        claimed=PrivacyGuarantee(epsilon=epsilon, delta=SSL_DELTA, mechanism="pcssl"),
        build=build,
        pair=SSL_PAIR,
        discretise=_stump_key,
        broken={"no_noise": erm},
        samples=4_000,
    )
