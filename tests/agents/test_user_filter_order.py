"""At the user level an excluded user displaces no one: the individual filter decides who is in
a node before its rows are cut to k per user and capped at ``max_node_examples``.

Twin runs (``twins.py``): user ``U`` has spent their lifetime budget (on another stream of the
deployment, identically in both runs); in one run ``U`` sends the earliest rows of a window, in
the other ``U`` sends nothing. The learner must see exactly the same rows, and everything public
must agree (``U`` is charged nothing in either run)."""

from __future__ import annotations

from typing import Any

import numpy as np

from privstream.agents.ledger_port import NodeRange, PrivacyCost
from privstream.learning.private_learners.vector_base import make_vector_learner
from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import T0, Step, TwinRun, assert_twins, example


class Recording:
    """A vector learner that records the input of each fit (in this process: the twins' executor
    is the default thread pool)."""

    def __init__(self) -> None:
        self.inner = make_vector_learner("halfspaces")
        self.name = self.inner.name
        self.inputs: list[tuple[list[list[float]], list[int]]] = []

    def fit(self, xs: Any, ys: Any, **kwargs: Any) -> Any:
        self.inputs.append((np.asarray(xs).tolist(), np.asarray(ys).tolist()))
        return self.inner.fit(xs, ys, **kwargs)


STREAM = StreamConfig(
    name="s",
    features=2,
    feature_bounds=[[0.0, 1.0], [0.0, 1.0]],
    release={
        "learner": "halfspaces",
        "epsilon": 1.0,
        "epsilon_budget": 1.0,
        "privacy_unit": "user",
        "user_contribution_bound": 2,
        "max_node_examples": 4,
        "expected_size": 4,
        "window": {"kind": "time", "seconds": 60.0, "allowed_lateness_seconds": 5.0},
    },
)


def steps(with_u: bool) -> list[Step]:
    """Window 0: U's two rows first (in one twin), then users a, b, c with two rows each."""
    rows = []
    if with_u:
        rows += [example([0.9, 0.1], at=T0 + 1, user="U"), example([0.8, 0.2], at=T0 + 2, user="U")]
    for i, user in enumerate(("a", "b", "c")):
        rows += [example([0.1 * i, 0.5], at=T0 + 10 + 2 * i, user=user)]
        rows += [example([0.5, 0.1 * i + 0.3], at=T0 + 11 + 2 * i, user=user)]
    return [Step(T0 + 30, rows), Step(T0 + 70), Step(T0 + 130)]


async def run(with_u: bool) -> tuple[Any, Recording]:
    learner = Recording()
    twin = TwinRun(STREAM, learner=learner)
    # U spent 0.5 of their lifetime 1.0 elsewhere in the deployment: a release at ε 1 excludes them.
    twin.ledger.register_stream("elsewhere", PrivacyCost(10.0, 0.0))
    twin.ledger.reserve("elsewhere", "w", "m", 0.5, 0.0, NodeRange.of(0, 0), users=["U"])
    observed = await twin.run(steps(with_u))
    assert twin.ledger.user_spent("U") == (0.5, 0.0)  # charged nothing by the stream
    return observed, learner


async def test_an_excluded_user_displaces_no_one_from_the_capped_node() -> None:
    with_u, learner_with_u = await run(with_u=True)
    without_u, learner_without_u = await run(with_u=False)
    # the fits of the data (each release's default, on zero examples, is fitted first)
    fitted_with_u = [rows for rows in learner_with_u.inputs if rows[0]]
    fitted_without_u = [rows for rows in learner_without_u.inputs if rows[0]]
    assert fitted_with_u[0] == fitted_without_u[0]  # the same rows reach the learner
    assert len(fitted_with_u[0][0]) == 4  # users a and b, two rows each: the cap, full
    assert_twins(with_u, without_u)
    assert with_u.dp == without_u.dp  # seeded alike and fed alike: even the models agree


EXHAUSTED = [f"x{i}" for i in range(300)]  # users who spent their lifetime budget elsewhere


def crowded_steps(with_exhausted: bool) -> list[Step]:
    """Window 0: users a, b, c with two rows each; in one twin 300 budget-exhausted users first,
    two rows each (600 rows, 150 times the cap)."""
    rows = []
    if with_exhausted:
        for i, user in enumerate(EXHAUSTED):
            rows += [example([0.9, 0.1], at=T0 + 1 + i / 100, user=user)] * 2
    for i, user in enumerate(("a", "b", "c")):
        rows += [example([0.1 * i, 0.5], at=T0 + 10 + 2 * i, user=user)]
        rows += [example([0.5, 0.1 * i + 0.3], at=T0 + 11 + 2 * i, user=user)]
    return [Step(T0 + 30, rows), Step(T0 + 70), Step(T0 + 130)]


async def run_crowded(with_exhausted: bool) -> tuple[Any, TwinRun]:
    # Each stored row read back at the close costs 10 ms on the run's clock: 600 rows more would
    # take the node 6 s past its close, beyond its 5 s slot, if they were stored.
    twin = TwinRun(STREAM, learner=Recording(), store_seconds_per_row=0.01)
    twin.ledger.register_stream("elsewhere", PrivacyCost(10.0, 0.0))
    twin.ledger.reserve("elsewhere", "w", "m", 0.5, 0.0, NodeRange.of(0, 0), users=EXHAUSTED)
    observed = await twin.run(crowded_steps(with_exhausted))
    return observed, twin


async def test_budget_exhausted_users_change_neither_the_release_nor_its_timing() -> None:
    """Twins whose node differs by 300 budget-exhausted users: they are excluded at ingest, their
    rows never stored, so the close reads the same rows, the same release goes out (not the
    default) at the same record timestamp, and none of them is charged."""
    crowded, crowded_twin = await run_crowded(with_exhausted=True)
    alone, alone_twin = await run_crowded(with_exhausted=False)
    assert crowded_twin.rows_stored == alone_twin.rows_stored  # the close touches the same rows
    assert_twins(crowded, alone)  # records, record timestamps, ledger, pages over time
    assert crowded.dp == alone.dp  # the same model: seeded alike and fed alike
    assert crowded.defaults == {} == alone.defaults  # the fits made their slots: no default
    assert all(crowded_twin.ledger.user_spent(user) == (0.5, 0.0) for user in EXHAUSTED)
