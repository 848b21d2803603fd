"""The block vote: a weighted majority of six cheap experts whose steps are taken once per block.

The weighted majority of :mod:`.weighted_majority` runs five learners that each step after every
example, a few numpy calls per example each. This learner keeps the vote and replaces its experts
by ones that predict a whole **block** of consecutive examples with the rule they held when the
block began, and take the sum of the block's steps at its end (delayed updates): every numpy call
then covers a block, and the cost per example falls as the blocks grow.

**Blocks.** They are a function of the example's position alone (:func:`block_length`): the first
:data:`ONE_AT_A_TIME` = 128 examples are blocks of one (learned one at a time, as sequential
learners would: short streams need every early step), then the block starting at example ``t``
(0-based) has ``min(BLOCK_MAX, t // BLOCK_GROWTH)`` = ``min(256, t // 16)`` examples, 256 from
example 4,096 on. A block may span several calls: its examples wait in the state until it is
complete, and its steps are computed once, on the whole block, so a batch gives the same
predictions and state as one example at a time, however the stream is cut (a prediction is a
row's own product with a rule; the moments are ``numpy.cumsum`` in arrival order).

**Experts** (each predicts, then accumulates its step; ``t = 2y - 1``):

* ``prior``: the more frequent label so far (ties 1): the constant rule, right where no feature
  helps;
* ``averaged-perceptron`` on the mapped examples ``z`` (:mod:`.averaged_perceptron`): the
  Perceptron's steps ``t·z`` on the examples its block-start vector gets wrong, predictions from
  the sum of the vectors held;
* ``scaled-averaged-perceptron``: the same on ``z`` standardized by running moments
  (:mod:`.standardized`; the moments after an example for its step, before it for its prediction);
* ``scaled-logistic``: log-loss SGD steps ``-η (σ(m) - y) s`` on standardized ``s``, ``η = 0.01``;
* ``scaled-passive-aggressive``: the PA-I steps ``min(1, ℓ/‖s‖²)·t·s`` of the block's examples,
  averaged over the block (a sum of many steps each sized to fix one example alone would
  overshoot);
* ``logistic``: log-loss steps with AdaGrad sizes on ``z`` (:mod:`.logistic`), ``η = 0.5``.

**Vote and bound.** The vote is the deterministic weighted majority (Littlestone & Warmuth 1994):
weights ``β^m`` (``β`` = 9/10, ``m`` an expert's mistakes before the example), a tie to the expert
with the fewest mistakes. Its proof holds for any experts, so on any stream it makes at most
``(log₂ 6 + m* log₂(1/β)) / log₂(2/(1 + β))`` mistakes, about ``2.05 m* + 35``, where the best
expert makes ``m*`` (:attr:`BlockVote.expert_bound`; the proof is in :mod:`.weighted_majority`).

**Margin test.** A delayed Perceptron does not obey Novikoff's bound, so the test runs the exact
Perceptron (:mod:`.perceptron`) beside the vote: ``realizable`` turns ``False`` once its mistakes
pass ``(R/γ)²``, which proves that no halfspace has margin ``γ`` on the stream. That verdict is
final, so the Perceptron stops there (``margin_mistakes`` stays at ``⌊(R/γ)²⌋ + 1``): on a noisy
stream it costs only its first few thousand examples, on a separable one a few numpy calls per
mistake.

>>> import numpy as np
>>> gen = np.random.default_rng(0)
>>> X = gen.uniform(0, 1, (6000, 2)); y = (X[:, 0] > X[:, 1]).astype(int)
>>> flip = gen.random(6000) < 0.2; y[flip] = 1 - y[flip]       # 20% label noise
>>> vote = BlockVote([[0, 1], [0, 1]], margin=0.1)
>>> p = vote.learn_many(X, y)
>>> float(np.mean(p[3000:] == y[3000:])) > 0.75, vote.mistakes <= vote.expert_bound, vote.realizable
(True, True, False)
>>> [block_length(t) for t in (0, 127, 128, 1000, 40_000)]
[1, 1, 8, 62, 256]
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.online.base import LinearLearner, OnlineStateError, check_margin, margins
from privstream.learning.online.perceptron import FIRST_BLOCK, MAX_BLOCK, Perceptron
from privstream.learning.online.standardized import TINY_VARIANCE, Standardized

__all__ = ["BETA", "BLOCK_GROWTH", "BLOCK_MAX", "EXPERTS", "ONE_AT_A_TIME", "BlockVote", "block_length"]

#: The experts, in the order that breaks ties of the vote (module docstring).
EXPERTS = (
    "prior",
    "averaged-perceptron",
    "scaled-averaged-perceptron",
    "scaled-logistic",
    "scaled-passive-aggressive",
    "logistic",
)
#: The factor an expert's weight takes at each of its mistakes.
BETA = Fraction(9, 10)
#: The first examples are learned one at a time (blocks of 1) ...
ONE_AT_A_TIME = 128
#: ... then a block starting at example ``t`` has ``t // BLOCK_GROWTH`` examples ...
BLOCK_GROWTH = 16
#: ... and at most this many.
BLOCK_MAX = 256
#: The scaled logistic regression's constant step and the AdaGrad logistic regression's base step.
SCALED_LOGISTIC_RATE = 0.01
ADAGRAD_RATE = 0.5
#: PA-I's cap on a step (its aggressiveness ``C``).
PA_CAP = 1.0


def block_length(start: int) -> int:
    """The number of examples in the block that starts at example ``start`` (0-based)."""
    return 1 if start < ONE_AT_A_TIME else min(BLOCK_MAX, start // BLOCK_GROWTH)


def _sigmoid(m: np.ndarray) -> np.ndarray:
    """``σ(m)`` elementwise, without overflow."""
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * m))
    return out


def _margins(Z: np.ndarray, rules: np.ndarray) -> np.ndarray:
    """``⟨v, z⟩`` for each row and rule (rows × rules), each a row's own reduction (:func:`margins`)."""
    out: np.ndarray = np.multiply(Z[:, None, :], rules[None, :, :]).sum(axis=2)
    return out


