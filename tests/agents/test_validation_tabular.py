"""Tabular streams at ingest: a row (``x`` an object of cells) is encoded into the stream's feature
vector before the checks, or refused with its reason; a batch's rows each decide their own fate and
a refused row's dead letter holds the row as sent."""

from __future__ import annotations

import json

import pytest
from privstream_client.tabular import TabularEncoder

from privstream.agents.validation import ExampleValidator, ValidExample, ValidRows, vector_domain
from privstream.stream_app.tabular import row_encoder

COLUMNS = [
    {"name": "age", "bounds": [18, 90], "impute": 40},
    {"name": "plan", "categories": ["free", "pro"]},
    {"name": "city", "categories": ["paris"], "unknown": "other"},
]


@pytest.fixture
def validator() -> ExampleValidator:
    encoder = TabularEncoder.from_dicts(COLUMNS)
    return ExampleValidator(
        {"t": vector_domain(encoder.dimension), "v": vector_domain(2)},
        encoders={"t": row_encoder(encoder)},
    )


def raw(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_a_row_is_encoded_into_the_feature_vector(validator: ExampleValidator) -> None:
    example = validator.read(raw(stream_id="t", x={"age": 30, "plan": "pro", "city": "lyon"}, y=1))
    assert type(example) is ValidExample
    assert example.x == [30.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    missing = validator.validate(
        b'{"stream_id": "t", "x": {"age": NaN, "plan": "free", "city": "paris"}, "y": 0}'
    )
    assert type(missing) is ValidExample and missing.x == [40.0, 1.0, 1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("x", "reason"),
    [
        ({"age": 30, "plan": "gold", "city": "paris"}, "unknown_category"),
        ({"age": 30, "city": "paris"}, "missing_value"),
        ({"age": 30, "plan": None, "city": "paris"}, "missing_value"),
        ({"age": "old", "plan": "pro", "city": "paris"}, "wrong_type"),
        ({"age": 30, "plan": "pro", "city": "paris", "extra": 1}, "wrong_type"),
        # the vector itself is refused too: a tabular stream's examples are rows
        ([30.0, 0.0, 0.0, 1.0, 0.0, 1.0], "wrong_type"),
    ],
)
def test_a_refused_row_gets_its_reason_on_the_fast_path_and_the_full_one(
    validator: ExampleValidator, x: object, reason: str
) -> None:
    for check in (validator.read, validator.validate):
        invalid = check(raw(stream_id="t", x=x, y=1))
        assert getattr(invalid, "reason", None) == reason, invalid


def test_the_schema_still_decides_what_is_not_the_row(validator: ExampleValidator) -> None:
    good = {"age": 30, "plan": "pro", "city": "paris"}
    assert validator.validate(raw(stream_id="t", x=good, y=7)).reason == "invalid_label"
    assert validator.validate(raw(stream_id="t", x=good, y=1, id="e" * 201)).reason == "wrong_type"
    assert validator.validate(raw(stream_id="t", x=good, y=1, event_time="soon")).reason == "wrong_type"
    timed = validator.validate(raw(stream_id="t", x=good, y=-1, event_time="2026-12-03T12:00:00", id="e1"))
    assert type(timed) is ValidExample and timed.y == 0 and timed.id == "e1"
    assert timed.x == [30.0, 0.0, 0.0, 1.0, 1.0, 0.0] and timed.event_time is not None
    assert validator.validate(raw(stream_id="t", y=1)).reason == "missing_field"
    # a row is a point only on a tabular stream
    assert validator.validate(raw(stream_id="v", x={"a": 1}, y=1)).reason == "wrong_type"
    assert validator.validate(raw(stream_id=["t"], x=good, y=1)).reason == "wrong_type"


def test_a_batch_keeps_its_good_rows_and_dead_letters_each_refused_row_as_sent(
    validator: ExampleValidator,
) -> None:
    xs = [
        {"age": 30, "plan": "pro", "city": "paris"},
        {"age": 30, "plan": "gold", "city": "paris"},
        {"plan": "free", "city": "rome"},
        {"age": 50, "city": "paris"},
        {"age": 60, "plan": "free", "city": "paris"},
    ]
    rows = validator.validate(raw(stream_id="t", xs=xs, ys=[1, 0, 1, 0, 9]))
    assert type(rows) is ValidRows
    assert rows.rows == [0, 2]
    assert rows.xs == [[30.0, 0.0, 0.0, 1.0, 1.0, 0.0], [40.0, 1.0, 1.0, 0.0, 0.0, 1.0]]
    reasons = {r.row: r.invalid.reason for r in rows.rejected}
    assert reasons == {1: "unknown_category", 3: "missing_value", 4: "invalid_label"}
    # each row's verdict is the one it gets alone, and its dead letter is that single message
    for rejected in rows.rejected:
        alone = validator.validate(rejected.value)
        assert alone.reason == rejected.invalid.reason
        assert json.loads(rejected.value)["x"] == xs[rejected.row]
