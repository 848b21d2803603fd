"""The kernel learner (privstream.learning.private_learners.kernel): features, sensitivities, budget."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.kernel.budget import composed_epsilon, split_budget, zcdp_budget
from privstream.learning.private_learners.kernel.features import MAX_FREQUENCIES, RandomFeatures
from privstream.learning.private_learners.kernel.learner import KernelLearner
from privstream.learning.private_learners.kernel.rule import KernelModel
from privstream.learning.private_learners.kernel.steps import (
    OFFSETS,
    counts_query,
    counts_sensitivity,
    direction_query,
    direction_sensitivity,
    gaussian,
    mean_query,
    mean_sensitivity,
    offset_errors,
    spread_query,
)
from privstream.learning.private_learners.vector_base import make_vector_learner, vector_model_from_dict
from privstream.learning.randomness import seeded

RELATIONS = ("replace-one", "add-remove-one")


def _box_points(gen: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Rows of the unit box: uniform ones, corners and points on the faces (the extremes)."""
    rows = gen.random((n, d))
    rows[: n // 3] = gen.integers(0, 2, (n // 3, d))  # corners
    rows[n // 3 : n // 2, 0] = gen.integers(0, 2, n // 2 - n // 3)
    return rows


# -- the features ------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "bandwidth"), [(1, 0.01), (3, 0.5), (20, 3.0)])
def test_every_feature_vector_has_norm_one(d: int, bandwidth: float) -> None:
    # The sensitivities of the sum rest on it, for every point of the box.
    U = _box_points(np.random.default_rng(d), 300, d)
    phi = RandomFeatures(d, 64, bandwidth).transform(U)
    assert np.allclose(np.linalg.norm(phi, axis=1), 1.0, atol=1e-12)


def test_the_features_estimate_the_gaussian_kernel() -> None:
    gen = np.random.default_rng(1)
    U = gen.random((40, 5))
    h = 0.8
    phi = RandomFeatures(5, 8192, h).transform(U)
    exact = np.exp(-np.sum((U[:, None, :] - U[None, :, :]) ** 2, axis=2) / h**2)
    assert np.max(np.abs(phi @ phi.T - exact)) < 5 / math.sqrt(8192)


def test_the_features_are_a_function_of_seed_frequencies_and_bandwidth_only() -> None:
    U = np.random.default_rng(2).random((5, 3))
    a, b = RandomFeatures(3, 16, 0.5), RandomFeatures(3, 16, 0.5)
    assert np.array_equal(a.transform(U), b.transform(U))
    assert not np.allclose(a.transform(U), RandomFeatures(3, 16, 0.5, seed=1).transform(U))
    assert np.array_equal(np.vstack(list(a.chunks(U))), a.transform(U))


def test_a_rows_score_does_not_depend_on_the_other_rows() -> None:
    # The offset's error counts move by at most one only if no other row's score moves: bit for bit,
    # whatever rows share its block (a BLAS product may sum in another order for another block).
    U = np.random.default_rng(8).random((700, 20))
    features = RandomFeatures(20, 256, 0.7)
    weights = np.random.default_rng(9).standard_normal(features.size)
    scores = features.scores(U, weights)
    for first in (1, 3, 333):
        assert np.array_equal(scores[first:], features.scores(U[first:], weights))
    for i in (0, 5, 699):
        assert scores[i] == features.scores(U[i : i + 1], weights)[0]


# -- the sensitivities ---------------------------------------------------------------------------


def _neighbours(relation: str, gen: np.random.Generator, d: int):
    """Pairs of neighbouring datasets ``(U, y, labelled)``: random rows and labels, and a changed row
    (a new point, a flipped label, a label dropped) or, under add/remove-one, a removed row."""
    for _ in range(60):
        n = int(gen.integers(1, 12))
        U = _box_points(gen, n, d)
        y = gen.integers(0, 2, n)
        labelled = gen.random(n) < 0.8
        i = int(gen.integers(0, n))
        if relation == "replace-one":
            U2, y2, l2 = U.copy(), y.copy(), labelled.copy()
            if gen.random() < 0.6:  # else the same point (a label flip alone)
                U2[i] = gen.integers(0, 2, d) if gen.random() < 0.5 else gen.random(d)
            y2[i] = 1 - y[i] if gen.random() < 0.7 else y[i]
            l2[i] = gen.random() < 0.8
        else:
            keep = np.arange(n) != i
            U2, y2, l2 = U[keep], y[keep], labelled[keep]
        yield (U, y, labelled), (U2, y2, l2)


@pytest.mark.parametrize("relation", RELATIONS)
def test_the_statistics_move_by_at_most_their_sensitivity(relation: str) -> None:
    gen = np.random.default_rng(3)
    public_mean = np.full(4, 0.3)  # step 1b uses the released mean: a public constant here
    moved = {"mean": 0.0, "counts": 0.0, "spread": 0.0}
    for (U, y, lab), (U2, y2, lab2) in _neighbours(relation, gen, 4):
        moved["mean"] = max(moved["mean"], float(np.linalg.norm(mean_query(U) - mean_query(U2))))
        moved["counts"] = max(
            moved["counts"], float(np.linalg.norm(counts_query(y, lab) - counts_query(y2, lab2)))
        )
        moved["spread"] = max(
            moved["spread"], abs(spread_query(U, public_mean) - spread_query(U2, public_mean))
        )
    assert moved["mean"] <= mean_sensitivity(relation) + 1e-12
    assert moved["counts"] <= counts_sensitivity(relation) + 1e-12
    assert moved["spread"] <= 1.0 + 1e-12
    assert min(moved.values()) > 0.5  # the pairs do move every statistic


@pytest.mark.parametrize("relation", RELATIONS)
def test_the_class_weighted_sum_moves_by_at_most_its_sensitivity(relation: str) -> None:
    gen = np.random.default_rng(4)
    features = RandomFeatures(3, 32, 0.3)
    largest = 0.0
    for weights in [(1.0, -1.0), (1.0, -0.2), (0.3, -1.0)]:
        for (U, y, lab), (U2, y2, lab2) in _neighbours(relation, gen, 3):
            a = direction_query(features, U[lab], y[lab], weights)
            b = direction_query(features, U2[lab2], y2[lab2], weights)
            largest = max(largest, float(np.linalg.norm(a - b)))
    assert largest <= direction_sensitivity(relation) + 1e-12
    assert largest > 0.9 * direction_sensitivity(relation)  # and the bound is nearly reached


def test_the_offset_errors_are_the_rules_errors() -> None:
    gen = np.random.default_rng(5)
    scores = np.concatenate((gen.uniform(-1, 1, 200), OFFSETS[::40]))  # ties with the grid included
    y = gen.integers(0, 2, scores.shape[0])
    brute = [int(np.count_nonzero((scores >= t) != y)) for t in OFFSETS]
    assert offset_errors(scores, y).tolist() == brute


# -- the budget ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-6), (1.0, 1e-6), (1.0, 0.05), (8.0, 1e-9)])
@pytest.mark.parametrize("public_bandwidth", [False, True])
def test_the_steps_compose_to_at_most_the_guarantee(
    epsilon: float, delta: float, public_bandwidth: bool
) -> None:
    budget = split_budget(epsilon, delta, public_bandwidth=public_bandwidth)
    # the ρ each mechanism actually runs at (the Gaussian ones round down to the grid's ρ)
    used = budget.offset_epsilon**2 / 8 + sum(
        gaussian(rho, 1.0, 3, seeded(0)).rho if rho > 0 else 0.0
        for rho in (budget.mean, budget.spread, budget.counts, budget.direction)
    )
    assert used <= budget.spent() <= budget.total
    assert composed_epsilon(used, delta) <= epsilon
    assert composed_epsilon(budget.total * 1.01, delta) > epsilon  # and no budget is left unused
    assert budget.direction >= 0.85 * budget.total
    assert (budget.mean == 0) == public_bandwidth


def test_the_renyi_conversion_beats_the_classical_one() -> None:
    # ρ + 2√(ρ ln 1/δ) <= ε is valid but loose; the Rényi conversion allows a larger ρ
    classical = (1.0 / (math.sqrt(math.log(1e6) + 1.0) + math.sqrt(math.log(1e6)))) ** 2
    assert zcdp_budget(1.0, 1e-6) > 1.3 * classical


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 2.0])
def test_the_exponential_mechanism_is_within_its_zcdp_budget(epsilon: float) -> None:
    # The budget counts the offset's exponential mechanism as ε²/8-zCDP (bounded range). Check the
    # Rényi divergence of its exact output laws on neighbouring scores (each moved by at most 1).
    gen = np.random.default_rng(6)
    mechanism = ExponentialMechanism(epsilon, 1, rng=seeded(0))

    def log_law(scores: np.ndarray) -> np.ndarray:
        logits = epsilon * scores / 2
        return logits - np.logaddexp.reduce(logits)

    for _ in range(200):
        scores = gen.integers(-30, 1, int(gen.integers(2, 12))).astype(float)
        moved = scores + gen.choice([-1.0, 0.0, 1.0], scores.shape[0])
        log_p, log_q = log_law(scores), log_law(moved)
        assert np.allclose(np.exp(log_p), mechanism.probabilities(scores.tolist()))  # the mechanism's law
        for alpha in (1.5, 2.0, 8.0, 64.0):
            divergence = float(np.logaddexp.reduce(alpha * log_p + (1 - alpha) * log_q)) / (alpha - 1)
            assert divergence <= alpha * epsilon**2 / 8 + 1e-12


