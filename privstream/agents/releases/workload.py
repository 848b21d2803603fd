"""What a node's slot may have to run: the learner call of a product, the default's public stand-in
input, and the worst case a slot is timed on at start-up.

>>> p = ReleasePolicy("s", None, (), window_size=3)
>>> data = WindowData(np.arange(5), np.ones(5, np.uint8), np.array([None] * 5), np.arange(5))
>>> stand_in(p, data)
(array([0, 0, 0]), array([0, 0, 0], dtype=uint8))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privstream.agents.fits import LearnerCall, NodeFit
from privstream.agents.interfaces import WindowData
from privstream.agents.releases.policy import (
    Product,
    ReleasePolicy,
    largest_input,
    learner_privacy,
    node_expected_size,
    node_sample_size,
    shuffles,
)
from privstream.learning.errors import InvariantError
from privstream.learning.planning import runtime_inputs
from privstream.learning.randomness import seeded


def stand_in(policy: ReleasePolicy, data: WindowData, level: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The data-independent input of a default release.

    Where n is private (``expected_size`` set): zero examples. Where n is public (count windows at
    the example level): n copies of one public example (the domain's first point, or the feature
    bounds' lower corner, labelled 0), so the learner derives the same parameters from the same
    public n, and the certificate has the same shape as any other window's.

    >>> p = ReleasePolicy("s", None, (), window_size=3)
    >>> data = WindowData(np.arange(5), np.ones(5, np.uint8), np.array([None] * 5), np.arange(5))
    >>> stand_in(p, data)
    (array([0, 0, 0]), array([0, 0, 0], dtype=uint8))
    """
    if policy.expected_size is not None:
        return data.xs[:0], data.ys[:0]
    n = node_sample_size(policy, level)
    if data.xs.ndim == 2:
        if policy.feature_bounds is None:
            raise InvariantError("invariant broken: policy.feature_bounds is not None")
        xs = np.repeat(policy.feature_bounds[:, 0][None, :], n, axis=0).astype(data.xs.dtype)
    else:
        xs = np.zeros(n, dtype=data.xs.dtype)
    return xs, np.zeros(n, dtype=data.ys.dtype)


def learner_call(
    policy: ReleasePolicy, product: Product, epsilon: float, delta: float, level: int, rng: Any
) -> LearnerCall:
    """The product's algorithm with every argument of a node's fit but the examples.

    Where n is private the algorithms derive everything they publish from the operator's
    expected size (a node of level j expects 2^j windows' worth), never from n.
    """
    size = {} if policy.expected_size is None else {"expected_size": node_expected_size(policy, level)}
    options: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "rng": rng, **size}
    if product.vector:
        return LearnerCall(product.algorithm, "vectors", options={**options, "bounds": policy.feature_bounds})
    if product.topic == "hypotheses":
        options |= {"alpha": policy.alpha, "beta": policy.beta}
        return LearnerCall(product.algorithm, "hypotheses", policy.hypothesis_class, options=options)
    return LearnerCall(
        product.algorithm, "sanitized", policy.hypothesis_class, labelled=product.labelled, options=options
    )


def slot_workload(
    policy: ReleasePolicy, level: int | None = None, seed: int = 0
) -> list[tuple[NodeFit, list[NodeFit]]]:
    """What the slot of a node of ``level`` (default: the top level) may have to run at worst,
    product by product: the default (the learner on its stand-in input) and the fit on each public
    runtime input of the largest input of such a node (:func:`largest_input`,
    :func:`privstream.learning.planning.runtime_inputs`), at the level's parameters. The service
    times it at start-up (:func:`privstream.agents.fits.slot_seconds`) to derive the slots.
    """
    level = policy.top_level if level is None else level
    n = largest_input(policy, level)
    space = policy.hypothesis_class if policy.feature_bounds is None else policy.feature_bounds
    if space is None:
        raise InvariantError("invariant broken: space is not None")
    inputs = runtime_inputs(space, n, seed)
    sample = WindowData(inputs[0][1][:0], inputs[0][2][:0], np.zeros(0, object), np.zeros(0, np.int64))
    work = []
    for product in policy.products:
        epsilon, delta = learner_privacy(policy, *product.cost(level))

        def call(product: Product = product, epsilon: float = epsilon, delta: float = delta) -> LearnerCall:
            return learner_call(policy, product, epsilon, delta, level, seeded(seed))

        default = NodeFit(call(), *stand_in(policy, sample, level))
        # the fit call as a node's: its input put in a random order (histograms) and capped there
        order = seeded(seed) if shuffles(policy) else None
        fits = [NodeFit(call(), xs, ys, order=order, cap=policy.max_node_examples) for _, xs, ys in inputs]
        work.append((default, fits))
    return work
