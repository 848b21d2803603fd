"""The contract every online learner on feature vectors keeps (River-style: one suite, every learner).

Predict before learn; the batch path equals one example at a time, however the stream is cut;
deterministic; the mistake bound on streams separable with the configured margin; the proof of
non-separability on streams that are not; exact state save and restore; inputs checked.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from privstream.learning.online import (
    ONLINE_LEARNERS,
    OnlineInputError,
    OnlineLearner,
    OnlineStateError,
    learner_from_state,
    make_online_learner,
)
from privstream.learning.online.base import FeatureMap
from tests.learning.online.streams import noisy_stream, separable_stream

LEARNERS = sorted(ONLINE_LEARNERS)
#: Learners that test the margin (a Perceptron inside), and those that bound their own mistakes.
MARGIN_TESTED = [
    "averaged-perceptron",
    "block-vote",
    "perceptron",
    "second-order-perceptron",
    "weighted-majority",
]
BOUNDED = ["perceptron"]
#: Margin testers that stop counting once the test is decided (one mistake past the bound).
STOPS_AT_VERDICT = ["block-vote"]


def make(name: str, bounds: object, margin: float = 0.1) -> OnlineLearner:
    params = {"margin": margin} if name in MARGIN_TESTED else {}
    return make_online_learner(name, bounds, **params)


def test_the_lists_name_every_learner() -> None:
    # A learner added to the registry must be placed in (or out of) the margin lists on purpose.
    for name in LEARNERS:
        learner = make(name, [[0, 1]])
        assert isinstance(learner, OnlineLearner)
        assert (learner.realizable is not None) == (name in MARGIN_TESTED)
        assert (learner.margin_bound is not None) == (name in MARGIN_TESTED)
        assert (learner.mistake_bound is not None) == (name in BOUNDED)


@pytest.mark.parametrize("name", MARGIN_TESTED)
def test_the_margin_test_compares_the_perceptrons_mistakes_with_the_bound(name: str) -> None:
    X, y, bounds = noisy_stream(2, 2000, seed=10, noise=0.3)
    learner = make(name, bounds, margin=0.5)
    for part in np.array_split(np.arange(2000), 50):
        learner.learn_many(X[part], y[part])
        assert learner.margin_bound == 12  # ⌊3/0.25⌋
        assert learner.realizable is (learner.margin_mistakes <= learner.margin_bound)
        if name == "perceptron":
            assert learner.margin_mistakes == learner.mistakes
    assert learner.realizable is False
    # The averaged Perceptron's test counts exactly the mistakes of the Perceptron it runs inside.
    plain = make("perceptron", bounds, margin=0.5)
    plain.learn_many(X, y)
    if name in STOPS_AT_VERDICT:
        assert learner.margin_mistakes == min(plain.mistakes, learner.margin_bound + 1)
    else:
        assert learner.margin_mistakes == plain.mistakes


@pytest.mark.parametrize("name", LEARNERS)
def test_each_prediction_is_made_before_its_label_is_learned(name: str) -> None:
    X, y, bounds = noisy_stream(3, 400, seed=1)
    learner = make(name, bounds)
    for x, label in zip(X, y, strict=True):
        before = learner.predict_one(x)
        assert learner.learn_one(x, int(label)) == before
    assert learner.examples_seen == 400
    assert 0 < learner.mistakes < 400


@pytest.mark.parametrize("name", LEARNERS)
@pytest.mark.parametrize("cuts", [[1], [7, 1, 64, 3], [1000]])
def test_batches_equal_one_at_a_time_however_the_stream_is_cut(name: str, cuts: list[int]) -> None:
    X, y, bounds = noisy_stream(4, 700, seed=2, noise=0.15)
    one = make(name, bounds)
    singles = [one.learn_one(x, int(label)) for x, label in zip(X, y, strict=True)]
    many, out, pos, i = make(name, bounds), [], 0, 0
    while pos < len(y):
        step = cuts[i % len(cuts)]
        out += many.learn_many(X[pos : pos + step], y[pos : pos + step]).tolist()
        pos, i = pos + step, i + 1
    assert out == singles
    assert many.state_dict() == one.state_dict()


@pytest.mark.parametrize("name", LEARNERS)
def test_deterministic(name: str) -> None:
    X, y, bounds = noisy_stream(5, 1500, seed=3)
    a, b = make(name, bounds), make(name, bounds)
    assert a.learn_many(X, y).tolist() == b.learn_many(X, y).tolist()
    assert json.dumps(a.state_dict()) == json.dumps(b.state_dict())


@pytest.mark.parametrize("name", BOUNDED)
@pytest.mark.parametrize(("d", "margin", "seed"), [(1, 0.3, 0), (2, 0.1, 1), (9, 0.1, 2), (30, 0.05, 3)])
def test_at_most_the_bound_on_a_stream_separable_with_the_margin(
    name: str, d: int, margin: float, seed: int
) -> None:
    X, y, bounds = separable_stream(d, margin, 6000, seed)
    learner = make(name, bounds, margin)
    learner.learn_many(X, y)
    assert learner.mistake_bound == int((d + 1) / margin**2 + 1e-9)
    assert learner.mistakes <= learner.mistake_bound
    assert learner.realizable is True
    # And it learned: the last third of the stream is almost free of mistakes.
    tail = make(name, bounds, margin)
    tail.learn_many(X[:4000], y[:4000])
    before = tail.mistakes
    tail.learn_many(X[4000:], y[4000:])
    assert tail.mistakes - before < 0.03 * 2000


@pytest.mark.parametrize("name", MARGIN_TESTED)
@pytest.mark.parametrize(("d", "margin", "seed"), [(2, 0.1, 4), (9, 0.2, 5)])
def test_margin_testers_never_report_a_separable_stream(name: str, d: int, margin: float, seed: int) -> None:
    X, y, bounds = separable_stream(d, margin, 8000, seed)
    learner = make(name, bounds, margin)
    for part in np.array_split(np.arange(len(y)), 9):
        learner.learn_many(X[part], y[part])
        assert learner.realizable is True


@pytest.mark.parametrize("name", MARGIN_TESTED)
def test_more_mistakes_than_the_bound_prove_no_margin(name: str) -> None:
    # Two copies of one point with both labels: no halfspace separates it at any margin.
    learner = make(name, [[0, 1], [0, 1]], margin=0.5)
    X = np.tile([[0.3, 0.7]], (40, 1))
    y = np.tile([0, 1], 20)
    learner.learn_many(X, y)
    assert learner.realizable is False
    # The report is for good: it was proved, later examples cannot unprove it.
    learner.learn_many(X[:1], y[:1])
    assert learner.realizable is False


@pytest.mark.parametrize("name", BOUNDED)
def test_the_report_comes_exactly_when_the_mistakes_pass_the_bound(name: str) -> None:
    X, y, bounds = noisy_stream(2, 3000, seed=6, noise=0.3)
    learner = make(name, bounds, margin=0.5)  # bound (3/0.25) = 12
    for x, label in zip(X, y, strict=True):
        learner.learn_one(x, int(label))
        assert learner.realizable is (learner.mistakes <= learner.mistake_bound)
    assert learner.mistakes > learner.mistake_bound == 12


@pytest.mark.parametrize("name", LEARNERS)
def test_state_save_and_restore_continue_exactly(name: str) -> None:
    X, y, bounds = noisy_stream(6, 2000, seed=7)
    straight = make(name, bounds)
    expected = straight.learn_many(X, y)[1100:].tolist()
    first = make(name, bounds)
    first.learn_many(X[:1100], y[:1100])
    restored = learner_from_state(json.loads(json.dumps(first.state_dict())))
    assert type(restored) is type(first)
    assert restored.learn_many(X[1100:], y[1100:]).tolist() == expected
    assert restored.state_dict() == straight.state_dict()
    assert (restored.mistakes, restored.examples_seen) == (straight.mistakes, 2000)


@pytest.mark.parametrize("name", LEARNERS)
def test_a_foreign_or_broken_state_is_refused(name: str) -> None:
    learner = make(name, [[0, 1], [0, 1]])
    state = learner.state_dict()
    other = next(n for n in LEARNERS if n != name)
    with pytest.raises(OnlineStateError):
        type(learner).from_state_dict({**state, "learner": other})
    with pytest.raises(OnlineStateError):
        type(learner).from_state_dict({**state, "version": 99})
    with pytest.raises(OnlineStateError):
        type(learner).from_state_dict({**state, "bounds": [[0, 1]]})  # another dimension
    with pytest.raises(OnlineStateError):
        type(learner).from_state_dict({k: v for k, v in state.items() if k != "mistakes"})


@pytest.mark.parametrize("name", LEARNERS)
def test_inputs_are_checked(name: str) -> None:
    learner = make(name, [[0, 1], [0, 1]])
    with pytest.raises(OnlineInputError):
        learner.learn_many(np.zeros((2, 3)), np.array([0, 1]))  # wrong dimension
    with pytest.raises(OnlineInputError):
        learner.learn_many(np.array([[0.5, np.nan]]), np.array([1]))
    with pytest.raises(OnlineInputError):
        learner.learn_many(np.zeros((2, 2)), np.array([0, 2]))
    with pytest.raises(OnlineInputError):
        learner.learn_one([0.5, 0.5], 3)
    assert learner.examples_seen == 0
    with pytest.raises(OnlineInputError):
        make_online_learner(name, [[1, 0]])  # lo > hi
    with pytest.raises(OnlineInputError):
        make_online_learner(name, [[0, 1]], no_such_parameter=1)


@pytest.mark.parametrize("name", LEARNERS)
def test_the_rule_on_the_raw_features_predicts_as_the_learner(name: str) -> None:
    X, y, bounds = noisy_stream(3, 800, seed=8)
    bounds = [[-2.0, 7.0], [10.0, 11.0], [0.0, 100.0]]
    X = np.array(bounds)[:, 0] + X * (np.array(bounds)[:, 1] - np.array(bounds)[:, 0])
    learner = make(name, bounds)
    learner.learn_many(X, y)
    test = np.array(bounds)[:, 0] + np.random.default_rng(9).random((500, 3)) * np.ptp(bounds, axis=1)
    experts = getattr(learner, "experts", None)
    if hasattr(learner, "expert_rules"):  # a vote of rules held inside
        ones, zeros = np.zeros(len(test)), np.zeros(len(test))
        for weight, (w, b) in zip(learner.vote_weights, learner.expert_rules(), strict=True):
            ones += np.where(test @ w + b >= 0, weight, 0.0)
            zeros += np.where(test @ w + b >= 0, 0.0, weight)
        said = (ones > zeros).astype(np.uint8)
        assert [r.tolist() for r in learner.weights()[:1]] == [
            learner.expert_rules()[learner.expert_mistakes.index(min(learner.expert_mistakes))][0].tolist()
        ]
    elif experts is None:
        w, b = learner.weights()
        said = (test @ w + b >= 0).astype(np.uint8)
    else:  # a vote: the experts' rules on the raw features, weighted as the learner says
        ones, zeros = np.zeros(len(test)), np.zeros(len(test))
        for weight, expert in zip(learner.vote_weights, experts, strict=True):
            w, b = expert.weights()
            ones += np.where(test @ w + b >= 0, weight, 0.0)
            zeros += np.where(test @ w + b >= 0, 0.0, weight)
        said = (ones > zeros).astype(np.uint8)
        shown, leaders = learner.weights(), learner.leader.weights()  # one rule shown: the leader's
        assert shown[0].tolist() == leaders[0].tolist() and shown[1] == leaders[1]
    assert (said == learner.predict_many(test)).mean() > 0.99


def test_the_bound_is_never_rounded_down() -> None:
    # (R/γ)² with γ = 0.1 is 100·(d+1) exactly; the binary float 0.1 must not make it 100·(d+1) - 1.
    assert [make("perceptron", [[0, 1]] * d, 0.1).mistake_bound for d in (1, 9, 99)] == [200, 1000, 10000]


def test_the_feature_map_clips_to_the_public_bounds() -> None:
    fmap = FeatureMap([[0, 4], [-1, 1]])
    z = fmap.transform(np.array([[2.0, 0.0], [9.0, -5.0], [-1.0, 1.0]]))
    assert z.tolist() == [[0.0, 0.0, 1.0], [1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]]
    assert np.all(np.linalg.norm(z, axis=1) <= np.sqrt(3))


#: What the online package may use of the rest of the project: the one mechanism that declares and
#: checks every algorithm's parameters (learning/parameters.py).
SHARED_DECLARATIONS = ("privstream.learning.parameters",)


def test_the_package_imports_nothing_of_the_project_outside_itself() -> None:
    package = Path(__file__).resolve().parents[3] / "privstream" / "learning" / "online"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("privstream"):
                inside = node.module.startswith("privstream.learning.online")
                assert inside or node.module in SHARED_DECLARATIONS, f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("privstream") for a in node.names), path.name