# The rows of the rules matrix: the averaged Perceptron's anchor and vector on z, AdaGrad's
# weights on z, then the standardized averaged Perceptron's anchor and vector, the logistic
# regression's and the PA's weights on standardized rows.
_AP, _VP, _U, _AS, _VS, _WL, _WPA = range(7)
_ON_Z = slice(_AP, _U + 1)
_ON_BEFORE = slice(_AS, _WPA + 1)
_ON_AFTER = slice(_VS, _WPA + 1)
# Which row of (z, s, z²) each of the six accumulated steps multiplies: the averaged Perceptron
# on z, the standardized one, the logistic, the PA, AdaGrad's gradient and its square.
_BASE = np.array([0, 1, 1, 1, 0, 2])


class BlockVote(LinearLearner):
    """The weighted majority of :data:`EXPERTS` stepping once per block; the Perceptron's margin test."""

    name = "block-vote"
    expert_names = EXPERTS
    _params = ("margin",)
    _counters = ("_ones", "_block_start")
    # The experts' rules at the block's start (rows above), AdaGrad's squared gradients, the
    # running sums of z and z², and the current block's accumulated steps (one row per step).
    _arrays = ("_rules", "_g2", "_sum", "_sumsq", "_block_sum", "_block_sumsq")

    def __init__(self, bounds: object, margin: float = 0.1) -> None:
        super().__init__(bounds)
        self.margin = check_margin(margin)
        p = self.dimension + 1
        self._rules = np.zeros((7, p))
        self._g2, self._sum, self._sumsq = np.zeros(p), np.zeros(p), np.zeros(p)
        self._block_sum, self._block_sumsq = np.zeros(p), np.zeros(p)  # the sums at the block's start
        self._pending = np.zeros((0, p))  # the current block's examples so far (z, standardized) and labels
        self._pending_after = np.zeros((0, p))
        self._pending_labels = np.zeros(0, dtype=np.uint8)
        self._ones = 0  # labels 1 so far (the prior)
        self._block_start = 0  # the example the current block started at
        self.expert_mistakes = [0] * len(EXPERTS)
        self._tester = Perceptron(self.feature_map.bounds.tolist(), margin=self.margin)

    # -- the margin test and the bound -----------------------------------------------------------
    @property
    def margin_mistakes(self) -> int:
        """The exact Perceptron's mistakes (it stops at one past ``(R/γ)²``: see the docstring)."""
        return self._tester.mistakes

    @property
    def margin_bound(self) -> int:
        return self._tester.mistake_bound

    @property
    def expert_bound(self) -> int:
        """LW94's bound on the vote's mistakes from the best expert's so far."""
        beta = float(BETA)
        best = min(self.expert_mistakes)
        bound = (math.log2(len(EXPERTS)) + best * math.log2(1 / beta)) / math.log2(2 / (1 + beta))
        return math.floor(bound + 1e-9)

    @property
    def leader(self) -> str:
        """The expert with the fewest mistakes so far (the first such): it breaks a tie of the vote."""
        return EXPERTS[self.expert_mistakes.index(min(self.expert_mistakes))]

    # -- rules -----------------------------------------------------------------------------------
    def _on_z(self, w: np.ndarray) -> np.ndarray:
        """A standardized rule ``⟨w, (z - μ)/σ⟩`` as one vector on ``z``."""
        c = max(self.examples_seen, 1)
        mean = self._sum / c
        variance = self._sumsq / c - mean * mean
        spread = (variance > TINY_VARIANCE) & (self.examples_seen > 0)
        inverse = np.where(spread, 1.0 / np.sqrt(np.where(spread, variance, 1.0)), 0.0)
        v: np.ndarray = w * inverse
        v[-1] = w[-1] - float(np.multiply(v[:-1], mean[:-1]).sum())
        return v

    @property
    def vote_weights(self) -> list[float]:
        """Each expert's weight in the next vote, ``β^(m - min m)`` (the leader's is 1)."""
        best = min(self.expert_mistakes)
        return [float(BETA) ** (m - best) for m in self.expert_mistakes]

    def expert_rules(self) -> list[tuple[np.ndarray, float]]:
        """Each expert's rule for the next example as ``⟨w, x⟩ + b >= 0`` on the raw features
        (:data:`EXPERTS` order; the prior's is ``w = 0``)."""
        return [self.feature_map.weights_on_features(self._expert_rule(name)) for name in EXPERTS]

    def _rule(self) -> np.ndarray:
        """The leader's rule for the next example (the vote itself is not one halfspace)."""
        return self._expert_rule(self.leader)

    def _expert_rule(self, leader: str) -> np.ndarray:
        held = self.examples_seen - self._block_start + 1
        r = self._rules
        if leader == "prior":
            v = np.zeros(self.dimension + 1)
            v[-1] = 1.0 if 2 * self._ones >= self.examples_seen else -1.0
            return v
        if leader == "averaged-perceptron":
            rule: np.ndarray = r[_AP] + held * r[_VP]
            return rule
        if leader == "logistic":
            u: np.ndarray = r[_U].copy()
            return u
        if leader == "scaled-averaged-perceptron":
            return self._on_z(r[_AS] + held * r[_VS])
        return self._on_z(r[_WL] if leader == "scaled-logistic" else r[_WPA])

    def _said(self, on_z: np.ndarray, on_before: np.ndarray, held: np.ndarray) -> np.ndarray:
        """The five linear experts' predictions (experts × rows) from their block-start margins;
        ``held``: how many times each row's averaged rule counts the block-start vector."""
        return np.stack(
            [
                on_z[:, 0] + held * on_z[:, 1] >= 0,
                on_before[:, 0] + held * on_before[:, 1] >= 0,
                on_before[:, 2] >= 0,
                on_before[:, 3] >= 0,
                on_z[:, 2] >= 0,
            ]
        )

    def predict_experts(self, X: object) -> np.ndarray:
        """Each expert's labels for ``X`` with the current rules (experts × rows, :data:`EXPERTS`
        order), without learning: what the next vote would weigh."""
        Z = self.feature_map.transform(X)
        return self._experts_said(Z)

    def _experts_said(self, Z: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        counts = np.full(n, self.examples_seen)
        before = Standardized.standardize(Z, np.tile(self._sum, (n, 1)), np.tile(self._sumsq, (n, 1)), counts)
        held = np.full(n, float(self.examples_seen - self._block_start + 1))
        said = np.empty((len(EXPERTS), n), dtype=np.uint8)
        said[0] = 2 * self._ones >= self.examples_seen
        said[1:] = self._said(
            _margins(Z, self._rules[_ON_Z]), _margins(before, self._rules[_ON_BEFORE]), held
        )
        return said

    def _scores(self, Z: np.ndarray) -> np.ndarray:
        n = Z.shape[0]
        said = self._experts_said(Z)
        so_far = np.repeat(np.array(self.expert_mistakes, dtype=np.int64)[:, None], n, axis=1)
        return np.where(self._vote(said, so_far) == 1, 1.0, -1.0)

    @staticmethod
    def _vote(said: np.ndarray, so_far: np.ndarray) -> np.ndarray:
        """The weighted vote of ``said`` (experts × rows); ``so_far``: mistakes before each row."""
        relative = so_far - so_far.min(axis=0)
        weight = np.power(float(BETA), relative.astype(np.float64))
        ones = np.zeros(said.shape[1])
        zeros = np.zeros(said.shape[1])
        for k in range(said.shape[0]):  # a fixed order of additions, whatever the batch
            ones += np.where(said[k] == 1, weight[k], 0.0)
            zeros += np.where(said[k] == 0, weight[k], 0.0)
        tie = said[np.argmin(so_far, axis=0), np.arange(said.shape[1])]
        out: np.ndarray = np.where(ones > zeros, 1, np.where(ones < zeros, 0, tie)).astype(np.uint8)
        return out

    # -- learning --------------------------------------------------------------------------------
    def _learn(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        n, seen0 = Z.shape[0], self.examples_seen
        self._test(Z, y)
        # The running moments before each row and the labels 1 before it, for all rows at once.
        sums = np.cumsum(np.vstack([self._sum, Z]), axis=0)
        sumsq = np.cumsum(np.vstack([self._sumsq, Z * Z]), axis=0)
        counts = seen0 + np.arange(n + 1)
        before = Standardized.standardize(Z, sums[:-1], sumsq[:-1], counts[:-1])
        after = Standardized.standardize(Z, sums[1:], sumsq[1:], counts[1:])
        ones = self._ones + np.concatenate([[0], np.cumsum(y, dtype=np.int64)[:-1]])
        said = np.empty((len(EXPERTS), n), dtype=np.uint8)
        said[0] = 2 * ones >= counts[:-1]
        pos = 0
        while pos < n:  # one segment per block (or the part of it in this call)
            start = self._block_start
            end_of_block = start + block_length(start)
            end = min(n, end_of_block - seen0)
            rows = slice(pos, end)
            held = (counts[rows] - start + 1).astype(np.float64)
            on_z = _margins(Z[rows], self._rules[_ON_Z])
            said[1:, rows] = self._said(on_z, _margins(before[rows], self._rules[_ON_BEFORE]), held)
            self._pending = np.vstack([self._pending, Z[rows]])
            self._pending_after = np.vstack([self._pending_after, after[rows]])
            self._pending_labels = np.concatenate([self._pending_labels, y[rows]])
            pos = end
            if seen0 + pos == end_of_block:
                self._step()
                self._block_start = end_of_block
                self._block_sum, self._block_sumsq = sums[pos].copy(), sumsq[pos].copy()
        wrong = (said != y).astype(np.int64)
        so_far = np.array(self.expert_mistakes, dtype=np.int64)[:, None] + np.cumsum(wrong, axis=1) - wrong
        self.expert_mistakes = [int(m) for m in so_far[:, -1] + wrong[:, -1]]
        self._sum, self._sumsq = sums[-1].copy(), sumsq[-1].copy()
        self._ones += int(np.count_nonzero(y))
        return self._vote(said, so_far)

    def _step(self) -> None:
        """The end of a block: each expert's steps on the block's examples from its block-start
        rule (module docstring), summed, and taken. Computed once on the whole block, however its
        examples came in, so the same floats whatever the calls (a standardized row is a function
        of the sums before it, added in arrival order)."""
        Z, after, y = self._pending, self._pending_after, self._pending_labels
        length = Z.shape[0]
        r = self._rules.copy()
        on_z = _margins(Z, r[[_VP, _U]])
        on_after = _margins(after, r[_ON_AFTER])
        label = y.astype(np.float64)
        sign = 2.0 * label - 1.0
        truth = y.astype(bool)
        wrong = (np.column_stack([on_z[:, 0], on_after[:, 0]]) >= 0) != truth[:, None]
        perceptrons = wrong * sign[:, None]
        residual = _sigmoid(np.column_stack([on_after[:, 1], on_z[:, 1]])) - label[:, None]
        norm = np.multiply(after[:, :-1], after[:, :-1]).sum(axis=1)
        loss = np.maximum(0.0, 1.0 - sign * on_after[:, 2])
        tau = np.where(norm > 0, np.minimum(PA_CAP, loss / np.where(norm > 0, norm, 1.0)), 0.0)
        # The summed steps: on z, the Perceptron's and AdaGrad's gradient; on standardized rows,
        # the Perceptron's, the logistic regression's and the PA's.
        on_z_steps = np.column_stack([perceptrons[:, 0], residual[:, 1]]).T @ Z
        on_s_steps = np.column_stack([perceptrons[:, 1], residual[:, 0], tau * sign]).T @ after
        r[_AP] += length * r[_VP]
        r[_AS] += length * r[_VS]
        r[_VP] += on_z_steps[0]
        r[_VS] += on_s_steps[0]
        r[_WL] -= SCALED_LOGISTIC_RATE * on_s_steps[1]
        r[_WPA] += on_s_steps[2] / length
        self._g2 = self._g2 + (residual[:, 1] * residual[:, 1]) @ (Z * Z)
        r[_U] -= ADAGRAD_RATE * on_z_steps[1] / (np.sqrt(self._g2) + 1e-12)
        self._rules = r
        self._pending, self._pending_after, self._pending_labels = Z[:0], after[:0], y[:0]

    def _test(self, Z: np.ndarray, y: np.ndarray) -> None:
        """The exact Perceptron (:mod:`.perceptron`'s batch path) on the rows, until its mistakes
        pass the bound: from then on the test is decided and the Perceptron no longer runs."""
        tester, limit = self._tester, self._tester.mistake_bound
        truth = y.astype(bool)
        v, pos, block = tester._v, 0, FIRST_BLOCK
        while pos < Z.shape[0] and tester.mistakes <= limit:
            end = min(Z.shape[0], pos + block)
            said = margins(Z[pos:end], v) >= 0
            wrong = np.flatnonzero(said != truth[pos:end])
            if wrong.size == 0:
                pos, block = end, min(2 * block, MAX_BLOCK)
                continue
            k = int(wrong[0])
            if truth[pos + k]:
                v += Z[pos + k]
            else:
                v -= Z[pos + k]
            tester.mistakes += 1
            pos, block = pos + k + 1, max(FIRST_BLOCK, 2 * (k + 1))
        tester.examples_seen += pos

    # -- the snapshot ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["expert_mistakes"] = list(self.expert_mistakes)
        state["pending"] = self._pending.tolist()
        state["pending_labels"] = self._pending_labels.tolist()
        state["tester"] = self._tester.state_dict()
        return state

    @classmethod
    def from_state_dict(cls, d: dict[str, Any]) -> Any:
        learner = super().from_state_dict(d)
        try:
            mistakes = d["expert_mistakes"]
            if (
                not isinstance(mistakes, list)
                or len(mistakes) != len(EXPERTS)
                or not all(type(m) is int and 0 <= m <= learner.examples_seen for m in mistakes)
            ):
                raise OnlineStateError("expert_mistakes must be one count per expert")
            tester = Perceptron.from_state_dict(d["tester"])
            pending = np.array(d["pending"], dtype=np.float64).reshape(-1, learner.dimension + 1)
            labels = np.array(d["pending_labels"])
        except (KeyError, TypeError) as exc:
            raise OnlineStateError(f"malformed {cls.name} state: {exc!r}") from None
        if tester.feature_map.bounds.tolist() != learner.feature_map.bounds.tolist():
            raise OnlineStateError("the margin test's bounds differ from the learner's")
        start = learner._block_start
        if not start <= learner.examples_seen < start + block_length(start):
            raise OnlineStateError("the current block does not hold the next example")
        if (
            pending.shape[0] != learner.examples_seen - start
            or labels.shape != (pending.shape[0],)
            or not np.all(np.isfinite(pending))
            or not np.all((labels == 0) | (labels == 1))
        ):
            raise OnlineStateError("the current block's examples do not match the examples seen")
        learner._pending, learner._pending_labels = pending, labels.astype(np.uint8)
        # Each waiting example standardized by the moments after it, as when it arrived.
        sums = np.cumsum(np.vstack([learner._block_sum, pending]), axis=0)[1:]
        sumsq = np.cumsum(np.vstack([learner._block_sumsq, pending * pending]), axis=0)[1:]
        counts = start + np.arange(1, pending.shape[0] + 1)
        learner._pending_after = Standardized.standardize(pending, sums, sumsq, counts)
        learner.expert_mistakes = mistakes
        learner._tester = tester
        return learner
