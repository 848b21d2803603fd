"""The service on a tabular stream: rows are encoded at ingest, learned online, refused rows go to
the dead-letter topic with their reason, and clipped numeric cells are counted per feature."""

from __future__ import annotations

import json

import pytest

from privstream.agents.pipeline import RawRecord
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings

COLUMNS = [
    {"name": "age", "bounds": [18, 90], "impute": 40},
    {"name": "plan", "categories": ["free", "pro"]},
]


@pytest.fixture
def service(tmp_path):
    settings = Settings(
        kafka_bootstrap="127.0.0.1:9",
        data_dir=tmp_path,
        streams=[{"name": "t", "columns": COLUMNS}],
        _env_file=None,
    )
    service = build_service(settings)
    yield service
    service.store.close()


def record(offset: int, message: dict[str, object]) -> RawRecord:
    return RawRecord("examples", 0, offset, b"t", json.dumps(message).encode())


def test_rows_are_learned_and_refused_rows_dead_lettered_with_their_reason(service) -> None:
    good = [{"age": 20 + i % 60, "plan": "pro" if i % 3 else "free"} for i in range(60)]
    good[5]["age"] = None  # imputed
    good[7]["age"] = 200  # beyond the bounds: clipped by the learner, counted
    messages = [{"stream_id": "t", "x": x, "y": int(x["age"] is not None and x["age"] > 50)} for x in good]
    messages += [
        {"stream_id": "t", "x": {"age": 30, "plan": "gold"}, "y": 1},
        {"stream_id": "t", "x": {"age": 30}, "y": 0},
        {"stream_id": "t", "xs": [{"age": 33, "plan": "free"}, {"age": 33, "plan": "team"}], "ys": [1, 0]},
    ]
    out = service.pipeline.process([record(i, m) for i, m in enumerate(messages)])
    reasons = [dict(letter.headers)["error.reason"] for letter in out.dead_letters]
    assert reasons == [b"unknown_category", b"missing_value", b"unknown_category"]
    assert json.loads(out.dead_letters[0].value)["x"] == {"age": 30, "plan": "gold"}  # the row as sent
    status = service.status()["streams"]["t"]
    assert status["examples"] == 61
    assert list(status["online"]["rule"]["weights"]) == ["age", "age:missing", "plan:free", "plan:pro"]
    text = service.metrics.exposition().decode()
    assert 'privstream_examples_invalid_total{reason="unknown_category"} 2.0' in text
    assert 'privstream_examples_invalid_total{reason="missing_value"} 1.0' in text
    assert 'privstream_feature_values_clipped_total{feature="age",stream="t"} 1.0' in text
