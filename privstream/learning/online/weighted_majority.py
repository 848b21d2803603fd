"""The weighted majority of a few online learners: each votes its prediction, weighted ``β^mistakes``.

No single online learner is best on every real stream and every order of it: the averaged
second-order Perceptron is best on clean, oddly scaled streams and unsteady on noisy ones; the
averaged Perceptron is steady but slow to whiten; the standardized learners are best on noisy
streams. This learner runs all of them on every example (each predicts, then learns, exactly as
alone) and predicts the label with the larger total weight, an expert's weight being
``β^m`` with ``m`` its mistakes on the examples before this one (:data:`BETA` = 9/10); an exact tie
goes to the expert with the fewest mistakes so far (the first such in :data:`EXPERTS` order).
This is the deterministic weighted majority algorithm (Littlestone & Warmuth, *The weighted
majority algorithm*, Information and Computation 108, 1994).

**Bound against the best expert** (LW94, Thm 2.1). On any stream, with ``K`` experts of which the
best makes ``m*`` mistakes, the weighted majority makes at most
``(log₂ K + m* log₂(1/β)) / log₂(2/(1 + β))`` mistakes (about ``2.05 m* + 31`` for ``K = 5``).
*Proof.* The total weight starts at ``K``. On each mistake of the vote, the experts that erred
carry at least half of it and are multiplied by ``β``, so it falls by at least the factor
``(1 + β)/2``; after ``M`` mistakes it is at most ``K ((1 + β)/2)^M`` and at least the best
expert's ``β^{m*}``. Taking ``log₂`` gives the bound. ∎ (:attr:`WeightedMajority.expert_bound`)

**Margin test.** The averaged Perceptron's inner Perceptron *is* the Perceptron on the stream, so
its mistakes obey Novikoff's ``(R/γ)²`` on a stream separable with margin ``γ``; more prove that no
halfspace has margin ``γ`` on it (``realizable`` turns ``False``), as for the averaged Perceptron
alone. The vote itself has no absolute mistake bound (``mistake_bound`` is ``None``).

Experts (same public feature map; the margin goes to the Perceptrons): ``second-order-perceptron``
(up to :data:`~privstream.learning.online.second_order.MAX_FEATURES` features),
``averaged-perceptron``, ``scaled-logistic``, ``scaled-passive-aggressive`` and ``logistic``.

**Determinism.** The weights are computed from integer mistake counts, row by row, so a batch
gives exactly the predictions and state of the same examples one at a time.

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (4000, 2)); y = (X[:, 0] > X[:, 1]).astype(int)
>>> flip = gen.random(4000) < 0.2; y[flip] = 1 - y[flip]       # 20% label noise
>>> wm = WeightedMajority([[0, 1], [0, 1]], margin=0.1)
>>> _ = wm.learn_many(X, y)
>>> wm.mistakes <= wm.expert_bound, wm.mistake_bound, wm.realizable
(True, None, False)
>>> [e.name for e in wm.experts][:2]
['second-order-perceptron', 'averaged-perceptron']
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.online.averaged_perceptron import AveragedPerceptron
from privstream.learning.online.base import STATE_VERSION, LinearLearner, OnlineStateError, check_margin
from privstream.learning.online.logistic import LogisticRegression
from privstream.learning.online.second_order import MAX_FEATURES as SECOND_ORDER_MAX_FEATURES
from privstream.learning.online.second_order import SecondOrderPerceptron
from privstream.learning.online.standardized import ScaledLogistic, ScaledPassiveAggressive

__all__ = ["BETA", "EXPERTS", "WeightedMajority"]

#: The experts, in the order that breaks ties (the second-order Perceptron only up to its width).
EXPERTS: tuple[type[LinearLearner], ...] = (
    SecondOrderPerceptron,
    AveragedPerceptron,
    ScaledLogistic,
    ScaledPassiveAggressive,
    LogisticRegression,
)
#: The factor an expert's weight takes at each of its mistakes.
BETA = Fraction(9, 10)


class WeightedMajority(LinearLearner):
    """The weighted majority vote of :data:`EXPERTS`; the averaged Perceptron's margin test."""

    name = "weighted-majority"
    _params = ("margin",)

    def __init__(self, bounds: object, margin: float = 0.1) -> None:
        super().__init__(bounds)
        self.margin = check_margin(margin)
        b = self.feature_map.bounds.tolist()
        self.experts: list[LinearLearner] = []
        for cls in EXPERTS:
            if cls is SecondOrderPerceptron and self.dimension > SECOND_ORDER_MAX_FEATURES:
                continue
            params: dict[str, float] = {"margin": self.margin} if "margin" in cls._params else {}
            self.experts.append(cls(b, **params))
        self._tester = next(e for e in self.experts if isinstance(e, AveragedPerceptron))

    @property
    def leader(self) -> LinearLearner:
        """The expert with the fewest mistakes so far (the first such): it breaks a tie of the vote."""
        counts = [e.mistakes for e in self.experts]
        return self.experts[counts.index(min(counts))]

    @property
    def vote_weights(self) -> list[float]:
        """Each expert's weight in the next vote, ``β^(m - min m)`` (the leader's is 1)."""
        counts = [e.mistakes for e in self.experts]
        return [float(BETA) ** (m - min(counts)) for m in counts]

    @property
    def expert_bound(self) -> int:
        """LW94's bound on the vote's mistakes from the best expert's so far (module docstring)."""
        best = min(e.mistakes for e in self.experts)
        beta = float(BETA)
        bound = (math.log2(len(self.experts)) + best * math.log2(1 / beta)) / math.log2(2 / (1 + beta))
        return math.floor(bound + 1e-9)

    @property
    def margin_mistakes(self) -> int | None:
        """The averaged Perceptron's inner Perceptron's mistakes (at most ``(R/γ)²`` if separable)."""
        return self._tester.margin_mistakes

    @property
    def margin_bound(self) -> int | None:
        return self._tester.margin_bound

    def _rule(self) -> np.ndarray:
        """The leader's rule: what ``weights()`` shows (the vote itself is not one halfspace)."""
        return self.leader._rule()

    def _vote(self, said: np.ndarray, so_far: np.ndarray) -> np.ndarray:
        """The weighted vote of ``said`` (experts × rows, 0/1); ``so_far``: mistakes before each row."""
        relative = so_far - so_far.min(axis=0)  # β^(m - min m): the same vote, no underflow
        weight = np.power(float(BETA), relative.astype(np.float64))
        ones = np.zeros(said.shape[1])
        zeros = np.zeros(said.shape[1])
        for k in range(said.shape[0]):  # a fixed order of additions, whatever the batch
            ones += np.where(said[k] == 1, weight[k], 0.0)
            zeros += np.where(said[k] == 0, weight[k], 0.0)
        leaders = np.argmin(so_far, axis=0)  # the first minimum
        tie = said[leaders, np.arange(said.shape[1])]
        out: np.ndarray = np.where(ones > zeros, 1, np.where(ones < zeros, 0, tie)).astype(np.uint8)
        return out

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        said = np.stack([(e._scores(Z) >= 0).astype(np.uint8) for e in self.experts])
        counts = np.array([[e.mistakes] for e in self.experts], dtype=np.int64)
        vote = self._vote(said, np.repeat(counts, Z.shape[0], axis=1))
        scores: np.ndarray = vote.astype(np.float64) - 0.5  # >= 0 exactly where the vote says 1
        return scores

    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        said = np.empty((len(self.experts), n), dtype=np.uint8)
        before = np.array([e.mistakes for e in self.experts], dtype=np.int64)
        for k, expert in enumerate(self.experts):
            said[k] = expert._learn(Z, y)
            expert.mistakes += int(np.count_nonzero(said[k] != y))
            expert.examples_seen += n
        wrong = (said != y).astype(np.int64)
        so_far = before[:, None] + np.cumsum(wrong, axis=1) - wrong  # this row's not yet counted
        return self._vote(said, so_far)

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "learner": self.name,
            "bounds": self.feature_map.bounds.tolist(),
            "margin": self.margin,
            "examples_seen": self.examples_seen,
            "mistakes": self.mistakes,
            "experts": [e.state_dict() for e in self.experts],
        }

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> Any:
        try:
            if d.get("version") != STATE_VERSION:
                raise OnlineStateError(f"unsupported state version {d.get('version')!r}")
            if d.get("learner") != cls.name:
                raise OnlineStateError(f"the state is of learner {d.get('learner')!r}, not {cls.name!r}")
            learner = cls(d["bounds"], margin=d["margin"])
            learner.examples_seen, learner.mistakes = int(d["examples_seen"]), int(d["mistakes"])
            if not 0 <= learner.mistakes <= learner.examples_seen:
                raise OnlineStateError("the state counts more mistakes than examples")
            saved = d["experts"]
            if not isinstance(saved, list) or len(saved) != len(learner.experts):
                raise OnlineStateError("the state has another set of experts")
            experts: list[LinearLearner] = []
            for fresh, state in zip(learner.experts, saved, strict=True):
                expert = type(fresh).from_state_dict(state)
                if expert.feature_map.bounds.tolist() != fresh.feature_map.bounds.tolist():
                    raise OnlineStateError("an expert's bounds differ from the learner's")
                if expert.examples_seen != learner.examples_seen:
                    raise OnlineStateError("an expert saw another number of examples than the learner")
                experts.append(expert)
            learner.experts = experts
            learner._tester = next(e for e in experts if isinstance(e, AveragedPerceptron))
            return learner
        except (KeyError, TypeError) as exc:
            raise OnlineStateError(f"malformed {cls.name} state: {exc!r}") from None