# -- the learner ---------------------------------------------------------------------------------


def _disc(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).random((n, 2))
    return X, (np.sum((X - 0.5) ** 2, axis=1) < 0.1).astype(np.uint8)


def test_it_learns_a_target_no_halfspace_can() -> None:
    X, y = _disc(4000, 1)
    test_X, test_y = _disc(5000, 2)
    res = KernelLearner(frequencies=256).fit(
        X, y, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(1)
    )
    halfspace = make_vector_learner("halfspaces").fit(X, y, epsilon=1.0, bounds=[[0, 1]] * 2, rng=seeded(1))
    assert np.mean(res.model.predict(test_X) == test_y) > 0.9
    assert np.mean(halfspace.model.predict(test_X) == test_y) < 0.75  # the disc covers 31% of the box


def test_it_learns_in_high_dimension() -> None:
    # Two Gaussian clouds in 40 features; the noise on a score does not grow with d.
    gen = np.random.default_rng(7)
    y = gen.integers(0, 2, 3000)
    centre = np.where(y[:, None] == 1, 0.55, 0.45)
    X = np.clip(centre + gen.normal(0, 0.12, (3000, 40)), 0, 1)
    res = KernelLearner().fit(
        X[:2000], y[:2000], epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 40, rng=seeded(2)
    )
    assert np.mean(res.model.predict(X[2000:]) == y[2000:]) > 0.9


