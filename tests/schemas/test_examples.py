"""The Example schema: label normalisation and rejection of malformed input."""

import json

import pytest
from pydantic import ValidationError

from privstream.schemas import Example
from privstream.schemas.export import DEFAULT_DIR, render_schemas


@pytest.mark.parametrize(("label", "expected"), [(0, 0), (1, 1), (-1, 0), (True, 1), (False, 0)])
def test_accepted_labels_are_normalised_to_0_1(label, expected):
    example = Example.model_validate_json(json.dumps({"stream_id": "s", "x": 4, "y": label}))
    assert example.y == expected


@pytest.mark.parametrize("label", [2, -2, "1", 0.5, None, [1]])
def test_other_labels_are_rejected(label):
    with pytest.raises(ValidationError):
        Example.model_validate_json(json.dumps({"stream_id": "s", "x": 4, "y": label}))


@pytest.mark.parametrize(
    "payload",
    [
        {"x": 1, "y": 1},  # no stream
        {"stream_id": "s", "y": 1},  # no x
        {"stream_id": "s", "x": "1", "y": 1},  # x as a string is not silently coerced
        {"stream_id": "s", "x": 1.5, "y": 1},
        {"stream_id": "s", "x": -3, "y": 1},
        {"stream_id": "", "x": 1, "y": 1},
        {"stream_id": "has space", "x": 1, "y": 1},
    ],
)
def test_malformed_examples_are_rejected(payload):
    with pytest.raises(ValidationError):
        Example.model_validate_json(json.dumps(payload))


def test_optional_fields_and_unknown_fields():
    example = Example.model_validate_json(
        '{"stream_id": "s", "x": 2, "y": 1, "user_id": "u7", "event_time": "2026-01-01T00:00:00",'
        ' "id": "e1", "extra": 5}'
    )
    assert example.user_id == "u7" and example.id == "e1"
    assert example.event_time is not None and example.event_time.tzinfo is not None


def test_committed_json_schemas_match_the_models():
    """The JSON Schemas in the package are regenerated from the models, never edited by hand."""
    for file_name, text in render_schemas().items():
        committed = (DEFAULT_DIR / file_name).read_text()
        assert committed == text, f"{file_name} is stale: run python -m privstream.schemas.export"


def test_example_schema_requires_the_core_fields():
    schema = json.loads((DEFAULT_DIR / "example.schema.json").read_text())
    assert set(schema["required"]) == {"stream_id", "x", "y"}
