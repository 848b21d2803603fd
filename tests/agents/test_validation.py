"""Validation of raw messages: every invalid kind maps to its reason."""

import json

import pytest

from privstream.agents.validation import INVALID_REASONS, ExampleValidator, Invalid
from privstream.schemas import Example


def domain_check(n):
    def check(x):
        if not 0 <= x < n:
            raise ValueError(f"x={x} is outside the domain [0, {n})")

    return check


@pytest.fixture
def validator():
    return ExampleValidator({"s": domain_check(100)})


def raw(**fields):
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"{nope", "invalid_json"),
        (b"", "invalid_json"),
        (None, "invalid_json"),
        (raw(stream_id="s", y=1), "missing_field"),
        (raw(x=1, y=1), "missing_field"),
        (raw(stream_id="s", x="3", y=1), "wrong_type"),
        (raw(stream_id="s", x=[3], y=1), "wrong_type"),
        (b"[1, 2, 3]", "wrong_type"),
        (raw(stream_id="s", x=3, y=7), "invalid_label"),
        (raw(stream_id="s", x=3, y="yes"), "invalid_label"),
        (raw(stream_id="s", x=100, y=1), "out_of_domain"),
        (raw(stream_id="s", x=-1, y=1), "out_of_domain"),
        (raw(stream_id="other", x=3, y=1), "unknown_stream"),
    ],
)
def test_invalid_messages_get_their_reason(validator, message, reason):
    result = validator.validate(message)
    assert isinstance(result, Invalid), result
    assert result.reason == reason
    assert result.reason in INVALID_REASONS
    assert result.detail


def test_valid_message(validator):
    result = validator.validate(raw(stream_id="s", x=99, y=-1))
    assert result == Example(stream_id="s", x=99, y=0)
