"""Online learners on feature vectors: predict each example's label, then learn it.

The feature-vector analogue of the SOA (:mod:`privstream.learning.soa`). Every learner maps the
features to ``[-1, 1]`` with the stream's *public* bounds and appends a constant 1
(:class:`~privstream.learning.online.base.FeatureMap`), and follows one interface
(:class:`~privstream.learning.online.base.OnlineLearner`): ``learn_one``/``learn_many`` (the
prediction is made before the label is learned), ``predict_one``/``predict_many``, ``mistakes``,
``mistake_bound``, ``realizable`` and an exact JSON snapshot (``state_dict``/:func:`learner_from_state`).

* ``perceptron``: at most ``(R/γ)²`` mistakes on a stream separable with margin ``γ``; more proves
  that no halfspace has that margin on the stream (:mod:`.perceptron`);
* ``averaged-perceptron``: predicts with the Perceptron's average rule (better on noisy streams),
  and keeps the Perceptron's proof of non-separability (:mod:`.averaged_perceptron`);
* ``second-order-perceptron``: the second-order Perceptron, averaged: it whitens the features by
  the correlation of its mistakes, so it does not depend on where the bounds put the origin; it
  keeps the Perceptron's proof of non-separability; at most 256 features (:mod:`.second_order`);
* ``logistic``: online logistic regression with AdaGrad steps (:mod:`.logistic`);
* ``scaled-logistic`` and ``scaled-passive-aggressive``: logistic regression and the
  passive-aggressive classifier on features standardized by running moments (:mod:`.standardized`);
* ``weighted-majority``: the weighted majority vote of the second-order Perceptron (up to 256
  features), the averaged Perceptron and the three others, at most about ``2.05 m* + 31`` mistakes
  where the best of them makes ``m*``; it keeps the averaged Perceptron's margin test
  (:mod:`.weighted_majority`);
* ``block-vote``: the weighted majority of six cheap experts (the prior, averaged Perceptrons on
  raw and standardized features, standardized logistic regression and passive-aggressive, AdaGrad
  logistic regression) that take their steps once per block of examples, so every numpy call
  covers a block; at most about ``2.05 m* + 35`` mistakes; the exact Perceptron's margin test
  beside it (:mod:`.block_vote`).

For labels ``0..K-1`` (``K`` classes), :class:`~privstream.learning.online.multiclass.MulticlassPerceptron`
predicts the class of the highest linear score, with at most ``2(d + 1)/γ²`` mistakes on a stream
separable with margin ``γ`` (:mod:`.multiclass`); it is not in :data:`ONLINE_LEARNERS`, whose
learners predict 0/1. :func:`make_stream_learner` builds a stream's learner from its classes: on a
stream of more than two classes ``auto`` is the multi-class Perceptron, and a 0/1 learner is refused.

>>> make_stream_learner("auto", [[0, 1]] * 3, classes=10).name
'multiclass-perceptron'
>>> make_stream_learner("logistic", [[0, 1]], classes=3)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privstream.learning.online.base.OnlineInputError: online_learner 'logistic' predicts 0/1 labels; ...

The default, :data:`DEFAULT_ONLINE_LEARNER` ``"auto"``, is ``block-vote``
(:func:`resolve_online_learner`): chosen on real streams in many orders, where no single learner
is best on all (the real-data benchmark's online table), as accurate there as ``weighted-majority``
and several times faster (``benchmarks/bench_online_default.py``).

>>> sorted(ONLINE_LEARNERS)  # doctest: +NORMALIZE_WHITESPACE
['averaged-perceptron', 'block-vote', 'logistic', 'perceptron', 'scaled-logistic',
 'scaled-passive-aggressive', 'second-order-perceptron', 'weighted-majority']
>>> make_online_learner("auto", [[0, 1]] * 3).name
'block-vote'
>>> p = make_online_learner("perceptron", [[0, 1]], margin=0.5)
>>> p.learn_one([0.9], 1), p.learn_one([0.1], 0), p.mistakes, p.mistake_bound
(1, 1, 1, 8)
>>> learner_from_state(p.state_dict()).state_dict() == p.state_dict()
True
"""

from __future__ import annotations

from typing import Any

from privstream.learning.online.averaged_perceptron import AveragedPerceptron
from privstream.learning.online.base import (
    FeatureMap,
    LinearLearner,
    OnlineInputError,
    OnlineLearner,
    OnlineStateError,
    mistake_bound,
    radius,
)
from privstream.learning.online.block_vote import BlockVote
from privstream.learning.online.logistic import LogisticRegression
from privstream.learning.online.multiclass import MulticlassPerceptron, check_classes
from privstream.learning.online.perceptron import Perceptron
from privstream.learning.online.second_order import MAX_FEATURES as SECOND_ORDER_MAX_FEATURES
from privstream.learning.online.second_order import SecondOrderPerceptron
from privstream.learning.online.standardized import ScaledLogistic, ScaledPassiveAggressive
from privstream.learning.online.weighted_majority import WeightedMajority
from privstream.learning.parameters import check_parameters

