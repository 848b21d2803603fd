"""The weighted majority, the default online learner: its vote, its bound against the best expert,
and the margin test it keeps (the contract suite covers the interface)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privstream.learning.online import (
    AveragedPerceptron,
    make_online_learner,
)
from privstream.learning.online.weighted_majority import BETA, EXPERTS, WeightedMajority
from tests.learning.online.streams import noisy_stream, separable_stream


def test_every_expert_votes_on_a_narrow_stream() -> None:
    narrow = make_online_learner("weighted-majority", [[0, 1]] * 3)
    assert [type(e) for e in narrow.experts] == list(EXPERTS)  # type: ignore[attr-defined]


def reference_vote(said: np.ndarray, y: np.ndarray) -> list[int]:
    """The weighted majority written out one example at a time, with exact rational weights."""
    mistakes = [0] * said.shape[0]
    out = []
    for t in range(said.shape[1]):
        ones = sum((BETA ** mistakes[k] for k in range(said.shape[0]) if said[k, t] == 1), start=BETA * 0)
        zeros = sum((BETA ** mistakes[k] for k in range(said.shape[0]) if said[k, t] == 0), start=BETA * 0)
        leader = mistakes.index(min(mistakes))
        out.append(1 if ones > zeros else 0 if ones < zeros else int(said[leader, t]))
        for k in range(said.shape[0]):
            mistakes[k] += int(said[k, t] != y[t])
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_the_vote_is_the_weighted_majority_of_the_experts_predictions(seed: int) -> None:
    X, y, bounds = noisy_stream(3, 600, seed=seed, noise=0.25)
    wm = WeightedMajority(bounds)
    predictions = wm.learn_many(X, y)
    alone = np.stack(
        [
            type(e)(bounds, **({"margin": 0.1} if "margin" in type(e)._params else {})).learn_many(X, y)
            for e in wm.experts
        ]
    )
    assert predictions.tolist() == reference_vote(alone, y)
    assert [e.mistakes for e in wm.experts] == [int(np.count_nonzero(a != y)) for a in alone]


def lw_bound(best: int, experts: int) -> float:
    beta = float(BETA)
    return (math.log2(experts) + best * math.log2(1 / beta)) / math.log2(2 / (1 + beta))


@pytest.mark.parametrize(("d", "noise", "seed"), [(2, 0.0, 3), (5, 0.1, 4), (9, 0.3, 5), (30, 0.45, 6)])
def test_at_most_lw94s_bound_against_the_best_expert(d: int, noise: float, seed: int) -> None:
    X, y, bounds = noisy_stream(d, 3000, seed=seed, noise=noise)
    wm = WeightedMajority(bounds)
    for part in np.array_split(np.arange(len(y)), 7):
        wm.learn_many(X[part], y[part])
        best = min(e.mistakes for e in wm.experts)
        assert wm.expert_bound == math.floor(lw_bound(best, len(wm.experts)) + 1e-9)
        assert wm.mistakes <= wm.expert_bound


def test_the_bound_holds_against_an_adversary_who_flips_the_vote() -> None:
    # Labels chosen against the vote: every example is a mistake of the weighted majority, so its
    # mistakes grow as fast as they can; the bound from the best expert must still hold.
    wm = WeightedMajority([[0, 1], [0, 1]])
    gen = np.random.default_rng(7)
    for _ in range(400):
        x = gen.random(2)
        wm.learn_one(x, 1 - wm.predict_one(x))
    assert wm.mistakes == 400
    assert wm.mistakes <= wm.expert_bound


def test_the_margin_test_is_the_averaged_perceptrons() -> None:
    X, y, bounds = separable_stream(4, 0.1, 5000, seed=8)
    wm, alone = WeightedMajority(bounds, margin=0.1), AveragedPerceptron(bounds, margin=0.1)
    wm.learn_many(X, y)
    alone.learn_many(X, y)
    assert (wm.margin_mistakes, wm.margin_bound) == (alone.margin_mistakes, alone.margin_bound)
    assert wm.realizable is True and wm.margin_mistakes <= wm.margin_bound  # Novikoff's bound
    X, y, bounds = noisy_stream(2, 2000, seed=9, noise=0.3)
    noisy = WeightedMajority(bounds, margin=0.5)
    noisy.learn_many(X, y)
    assert noisy.realizable is False


def test_the_vote_weights_are_beta_to_the_relative_mistakes() -> None:
    X, y, bounds = noisy_stream(3, 500, seed=10)
    wm = WeightedMajority(bounds)
    wm.learn_many(X, y)
    best = min(e.mistakes for e in wm.experts)
    assert wm.vote_weights == [float(BETA) ** (e.mistakes - best) for e in wm.experts]
    assert max(wm.vote_weights) == 1.0 and wm.leader.mistakes == best
