"""Twin runs of the public schedule: neighbouring inputs, identical public outputs but for DP outputs.

Each test runs the release path twice (``twins.py``), on inputs that differ in one example (or one
user), and compares every public artefact field by field: the topics' messages in order, their
keys, the certificates minus the DP outputs, the ledger's entry ids, the budgets, the public pages,
and when each release was published on the injected clock.
"""

from __future__ import annotations

import pytest

from privstream.learning.private_learners import make_learner
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, make_vector_learner
from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import T0, Step, assert_twins, example, twins

YEAR = 365 * 86400.0


def time_stream(**release: object) -> StreamConfig:
    window = {"kind": "time", "seconds": 60.0, "allowed_lateness_seconds": 10.0, **release.pop("window", {})}  # type: ignore[dict-item]
    config = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "expected_size": 20,
        "window": window,
        **release,
    }
    return StreamConfig(name="s", hypothesis_class="thresholds:1024", release=config)


def steps(extra: dict[int, list[dict]] | None = None, until: int = 6) -> list[Step]:
    """One step a minute (5 s past each window's start), one example in windows 0, 2 and 3; ``extra``
    adds messages at given steps."""
    base = {0: [example(100, at=T0 + 5)], 2: [example(700, at=T0 + 125)], 3: [example(300, at=T0 + 185)]}
    out = []
    for i in range(until):
        messages = base.get(i, []) + (extra or {}).get(i, [])
        out.append(Step(T0 + 60 * i + 5, messages))
    return out


async def test_an_empty_window_is_closed_charged_and_released_like_any_other():
    """Window 1 is empty in one twin and holds one example in the other."""
    stream = time_stream()
    a, b = await twins(stream, steps(), steps({1: [example(650, at=T0 + 65)]}))
    assert_twins(a, b)
    windows = [m["release"]["certificate"]["window"]["window_id"] for m in a.messages]
    assert windows[:4] == [f"t60-L0-{int(T0 // 60) + i}" for i in range(4)]  # every window, in order


async def test_a_far_future_event_time_moves_nothing():
    """One twin has an example dated ten years ahead: it is dead-lettered before any window."""
    stream = time_stream()  # the default maximum skew (public) is minutes, not years
    far = example(900, at=T0 + 10 * YEAR)
    a, b = await twins(stream, steps(), steps({1: [far]}))
    assert_twins(a, b)
    assert a.late == b.late == 0  # nobody else's example became late
    assert b.invalid == {"event_time_out_of_range": 1} and a.invalid == {}


class FailsOn:
    """The generic learner, except that it raises when its data holds the point ``poison``."""

    def __init__(self, poison: int):
        self.inner = make_learner("generic")
        self.poison = poison
        self.name = self.inner.name

    def fit(self, hclass, xs, ys, **kwargs):
        if self.poison in list(xs):
            raise ArithmeticError("the learner cannot run on this data")
        return self.inner.fit(hclass, xs, ys, **kwargs)


async def test_a_learner_failing_on_the_data_releases_the_fallback_charged_identically():
    stream = time_stream()
    learner = FailsOn(777)
    a, b = await twins(stream, steps(), steps({0: [example(777, at=T0 + 6)]}), learner=learner)
    assert_twins(a, b)
    assert b.failures == 1 and a.failures == 0  # the operator sees it; the public does not


def test_user_level_count_windows_are_refused_naming_the_privacy_unit():
    with pytest.raises(ValueError, match=r"privacy_unit 'user' needs time windows"):
        StreamConfig(
            name="s",
            hypothesis_class="thresholds:1024",
            release={
                "learner": "generic",
                "epsilon": 1.0,
                "epsilon_budget": 100.0,
                "expected_size": 20,
                "privacy_unit": "user",
                "user_contribution_bound": 2,
                "window": {"kind": "count", "size": 10},
            },
        )


async def test_user_level_twins_differing_in_one_user_agree():
    """One twin has a user more, with more examples than the bound, in a window otherwise empty."""
    stream = time_stream(privacy_unit="user", user_contribution_bound=2)

    def users(extra: bool) -> list[Step]:
        out = []
        for i in range(6):
            messages = [
                example(100 + 10 * i + j, at=T0 + 60 * i + 1 + j, user=f"u{j}") for j in range(3) if i != 1
            ]
            if extra and i == 1:
                messages += [example(650 + j, at=T0 + 61 + j, user="z") for j in range(4)]
            out.append(Step(T0 + 60 * i + 5, messages))
        return out

    a, b = await twins(stream, users(False), users(True))
    assert_twins(a, b)


# -- streams of feature vectors: every registered vector learner --------------------------------------

VECTOR_PARAMS = {
    "semi-supervised": {"n_semi": 20},
    "kernel": {"frequencies": 16},
}  # the twins run in a second


def vector_stream(learner: str) -> StreamConfig:
    return StreamConfig(
        name="s",
        features=2,
        feature_bounds=[[0.0, 1.0], [0.0, 1.0]],
        release={
            "learner": learner,
            "learner_params": VECTOR_PARAMS.get(learner, {}),
            "epsilon": 1.0,
            "delta": 1e-6,
            "epsilon_budget": 100.0,
            "delta_budget": 1e-3,
            "expected_size": 20,
            "top_level": 1,
            "window": {"kind": "time", "seconds": 60.0, "allowed_lateness_seconds": 10.0},
        },
    )


def vector_steps(extra: dict[int, list[dict]] | None = None, until: int = 7) -> list[Step]:
    """Windows 0 (80 examples: enough that a schedule in the true n, not ``expected_size``, would
    show) and 2 (two) hold examples of the target ``1[x_2 >= x_1]``; the others are empty."""
    spread = [example([(0.37 * i) % 1, (0.61 * i) % 1], at=T0 + 1 + i / 20) for i in range(80)]
    base = {0: spread, 2: [example([0.9, 0.95], at=T0 + 125), example([0.3, 0.1], at=T0 + 126)]}
    return [Step(T0 + 60 * i + 5, base.get(i, []) + (extra or {}).get(i, [])) for i in range(until)]


@pytest.mark.parametrize("learner", sorted(VECTOR_LEARNERS))
@pytest.mark.parametrize(
    "neighbour",
    [
        # one example more, alone in a window otherwise empty
        {1: [example([0.5, 0.6], at=T0 + 65)]},
        # a hostile feature value, far outside the public bounds, in a window with others
        {2: [example([1e300, -1e300], at=T0 + 127)]},
        # one example more in a window whose other rows then all carry one label (an ERM would be constant)
        {0: [example([0.2, 0.9], at=T0 + 8, y=1)]},
    ],
    ids=["one-more-alone", "hostile-value", "one-more-same-label"],
)
async def test_vector_streams_twins_differing_in_one_example_agree(learner, neighbour):
    """Time windows of feature vectors (n private): every vector learner, every level, with one
    example more on one side; only the DP outputs (the models) may differ."""
    stream = vector_stream(learner)
    a, b = await twins(stream, vector_steps(), vector_steps(neighbour))
    assert_twins(a, b)
    assert len(a.messages) == 5 + 2  # windows 0-4 have closed (5 at T0 + 370), and level-1 nodes 0-1, 2-3
    assert {m["release"]["certificate"]["mechanism"] for m in a.messages} == {
        make_vector_learner(learner)
        .fit([], [], epsilon=1.0, delta=1e-6, bounds=[[0, 1], [0, 1]], expected_size=20)
        .mechanism
    }
