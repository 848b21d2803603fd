"""The ``classes`` setting of a stream of feature vectors: K from 2 to 256, the online learner it
needs, and the combinations that cannot run refused in one line (the CLI exits 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from privstream.agents.pipeline import RawRecord
from privstream.stream_app.cli import main
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings, StreamConfig


def stream(**fields: Any) -> dict[str, Any]:
    return {"name": "digits", "features": 2, "feature_bounds": [[0.0, 1.0]] * 2, **fields}


def test_a_vector_stream_has_two_classes_unless_it_says_more() -> None:
    assert StreamConfig(**stream()).classes == 2
    assert StreamConfig(**stream(classes=10)).classes == 10
    assert StreamConfig(**stream(classes=256, online_learner="multiclass-perceptron")).classes == 256


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"classes": 1}, "greater than or equal to 2"),
        ({"classes": 257}, "less than or equal to 256"),
        ({"classes": 10, "online_learner": "logistic"}, "online_learner 'logistic' predicts 0/1 labels"),
        ({"classes": 3, "online_params": {"margn": 0.1}}, "did you mean 'margin'"),
        ({"classes": 3, "online_params": {"margin": 0}}, "parameter 'margin'"),
        (
            {"classes": 3, "release": {"learner": "semi-supervised", "epsilon_budget": 1.0}},
            "release.learner: 'semi-supervised' releases a 0/1 rule without class scores; a stream of 3 "
            "classes releases with 'halfspaces'",
        ),
    ],
)
def test_what_cannot_run_is_refused_naming_the_setting(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        StreamConfig(**stream(**fields))
    assert message in str(info.value)


def test_a_class_stream_takes_no_classes() -> None:
    with pytest.raises(ValidationError, match="feature_names, classes, online_learner"):
        StreamConfig(name="t", hypothesis_class="thresholds:16", classes=3)


def test_the_worker_exits_2_in_one_line_on_a_binary_learner_of_ten_classes(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"streams": [stream(classes=10, online_learner="averaged-perceptron")]}))
    assert main(["worker", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privstream worker: error: ")
    assert "online_learner 'averaged-perceptron' predicts 0/1 labels" in err


def test_the_service_learns_and_shows_a_stream_of_three_classes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        kafka_bootstrap="127.0.0.1:9", data_dir=tmp_path, streams=[stream(classes=3)], _env_file=None
    )
    service = build_service(settings)
    try:
        rows = [([0.9, 0.1], 0), ([0.1, 0.9], 2), ([0.5, 0.5], 1), ([0.5, 0.5], 3), ([0.5, 0.5], -1)]
        records = [
            RawRecord(
                "examples", 0, i, b"digits", json.dumps({"stream_id": "digits", "x": x, "y": y}).encode()
            )
            for i, (x, y) in enumerate(rows)
        ]
        out = service.pipeline.process(records)
        assert len(out.predictions) == 1 and len(out.dead_letters) == 2  # labels 3 and -1: no class
        status = service.status()
        assert status["invalid"] == status["invalid_by_reason"]["invalid_label"] == 2
        digits = status["streams"]["digits"]
        assert digits["classes"] == 3 and digits["examples"] == 3
        assert digits["online"]["learner"] == "multiclass-perceptron"
        assert len(digits["online"]["rule"]["classes"]) == 3
        assert digits["mistake_bound"] == 600  # ⌊2(d + 1)/γ²⌋ = 6/0.01 at the default margin 0.1
    finally:
        service.store.close()