__all__ = [
    "AUTO",
    "DEFAULT_ONLINE_LEARNER",
    "MULTICLASS",
    "ONLINE_LEARNERS",
    "SECOND_ORDER_MAX_FEATURES",
    "AveragedPerceptron",
    "BlockVote",
    "FeatureMap",
    "LogisticRegression",
    "MulticlassPerceptron",
    "OnlineInputError",
    "OnlineLearner",
    "OnlineStateError",
    "Perceptron",
    "ScaledLogistic",
    "ScaledPassiveAggressive",
    "SecondOrderPerceptron",
    "StreamLearner",
    "WeightedMajority",
    "check_online_parameters",
    "learner_from_state",
    "make_online_learner",
    "make_stream_learner",
    "mistake_bound",
    "radius",
    "resolve_online_learner",
    "resolve_stream_learner",
]

ONLINE_LEARNERS: dict[str, type[LinearLearner]] = {
    cls.name: cls
    for cls in (
        Perceptron,
        AveragedPerceptron,
        SecondOrderPerceptron,
        LogisticRegression,
        ScaledLogistic,
        ScaledPassiveAggressive,
        WeightedMajority,
        BlockVote,
    )
}
#: Not a learner: the name of the default (the block vote; the multi-class Perceptron for K > 2).
AUTO = "auto"
DEFAULT_ONLINE_LEARNER = AUTO
#: The online learner of labels ``0..K-1``.
MULTICLASS = MulticlassPerceptron.name
#: A stream's online learner: a 0/1 learner, or the multi-class Perceptron.
StreamLearner = LinearLearner | MulticlassPerceptron


def resolve_online_learner(name: str, features: int) -> str:
    """The learner ``name`` stands for on ``features`` features (``"auto"``: see the module docstring).

    >>> [resolve_online_learner(name, d) for name, d in (("auto", 256), ("auto", 257), ("logistic", 9))]
    ['block-vote', 'block-vote', 'logistic']
    """
    del features  # the block vote fits every width
    return BlockVote.name if name == AUTO else name


def resolve_stream_learner(name: str, features: int, classes: int = 2) -> str:
    """The learner that runs on a stream of ``features`` features and ``classes`` classes when its
    ``online_learner`` is ``name`` (what :func:`make_stream_learner` builds).

    >>> [resolve_stream_learner("auto", 4, classes) for classes in (2, 10)]
    ['block-vote', 'multiclass-perceptron']
    >>> resolve_stream_learner("perceptron", 4)
    'perceptron'
    """
    if name == AUTO and classes != 2:
        return MULTICLASS
    return resolve_online_learner(name, features)


def make_online_learner(name: str, bounds: object, **params: Any) -> LinearLearner:
    """A fresh learner ``name`` (or ``"auto"``) on features within ``bounds``; ``params`` as its
    constructor takes.

    >>> make_online_learner("logistic", [[0, 1]], learning_rate=0.1).learning_rate
    0.1
    """
    if name == AUTO:
        name = resolve_online_learner(name, FeatureMap(bounds).dimension)
    cls = ONLINE_LEARNERS.get(name)
    if cls is None:
        known = ", ".join([AUTO, *sorted(ONLINE_LEARNERS)])
        raise OnlineInputError(f"unknown online learner {name!r}; known: {known}")
    try:
        return cls(bounds, **params)
    except TypeError as exc:  # an unknown parameter name
        raise OnlineInputError(f"online learner {name!r}: {exc}") from None


def make_stream_learner(name: str, bounds: object, classes: int = 2, **params: Any) -> StreamLearner:
    """The online learner ``name`` of a stream of ``classes`` classes: :func:`make_online_learner`
    for 0/1 labels, the multi-class Perceptron for ``"multiclass-perceptron"`` or (with more than two
    classes) ``"auto"``; a 0/1 learner on more than two classes is refused (``OnlineInputError``)."""
    if name != MULTICLASS and check_classes(classes) == 2:
        return make_online_learner(name, bounds, **params)
    if name not in (AUTO, MULTICLASS):
        raise OnlineInputError(
            f"online_learner {name!r} predicts 0/1 labels; a stream of {classes} classes needs "
            f"{MULTICLASS!r} (or {AUTO!r})"
        )
    check_parameters("online learner", MULTICLASS, MulticlassPerceptron, params, skip=("bounds", "classes"))
    return MulticlassPerceptron(bounds, classes=classes, **params)


def check_online_parameters(name: str, params: dict[str, Any]) -> None:
    """Refuse ``params`` that the online learner ``name`` (or ``"auto"``) does not take or that
    are outside their ranges (:func:`privstream.learning.parameters.check_parameters`); an unknown
    learner is left to :func:`make_online_learner`.

    >>> check_online_parameters("perceptron", {"margn": 0.1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privstream.learning.errors.ParameterError: unknown parameter 'margn' ... 'margin'? (it takes margin)
    """
    resolved = BlockVote.name if name == AUTO else name
    cls = ONLINE_LEARNERS.get(resolved)
    if cls is not None:
        check_parameters("online learner", name, cls, params, skip=("bounds",))


def learner_from_state(state: dict[str, Any]) -> StreamLearner:
    """The learner a :meth:`~privstream.learning.online.base.LinearLearner.state_dict` (or the
    multi-class Perceptron's) describes."""
    name = state.get("learner", "") if isinstance(state, dict) else ""
    if name == MULTICLASS:
        return MulticlassPerceptron.from_state_dict(state)
    cls = ONLINE_LEARNERS.get(name)
    if cls is None:
        raise OnlineStateError("not the state of a known online learner")
    learner: LinearLearner = cls.from_state_dict(state)
    return learner
