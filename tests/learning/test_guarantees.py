"""The privacy map as data: the steps from an algorithm's guarantee to a release's, and the check."""

from __future__ import annotations

import math

import pytest

from privstream.learning.guarantees import CapReplacement, GroupPrivacy, Guarantee, group_factor, shortfall
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded

STEPS = [(), (GroupPrivacy(3),), (CapReplacement(),), (GroupPrivacy(2), CapReplacement())]


@pytest.mark.parametrize("steps", STEPS, ids=["none", "user-3", "cap", "user-2-and-cap"])
@pytest.mark.parametrize("charge", [(1.0, 0.0), (0.3, 1e-6), (4.0, 1e-3)])
def test_what_the_charge_allows_carried_back_is_the_charge(steps, charge):
    """required() and through() are the two directions of group privacy: exact up to rounding."""
    need = Guarantee.required(*charge, relation="add-remove-one", steps=steps)
    back = need.through(steps, unit="user")
    assert back.epsilon == pytest.approx(charge[0], rel=1e-12)
    assert back.delta == pytest.approx(charge[1], rel=1e-12, abs=0)
    assert back.derivation == steps and back.unit == "user" and back.relation == "add-remove-one"
    k = group_factor(steps)
    assert need.epsilon == pytest.approx(charge[0] / k)
    assert shortfall(need, need) is None


def test_steps_compose_by_the_product_of_their_k():
    """Group privacy over 2 then 3 changes equals one step over 6 (the exponents add up)."""
    g = Guarantee(epsilon=0.1, delta=1e-7, relation="replace-one")
    twice = g.through((GroupPrivacy(2),), unit="row").through((GroupPrivacy(3),), unit="user")
    once = g.through((GroupPrivacy(6),), unit="user")
    assert twice.epsilon == pytest.approx(once.epsilon) and twice.delta == pytest.approx(once.delta)
    assert once.delta == pytest.approx(6 * math.exp(5 * 0.1) * 1e-7)


@pytest.mark.parametrize(
    ("returned", "reason"),
    [
        (Guarantee(epsilon=0.5000001, delta=0.0, relation="add-remove-one"), "spent epsilon"),
        (Guarantee(epsilon=0.5, delta=1e-12, relation="add-remove-one"), "spent delta"),
        (Guarantee(epsilon=0.5, delta=0.0, relation="replace-one"), "holds under replace-one"),
        (Guarantee(epsilon=0.5, delta=0.0, relation="add-remove-one", unit="user"), "per user"),
        (Guarantee(epsilon=math.nan, delta=0.0, relation="add-remove-one"), "spent epsilon"),
    ],
)
def test_a_guarantee_beyond_the_allowance_is_named(returned, reason):
    need = Guarantee.required(1.0, 0.0, relation="add-remove-one", steps=(CapReplacement(),))
    assert need.epsilon == 0.5
    problem = shortfall(need, returned)
    assert problem is not None and reason in problem


def test_a_group_step_needs_a_positive_integer():
    for k in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="group privacy needs an int k >= 1"):
            GroupPrivacy(k)  # type: ignore[arg-type]


def test_every_result_states_its_guarantee_from_its_own_fields():
    hclass = parse_class_spec("thresholds:64")
    xs = list(range(0, 64, 2)) + list(range(1, 36, 2))
    for expected_size, relation in ((None, "replace-one"), (50, "add-remove-one")):
        result = make_learner("generic").fit(
            hclass, xs, [int(x >= 30) for x in xs], epsilon=0.7, rng=seeded(3), expected_size=expected_size
        )
        g = result.privacy_guarantee
        assert (g.epsilon, g.delta, g.relation, g.unit) == (result.epsilon, result.delta, relation, "row")
        assert g.statement()["algorithm_epsilon"] == result.epsilon


def _registered() -> list[tuple[str, str]]:
    from privstream.learning.private_learners.base import LEARNERS
    from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS
    from privstream.learning.sanitizers.base import SANITIZERS

    return (
        [("learner", n) for n in sorted(LEARNERS)]
        + [("vector", n) for n in sorted(VECTOR_LEARNERS)]
        + [("sanitizer", n) for n in sorted(SANITIZERS)]
    )


@pytest.mark.parametrize(("kind", "name"), _registered(), ids=lambda v: str(v))
def test_every_algorithm_states_the_relation_its_mode_holds_under(kind, name):
    """n private (``expected_size``): add/remove-one; n public: replace-one. A result that says
    otherwise is refused by the release path, so every registered algorithm must say it right."""
    import numpy as np

    from privstream.learning.private_learners.vector_base import make_vector_learner
    from privstream.learning.sanitizers import make_sanitizer

    hclass = parse_class_spec("thresholds:64")
    for expected_size, relation in ((None, "replace-one"), (10, "add-remove-one")):
        options = {"epsilon": 1.0, "delta": 1e-6, "rng": seeded(0), "expected_size": expected_size}
        if kind == "vector":
            xs = np.zeros((10, 2)) if expected_size is None else np.zeros((0, 2))
            result = make_vector_learner(name).fit(
                xs, np.zeros(len(xs), np.uint8), bounds=[[0, 1], [0, 1]], **options
            )
        else:
            xs = np.zeros(10 if expected_size is None else 0, np.int64)
            algorithm = make_learner(name) if kind == "learner" else make_sanitizer(name)
            result = algorithm.fit(hclass, xs, np.zeros(len(xs), np.uint8), **options)
        assert result.privacy_guarantee.relation == relation