def test_unlabelled_rows_count_in_the_spread_only() -> None:
    # With a public bandwidth there is no spread: the release on the labelled rows alone, and on
    # them among unlabelled rows, are the same draws of the same steps.
    X, y = _disc(300, 3)
    labels = y.astype(np.int64)
    labels[::3] = -1
    learner = KernelLearner(frequencies=16, bandwidth=0.3)
    mixed = learner.fit(X, labels, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(4))
    alone = learner.fit(
        X[labels >= 0], labels[labels >= 0], epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(4)
    )
    assert mixed.model == alone.model
    estimated = KernelLearner(frequencies=16)
    a = estimated.fit(X, labels, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(4))
    b = estimated.fit(
        X[labels >= 0], labels[labels >= 0], epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(4)
    )
    assert a.dp_outputs["bandwidth"] != b.dp_outputs["bandwidth"]


def test_the_release_states_its_guarantee_and_its_public_figures() -> None:
    X, y = _disc(200, 5)
    learner = KernelLearner(frequencies=8)
    public = learner.fit(X, y, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(0))
    private = learner.fit(
        X, y, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(0), expected_size=150
    )
    assert (public.epsilon, public.delta, public.neighbouring_relation) == (1.0, 1e-6, "replace-one")
    assert private.neighbouring_relation == "add-remove-one"
    # one row moves the sum twice as far when it is replaced as when it is added: half the noise
    ratio = private.parameters["noise_sd_direction"] / public.parameters["noise_sd_direction"]
    assert ratio == pytest.approx(0.5, rel=1e-6)
    assert public.theorem_sample_size is None and public.accuracy_guarantee_holds is None
    assert set(public.dp_outputs) == {"bandwidth"}
    json.dumps(public.certificate_fields())  # every field is JSON


@pytest.mark.parametrize("delta", [0.0, 1.0])
def test_delta_must_be_in_the_open_unit_interval(delta: float) -> None:
    with pytest.raises(LearningInputError, match="0 < delta < 1"):
        KernelLearner().fit(np.zeros((3, 2)), np.zeros(3), epsilon=1.0, delta=delta, bounds=[[0, 1]] * 2)


@pytest.mark.parametrize(
    "params",
    [{"frequencies": 0}, {"frequencies": MAX_FREQUENCIES + 1}, {"frequencies": True},
     {"relative_bandwidth": 0}, {"bandwidth": -1.0}, {"bandwidth": math.inf}],
)  # fmt: skip
def test_bad_parameters_are_refused(params: dict) -> None:
    with pytest.raises(ValueError):
        KernelLearner(**params)


# -- the model -----------------------------------------------------------------------------------


def test_the_model_reads_back_and_predicts_the_same() -> None:
    X, y = _disc(500, 6)
    model = (
        KernelLearner(frequencies=32)
        .fit(X, y, epsilon=1.0, delta=1e-6, bounds=[[0, 1]] * 2, rng=seeded(6))
        .model
    )
    again = vector_model_from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model and isinstance(again, KernelModel)
    assert np.array_equal(again.predict(X), model.predict(X))
    far = np.array([[5.0, -3.0]])  # outside the bounds: clipped, like every vector model
    assert model.predict(far).tolist() == model.predict(np.array([[1.0, 0.0]])).tolist()


@pytest.mark.parametrize(
    "change",
    [{"weights": [1.0, 2.0]}, {"weights": [math.nan] * 4}, {"frequencies": MAX_FREQUENCIES + 1},
     {"bandwidth": 0}, {"offset": math.inf}, {"seed": -1}, {"kind": "halfspace"}],
)  # fmt: skip
def test_a_malformed_model_is_refused(change: dict) -> None:
    good = KernelModel(
        [[0, 1]], bandwidth=0.5, frequencies=2, weights=[1.0, 0.0, 0.0, 1.0], offset=0.0
    ).to_dict()
    with pytest.raises(HypothesisFormatError):
        KernelModel.from_dict({**good, **change})


def test_the_features_cover_every_combination_of_the_box_corners() -> None:
    # the corners are the extreme points for the spread clip: it never exceeds a quarter per feature
    d = 3
    corners = np.array(list(itertools.product([0.0, 1.0], repeat=d)))
    assert spread_query(corners, corners.mean(axis=0)) <= corners.shape[0]
