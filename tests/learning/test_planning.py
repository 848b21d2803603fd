"""The planner (privstream.learning.planning): theorem and practical sizes, the synthetic data, the
service's window check."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privstream.learning.hypotheses import hypothesis_from_runs
from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.planning import (
    GRID,
    plan,
    synthetic_problem,
    window_check,
    window_too_small,
)
from privstream.learning.private_learners import LEARNERS, generic_sample_size, make_learner
from privstream.learning.private_learners.global_stability.learner import global_stability_log10_sample_size
from privstream.learning.private_learners.proper.learner import proper_sample_size
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS
from privstream.learning.sanitizers import SANITIZERS


def _ints_within_2_53(obj) -> bool:
    if isinstance(obj, bool):
        return True
    if isinstance(obj, int):
        return abs(obj) <= 2**53
    if isinstance(obj, dict):
        return all(_ints_within_2_53(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_ints_within_2_53(v) for v in obj)
    return True


def test_plan_covers_every_registered_algorithm_with_exact_theorem_sizes() -> None:
    seen: list[tuple[float, str]] = []
    p = plan(
        "thresholds:1024",
        epsilon=1.0,
        alpha=0.1,
        time_budget=20,
        runs=4,
        progress=lambda f, m: seen.append((f, m)),
    )
    names = {c.name for c in p.candidates}
    assert names == set(LEARNERS) | set(SANITIZERS) | set(VECTOR_LEARNERS)
    by = {c.name: c for c in p.candidates}
    for name in VECTOR_LEARNERS:  # 1-D class: the vector learners never apply
        assert not by[name].applies and "vector" in by[name].reason
    hclass = parse_class_spec("thresholds:1024")
    assert by["generic"].theorem_sample_size == generic_sample_size(hclass.size, 0.1, 0.1, 1.0)
    assert by["proper"].theorem_sample_size == proper_sample_size(0.1, 0.1, 1.0, 1e-6, 10)
    gs = by["global-stability"].to_dict()
    assert gs["theorem_sample_size"] is None  # Ldim 10: beyond any float
    assert gs["theorem_sample_size_log10"] == pytest.approx(
        global_stability_log10_sample_size(0.1, 0.1, 1.0, 1e-6, 10), abs=1e-3
    )
    assert by["generic"].status == "measured" and by["generic"].practical_size in GRID
    for c in p.candidates:
        if c.status == "measured":  # the practical size is where >= 1 - β of the runs reached α
            last = c.measurements[-1]
            assert last.n == c.practical_size and last.successes >= last.runs - math.floor(0.1 * last.runs)
    doc = p.to_dict()
    assert _ints_within_2_53(doc) and json.loads(json.dumps(doc)) == doc
    assert doc["recommendation"]["learner"] in LEARNERS
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] >= 0


def test_delta_zero_leaves_the_pure_algorithms_and_explains_the_others() -> None:
    p = plan("points:64", epsilon=1.0, alpha=0.1, delta=0.0, time_budget=5, runs=3)
    by = {c.name: c for c in p.candidates}
    assert by["generic"].applies
    for name in ("global-stability", "proper"):
        assert not by[name].applies and "delta" in by[name].reason.lower()


def test_names_restrict_and_unknown_names_are_refused() -> None:
    p = plan("intervals:64", epsilon=1.0, alpha=0.1, time_budget=10, runs=3, names=["generic", "mwem"])
    assert {c.name for c in p.candidates} == {"generic", "mwem"}
    with pytest.raises(ValueError, match="unknown"):
        plan("intervals:64", epsilon=1.0, alpha=0.1, names=["svm"])
    with pytest.raises(ValueError):
        plan("intervals:64", epsilon=1.0, alpha=1.5)
    with pytest.raises(ValueError):
        plan("intervals:64", epsilon=1.0, alpha=0.1, time_budget=0)


def test_a_tiny_budget_reports_out_of_time_rather_than_a_wrong_size() -> None:
    p = plan("thresholds:1024", epsilon=1.0, alpha=0.1, time_budget=1e-6, runs=3, names=["generic"])
    (c,) = p.candidates
    assert c.applies and c.practical_size is None and c.status == "out of time"
    assert p.recommendation["learner"] is None


@pytest.mark.parametrize("spec", ["thresholds:1000", "points:333", "intervals:500", "intervals:2^40"])
def test_synthetic_problems_are_realizable_and_errors_exact(spec) -> None:
    hclass = parse_class_spec(spec)
    problem = synthetic_problem(hclass, seed=3)
    xs, ys = problem.sample(4000, seed=1)
    assert np.array_equal(ys, problem.target.predict(xs))  # realizable by the target member
    ones = problem.target.predict(xs).mean()
    assert 0.3 < ones < 0.9  # half the mass on the target's ones: both labels are common
    assert problem.error(problem.target) == 0.0
    if hclass.domain_size <= 4096:  # exact error against the truth table
        other = hclass.hypothesis(1)
        grid = np.arange(hclass.domain_size)
        wrong = other.predict(grid) != problem.target.predict(grid)
        pos = problem.target.predict(grid).astype(bool)
        expected = 0.5 * wrong.mean() + 0.5 * wrong[pos].mean()
        assert problem.error(other) == pytest.approx(expected)


def test_file_classes_are_planned_too() -> None:
    rows = np.random.default_rng(1).random((12, 10)) < 0.5
    hclass = FiniteClass(rows, "random-12")
    p = plan(hclass, epsilon=2.0, alpha=0.2, time_budget=10, runs=3, names=["generic", "proper"])
    assert all(c.applies for c in p.candidates)
    problem = synthetic_problem(hclass, 0)
    assert 0 < problem.target.truth_table().sum() < 10


def test_window_check_and_the_service_warning() -> None:
    hclass = parse_class_spec("thresholds:1024")
    ok = window_check("generic", hclass, epsilon=1.0, delta=0.0, alpha=0.1, beta=0.2, window_size=2000)
    assert ok.useful is True and ok.success_rate == 1.0
    gs = make_learner("global-stability")
    bad = window_check(gs, hclass, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.2, window_size=50)
    assert bad.useful is False and "does not reach" in bad.message and "privstream plan" in bad.message
    warning = window_too_small(gs, hclass, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.2, window_size=50)
    assert warning == bad.message
    assert (
        window_too_small(
            make_learner("generic"), hclass, epsilon=1.0, delta=0.0, alpha=0.1, beta=0.2, window_size=2000
        )
        is None
    )
    params = {"epsilon": 1.0, "delta": 1e-6, "alpha": 0.1, "beta": 0.2}
    assert window_too_small(gs, hclass, window_size=None, **params) is None  # time windows: not checked
    slow = window_check(gs, hclass, window_size=50, time_budget=0, **params)
    assert slow.useful is None  # no verdict without time: the service says nothing


def test_errors_of_points_targets_weigh_the_point() -> None:
    """A point target carries half the mass: the all-zero function has error about 1/2, not 1/N."""
    problem = synthetic_problem(parse_class_spec("points:4096"), seed=2)
    assert problem.error(hypothesis_from_runs(4096, 0, ())) == pytest.approx(0.5 + 0.5 / 4096)
