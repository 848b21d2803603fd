"""The block vote, the default online learner: its vote, its bound against the best expert, its
blocks, and the exact Perceptron's margin test beside it (the contract suite covers the interface)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privstream.learning.online import (
    DEFAULT_ONLINE_LEARNER,
    OnlineStateError,
    Perceptron,
    learner_from_state,
    make_online_learner,
    resolve_online_learner,
)
from privstream.learning.online.block_vote import (
    BETA,
    BLOCK_MAX,
    EXPERTS,
    ONE_AT_A_TIME,
    BlockVote,
    block_length,
)
from tests.learning.online.streams import noisy_stream, separable_stream


def test_the_default_is_the_block_vote_at_every_width() -> None:
    for d in (1, 9, 256, 257, 1000):
        assert resolve_online_learner(DEFAULT_ONLINE_LEARNER, d) == "block-vote"
    assert isinstance(make_online_learner(DEFAULT_ONLINE_LEARNER, [[0, 1]] * 3), BlockVote)


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
    X, y, bounds = noisy_stream(3, 700, seed=seed, noise=0.25)
    vote = BlockVote(bounds)
    said, predictions = [], []
    for x, label in zip(X, y, strict=True):
        said.append(vote.predict_experts(x)[:, 0])  # what each expert says before learning x
        predictions.append(vote.learn_one(x, int(label)))
    experts = np.array(said).T
    assert predictions == reference_vote(experts, y)
    assert vote.expert_mistakes == [int(np.count_nonzero(e != y)) for e in experts]
    assert len(set(map(tuple, experts.tolist()))) == len(EXPERTS)  # six different experts


def lw_bound(best: int, experts: int) -> float:
    beta = float(BETA)
    return (math.log2(experts) + best * math.log2(1 / beta)) / math.log2(2 / (1 + beta))


@pytest.mark.parametrize(("d", "noise", "seed"), [(2, 0.0, 3), (5, 0.1, 4), (9, 0.3, 5), (30, 0.45, 6)])
def test_at_most_lw94s_bound_against_the_best_expert(d: int, noise: float, seed: int) -> None:
    X, y, bounds = noisy_stream(d, 6000, seed=seed, noise=noise)
    vote = BlockVote(bounds)
    for part in np.array_split(np.arange(len(y)), 7):
        vote.learn_many(X[part], y[part])
        best = min(vote.expert_mistakes)
        assert vote.expert_bound == math.floor(lw_bound(best, len(EXPERTS)) + 1e-9)
        assert vote.mistakes <= vote.expert_bound


def test_the_bound_holds_against_an_adversary_who_flips_the_vote() -> None:
    vote = BlockVote([[0, 1], [0, 1]])
    gen = np.random.default_rng(7)
    for _ in range(600):  # past the blocks of one: the adversary also plays against delayed steps
        x = gen.random(2)
        vote.learn_one(x, 1 - vote.predict_one(x))
    assert vote.mistakes == 600
    assert vote.mistakes <= vote.expert_bound


def test_blocks_are_a_function_of_the_position_alone() -> None:
    starts = [0]
    while starts[-1] < 100_000:
        starts.append(starts[-1] + block_length(starts[-1]))
    lengths = np.diff(starts)
    assert lengths[:ONE_AT_A_TIME].tolist() == [1] * ONE_AT_A_TIME
    assert np.all(np.diff(lengths) >= 0) and lengths.max() == BLOCK_MAX
    # The steps wait for the end of their block: within one, the experts' vectors do not move.
    start = next(s for s in starts if s >= 4000)
    end = start + block_length(start)
    assert end - start == BLOCK_MAX
    X, y, bounds = noisy_stream(4, 5000, seed=11, noise=0.2)
    vote = BlockVote(bounds)
    vote.learn_many(X[:start], y[:start])

    def stepped() -> list[list[float]]:  # the experts' vectors (on z and on standardized rows)
        rules: list[list[float]] = vote.state_dict()["rules"]
        return rules

    rules = stepped()
    vote.learn_many(X[start : end - 1], y[start : end - 1])
    assert stepped() == rules
    vote.learn_many(X[end - 1 : end], y[end - 1 : end])  # the block's last example
    assert stepped() != rules


def test_a_state_saved_in_the_middle_of_a_block_continues_it_exactly() -> None:
    X, y, bounds = noisy_stream(3, 5000, seed=12)
    straight = BlockVote(bounds)
    expected = straight.learn_many(X, y)
    first = BlockVote(bounds)
    first.learn_many(X[:4200], y[:4200])  # in the middle of a block of 256
    state = json.loads(json.dumps(first.state_dict()))
    assert 0 < len(state["pending"]) == 4200 - state["block_start"] < BLOCK_MAX
    restored = learner_from_state(state)
    assert restored.learn_many(X[4200:], y[4200:]).tolist() == expected[4200:].tolist()
    assert restored.state_dict() == straight.state_dict()
    with pytest.raises(OnlineStateError, match="current block"):
        BlockVote.from_state_dict(
            {**state, "pending": state["pending"][:-1], "pending_labels": state["pending_labels"][:-1]}
        )
    with pytest.raises(OnlineStateError, match="one count per expert"):
        BlockVote.from_state_dict({**state, "expert_mistakes": [0, 0]})


def test_the_margin_test_is_the_exact_perceptrons_until_it_is_decided() -> None:
    X, y, bounds = separable_stream(4, 0.1, 6000, seed=8)
    vote, alone = BlockVote(bounds, margin=0.1), Perceptron(bounds, margin=0.1)
    vote.learn_many(X, y)
    alone.learn_many(X, y)
    assert (vote.margin_mistakes, vote.margin_bound) == (alone.mistakes, alone.mistake_bound)
    assert vote.realizable is True and vote.margin_mistakes <= vote.margin_bound  # Novikoff's bound
    X, y, bounds = noisy_stream(2, 3000, seed=9, noise=0.3)
    noisy = BlockVote(bounds, margin=0.5)
    for part in np.array_split(np.arange(3000), 13):
        noisy.learn_many(X[part], y[part])
    assert noisy.realizable is False
    assert noisy.margin_mistakes == noisy.margin_bound + 1 == 13  # it stopped at the verdict
    assert noisy._tester.examples_seen < 3000


def test_the_vote_follows_the_best_expert_on_skewed_noisy_features() -> None:
    # Features crowded near the low end of their bounds, 10% label noise: the standardized experts
    # are far better than the averaged Perceptron on the raw map; the vote ends close to the best.
    gen = np.random.default_rng(0)
    X = gen.uniform(0, 1, (8000, 3)) ** 6 * 100
    y = (X @ [1.0, -1.0, 0.5] > 0.3).astype(np.uint8)
    flip = gen.random(8000) < 0.1
    y[flip] = 1 - y[flip]
    vote = BlockVote([[0, 100]] * 3)
    vote.learn_many(X, y)
    best = min(vote.expert_mistakes)
    assert vote.mistakes <= 1.1 * best + 20
    assert EXPERTS[vote.expert_mistakes.index(best)].startswith("scaled-")
