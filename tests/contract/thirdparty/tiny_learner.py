"""A third party's learner, as a separate distribution would ship it (registered by an entry point).

``TinyLearner`` is the generic learner under its own name; ``tiny_audit_spec`` audits it on one
example of ``thresholds:8``, with a broken variant that spends three times its ε.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from privstream.learning.audit.harness import AuditSpec
from privstream.learning.hypothesis_classes import Thresholds
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.generic.learner import GenericLearner
from privstream.learning.randomness import RandomSource

EPSILON = 1.0
CLASS = Thresholds(8)
PAIR: tuple[Any, Any] = (((7,), (1,)), ((7,), (0,)))


class TinyLearner(GenericLearner):
    """The generic learner, registered by a third party as ``tiny``."""

    name = "tiny"


def tiny_audit_spec(epsilon: float = EPSILON) -> AuditSpec:
    def at(spent: float) -> Callable[[RandomSource], Callable[[Any], Any]]:
        def factory(rng: RandomSource) -> Callable[[Any], Any]:
            def release(dataset: Any) -> Any:
                xs, ys = (np.asarray(column, dtype=np.int64) for column in dataset)
                return TinyLearner().fit(CLASS, xs, ys.astype(np.uint8), epsilon=spent, rng=rng).hypothesis

            return release

        return factory

    return AuditSpec(
        name="tiny",
        description=f"tiny (the generic learner) on thresholds:8 at eps={epsilon:g}; (7, 1) vs (7, 0)",
        claimed=ExponentialMechanism(epsilon).guarantee(),
        build=at(epsilon),
        pair=PAIR,
        discretise=lambda h: json.dumps(h.to_dict(), sort_keys=True),
        broken={"spends_triple": at(3 * epsilon)},
        samples=3000,
    )
