"""A tabular stream's settings: its public columns give its features, their bounds and names; a
declaration that cannot be encoded is refused in one line (the CLI exits 2)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from privstream.stream_app.cli import main
from privstream.stream_app.settings import Settings, StreamConfig

COLUMNS = [
    {"name": "age", "bounds": [18, 90], "impute": 40},
    {"name": "plan", "categories": ["free", "pro"], "unknown": "other"},
]


def test_the_columns_give_features_bounds_and_names() -> None:
    stream = StreamConfig(name="t", columns=COLUMNS, release={"learner": "halfspaces", "epsilon_budget": 1.0})
    assert stream.kind == "vector"
    assert stream.features == 5
    assert stream.feature_labels == ["age", "age:missing", "plan:free", "plan:pro", "plan:other"]
    assert stream.feature_bounds == [(18.0, 90.0)] + [(0.0, 1.0)] * 4
    assert stream.encoder is not None
    assert stream.encoder.encode({"age": 20, "plan": "team"}) == [20.0, 0.0, 0.0, 0.0, 1.0]
    assert StreamConfig(name="v", features=2, feature_bounds=[(0, 1)] * 2).encoder is None


def test_settings_read_back_from_their_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(streams=[{"name": "t", "columns": COLUMNS}], _env_file=None)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert Settings(_env_file=None) == settings


@pytest.mark.parametrize(
    ("stream", "says"),
    [
        ({"columns": COLUMNS, "features": 3}, "leave features out"),
        ({"columns": COLUMNS, "feature_names": ["a"] * 5}, "leave feature_names out"),
        ({"columns": COLUMNS, "hypothesis_class": "thresholds:8"}, "not a hypothesis_class"),
        ({"columns": [{"name": "a", "bounds": [0, 1], "impute": 3}]}, "within the bounds"),
        ({"columns": [{"name": "a", "categories": ["x"], "unknown": "drop"}]}, "unknown"),
        ({"columns": [{"name": "a", "bounds": [0, 1]}, {"name": "a", "categories": ["x"]}]}, "distinct"),
        ({"columns": []}, "at least 1 item"),
    ],
)
def test_a_bad_tabular_stream_is_refused(stream: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Settings(streams=[{"name": "t", **stream}], _env_file=None)


def test_the_worker_exits_2_in_one_line_on_a_bad_column(tmp_path, capsys) -> None:
    config = tmp_path / "config.json"
    bad = {"name": "plan", "categories": ["free", "pro"], "impute": "gold"}
    config.write_text(json.dumps({"streams": [{"name": "t", "columns": [bad]}]}))
    assert main(["worker", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "column 'plan': impute must be one of the categories" in err
