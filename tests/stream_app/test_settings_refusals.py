"""A vector learner that cannot run on a stream's configuration is refused when the settings load,
in one line naming the setting, before any example arrives (the CLI exits 2)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from privstream.stream_app.cli import main
from privstream.stream_app.settings import Settings


def vector_stream(d: int, **release: object) -> dict[str, object]:
    return {
        "name": "v",
        "features": d,
        "feature_bounds": [[0.0, 1.0]] * d,
        "release": {"epsilon_budget": 1.0, **release},
    }


#: bayes-consistent with a small table, on 2,500-example windows.
GRID = {"learner": "bayes-consistent", "learner_params": {"max_cells": 2000}, "window": {"size": 2500}}


@pytest.mark.parametrize(
    ("d", "release", "message"),
    [
        (49, {"learner": "bayes-consistent"}, "bayes-consistent on 49 features needs K^d = 2^49 cubes"),
        # K grows with the node: level 3 of 2,500-example windows holds 20,000, K = ⌈20000^(1/14)⌉ = 3
        (7, {**GRID, "top_level": 3}, "3^7 cubes at a node of 20000 examples, more than max_cells = 2000"),
        (4, {"learner": "kernel"}, "kernel learner is (ε, δ)-DP: set release.delta"),
        (4, {"learner": "semi-supervised"}, "density estimator is (ε, δ)-DP: set release.delta"),
    ],
)
def test_a_learner_that_cannot_run_is_refused_naming_the_setting(d, release, message) -> None:
    with pytest.raises(ValidationError, match=r"release\.learner") as info:
        Settings(streams=[vector_stream(d, **release)])
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("d", "release"),
    [
        (49, {"learner": "halfspaces"}),
        (49, {"learner": "kernel", "delta": 1e-6, "delta_budget": 1e-6}),
        (4, {"learner": "bayes-consistent"}),
        (7, {**GRID, "top_level": 2}),  # 10,000 examples at the top: K = 2, 128 cubes
        (4, {"learner": "semi-supervised", "delta": 1e-6, "delta_budget": 1e-6}),
    ],
)
def test_a_learner_that_can_run_is_accepted(d, release) -> None:
    Settings(streams=[vector_stream(d, **release)])


def test_the_expected_size_decides_where_n_is_private() -> None:
    release = {**GRID, "window": {"kind": "time", "seconds": 60}}
    Settings(streams=[vector_stream(7, **release, expected_size=100)])  # K = 2: 128 cubes
    with pytest.raises(ValidationError, match="at a node of 20000 examples"):
        Settings(streams=[vector_stream(7, **release, expected_size=20_000)])


def test_the_worker_exits_2_in_one_line_on_bayes_consistent_with_49_features(tmp_path, capsys) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"streams": [vector_stream(49, learner="bayes-consistent")]}))
    assert main(["worker", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privstream worker: error: ")
    assert "release.learner: bayes-consistent on 49 features" in err and "max_cells" in err
