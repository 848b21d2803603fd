"""The generic private learner: the exponential mechanism over a finite class [S §3, Thm 3.3].

Algorithm A' (Kasiviswanathan–Lee–Nissim–Raskhodnikova–Smith; as presented in [S], with the
notes' sign erratum corrected): output ``h ∈ H`` with probability

    P_S(h) = exp(-ε·errors_S(h)/2) / Σ_{h'∈H} exp(-ε·errors_S(h')/2).

**Privacy (ε, 0), replace-one neighbours.** The score ``-errors_S(h)`` has sensitivity 1:
replacing one example changes each ``errors_S(h)`` by at most 1. So for neighbours S, S' and
every h, the numerator changes by a factor of at most ``e^{ε/2}`` and the normaliser by at most
``e^{ε/2}`` (each of its terms does), hence ``P_S(h) <= e^ε·P_{S'}(h)``; events are unions of
outcomes. This holds for every sample (realizable or not) and every n, including n = 0 (the
output is then uniform over H, which reveals nothing). The sampler is exact (no float softmax),
so the bound is not eroded by rounding.

**Add/remove-one (``expected_size=m``, n private).** Adding or removing one example changes each
``errors_S(h)`` by at most 1 too, so the argument above gives the same (ε, 0) under add/remove
neighbours, for every n. The reported fields never used n except for
``accuracy_guarantee_holds``, which then compares the theorem's n with m instead.

**Exact and efficient sampling.** H is never enumerated. For intervals,
:mod:`~privstream.learning.private_learners.generic.interval_sampler` samples the O(k²) blocks (k distinct
sample points) by exact rejection from a factorised proposal, in O(n log n). For the other
classes :func:`error_levels` gives the exact number ``c_e`` of hypotheses with ``e`` errors
(``e = 0..n``; these counts may be astronomically large Python ints), the exact exponential
mechanism over blocks (:meth:`privstream.learning.mechanisms.ExponentialMechanism.select_member`)
picks level e with probability ``∝ c_e·exp(-ε·e/2)`` without floating point, and a uniform
index ``r < c_e`` from the same random source picks the member. Then
``Pr[h] = c_e·exp(-ε·e/2)/Z · 1/c_e``, which is ``P_S(h)`` above. Cost per run: O(n log n) for
thresholds, points and intervals, O(|H|·N/8·log n) for file classes, plus the mechanism over
at most n+1 blocks. No size of the data can make a run fail: a window of any size is released.

**Output.** A member of the class (proper), as its canonical :class:`Hypothesis`, so two
releases of the same function compare (and serialise) equal.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass, Intervals
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.base import (
    LearnerResult,
    check_fit,
    check_fit_parameters,
    check_sample,
    neighbouring_relation,
)
from privstream.learning.private_learners.generic.error_levels import ErrorLevels, error_levels
from privstream.learning.private_learners.generic.interval_sampler import sample_interval
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "MECHANISM",
    "GenericLearner",
    "exponential_mechanism",
    "generic_sample_size",
    "level_probabilities",
    "output_law",
    "sample_hypothesis",
]

MECHANISM = "generic-exponential"


def generic_sample_size(class_size: int, alpha: float, beta: float, epsilon: float) -> int:
    """The n at which A' is an (α, β)-accurate proper PAC learner for a realizable class.

    ``n_generic(|H|, α, β, ε) = ceil(max(8·ln(2|H|/β)/α, 4·ln(2|H|/β)/(α·ε)))``.

    Derivation (generalising the proof of [S Thm 3.3], with its constants corrected;
    the target f ∈ H, D any distribution, ``H_bad = {h : err_D(h) > α}``):

    1. *Bad hypotheses look bad.* For ``h ∈ H_bad`` with ``p = err_D(h) > α``, ``n·err_S(h)`` is
       Binomial(n, p); the multiplicative Chernoff bound ``Pr[X <= (1-δ)μ] <= exp(-δ²μ/2)`` with
       δ = 1/2 gives ``Pr[err_S(h) <= α/2] <= Pr[err_S(h) <= p/2] <= exp(-np/8) < exp(-nα/8)``.
       A union bound over at most |H| bad hypotheses: ``Pr[∃h ∈ H_bad, err_S(h) <= α/2] <=
       |H|·exp(-nα/8) <= β/2`` iff ``n >= 8·ln(2|H|/β)/α``.
    2. *The mechanism picks a good empirical hypothesis.* The data are realizable, so f has 0
       errors and the normaliser is ``Z >= 1``; hence ``Pr[errors_S(ĥ) >= t] <= |H|·e^{-εt/2}``.
       With ``t = nα/2`` this is ``<= β/2`` iff ``n >= 4·ln(2|H|/β)/(α·ε)``.
    3. If ĥ is bad and event 1 fails, ``errors_S(ĥ) > nα/2 = t``; so
       ``Pr[err_D(ĥ) > α] <= β/2 + β/2 = β``.

    At α = β = 1/4 this is ``n_S33 = ceil(max(32 ln(8|H|), 16 ln(8|H|)/ε))``:

    >>> generic_sample_size(1025, 0.25, 0.25, 1.0)
    289

    The guarantee is for realizable data (some h ∈ H has error 0 on D); a private learner
    cannot verify that. ε > 1 is allowed (the derivation does not need ε <= 1).
    """
    if isinstance(class_size, bool) or not isinstance(class_size, int) or class_size < 1:
        raise ValueError(f"class_size must be an int >= 1, got {class_size!r}")
    eps, _, a, b, _ = check_fit_parameters(epsilon, 0.0, alpha, beta)
    log_term = math.log(2 * class_size) - math.log(b)  # math.log is exact enough for huge ints
    return math.ceil(max(8 * log_term / a, 4 * log_term / (a * eps)))


def _blocks(levels: ErrorLevels) -> list[tuple[int, int]]:
    """The mechanism's blocks: ``(count, score = -errors)`` for every level (empty ones weigh 0)."""
    return [(count, -e) for e, count in enumerate(levels.counts)]


def level_probabilities(levels: ErrorLevels, epsilon: float) -> list[float]:
    """The exact law of the selected level, ``c_e·exp(-ε·e/2)/Z`` (floats; for tests and docs only).

    A hypothesis with ``e`` errors is released with probability ``level_probabilities[e] / c_e``.
    """
    return ExponentialMechanism(epsilon, 1).block_probabilities(_blocks(levels))


def output_law(
    hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, epsilon: float, *, sensitivity: float = 1
) -> dict[Hypothesis, float]:
    """``P_S(h)`` for every h of a *small* class, from the blocks (``Pr[level e] / c_e``); no sampling.

    The exact checks (tests, the audit's ``exact``) use it; ``sensitivity`` as in :func:`sample_hypothesis`.
    """
    points, labels = check_sample(hclass, xs, ys)
    levels = error_levels(hclass, points, labels)
    law = ExponentialMechanism(epsilon, sensitivity).block_probabilities(_blocks(levels))
    return {levels.member(e, r): law[e] / c for e, c in levels.nonempty() for r in range(c)}


def sample_hypothesis(
    levels: ErrorLevels, epsilon: float, rng: RandomSource, *, sensitivity: float = 1
) -> Hypothesis:
    """One exact draw of the exponential mechanism over the class: a level, then a uniform member.

    ``sensitivity`` is 1 for A' (the score's true sensitivity); the privacy audit passes 1/2 to
    build its deliberately broken variant (``exp(-ε·errors)``, really 2ε-DP).
    """
    mechanism = ExponentialMechanism(epsilon, sensitivity, rng=rng)
    level, index = mechanism.select_member(_blocks(levels))
    return levels.member(level, index)


def exponential_mechanism(
    hclass: HypothesisClass,
    xs: np.ndarray,
    ys: np.ndarray,
    epsilon: float,
    rng: RandomSource,
    *,
    sensitivity: float = 1,
) -> Hypothesis:
    """One exact draw of A' on the validated sample: the interval sampler, or the error levels.

    ``sensitivity`` as in :func:`sample_hypothesis`.
    """
    if isinstance(hclass, Intervals):
        return sample_interval(hclass, xs, ys, epsilon, rng, sensitivity=sensitivity)
    return sample_hypothesis(error_levels(hclass, xs, ys), epsilon, rng, sensitivity=sensitivity)


class GenericLearner:
    """A' as a :class:`~privstream.learning.private_learners.base.PrivateLearner` (name ``"generic"``).

    ``fit`` returns a proper hypothesis with an (ε, 0)-DP guarantee (replace-one, or add/remove-one
    with ``expected_size``); ``delta`` is accepted for the common interface and the reported δ is 0.

    >>> import numpy as np
    >>> from privstream.learning.hypothesis_classes import Thresholds
    >>> res = GenericLearner().fit(Thresholds(8), np.array([], dtype=np.int64), np.array([], dtype=np.uint8),
    ...                            epsilon=1.0, expected_size=300)
    >>> res.neighbouring_relation, res.sample_size, res.accuracy_guarantee_holds
    ('add-remove-one', 0, True)
    """

    name = "generic"
    mechanism = MECHANISM

    def fit(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray,
        *,
        epsilon: float,
        delta: float = 0.0,
        alpha: float = 0.25,
        beta: float = 0.25,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> LearnerResult:
        eps, _, a, b, m, points, labels = check_fit(
            hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, expected_size=expected_size
        )
        hypothesis = exponential_mechanism(hclass, points, labels, eps, resolve(rng))
        n = int(points.shape[0])
        needed = generic_sample_size(hclass.size, a, b, eps)
        parameters: dict[str, Any] = {
            "alpha": a,
            "beta": b,
            "score": "-errors",
            "sensitivity": 1,
            "class_size": hclass.size,
            "theorem": "Sivakumar Thm 3.3, explicit constants (realizable)",
        }
        if m is not None:
            parameters["expected_size"] = m
        return LearnerResult(
            hypothesis=hypothesis,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=0.0,
            proper=True,
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=needed,
            accuracy_guarantee_holds=(n if m is None else m) >= needed,
            neighbouring_relation=neighbouring_relation(m),
        )

    def __repr__(self) -> str:
        return "GenericLearner()"
