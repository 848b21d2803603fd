"""Validation of raw messages: every invalid kind maps to its reason."""

import json

import pytest

from privstream.agents.validation import INVALID_REASONS, ExampleValidator, Invalid, ValidExample
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
    assert result == ValidExample(stream_id="s", x=99, y=0)


# --- the fast path must agree with the pydantic model on every input ------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from privstream.schemas import ExampleBatch  # noqa: E402

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=250),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
field_values = {
    "stream_id": st.sampled_from(["s", "other", ""]) | json_values,
    "x": st.integers(-5, 120) | json_values,
    "y": st.sampled_from([0, 1, -1, 2, True, False, "1", 1.0]) | json_values,
    "user_id": st.none() | st.text(max_size=210) | json_values,
    "id": st.none() | st.text(max_size=210),
    "extra": json_values,
    "event_time": st.sampled_from(["2026-01-01T00:00:00", "not a time", None]),
}
messages = st.fixed_dictionaries({}, optional=field_values)


def reference(validator: ExampleValidator, raw: bytes):
    """What the plain pydantic path decides (the behaviour before the fast path existed)."""
    from pydantic import ValidationError

    from privstream.agents.validation import _classify

    try:
        example = Example.model_validate_json(raw)
    except ValidationError as exc:
        return _classify(exc)
    return validator._check_stream(ValidExample.of(example))


@settings(max_examples=400, deadline=None)
@given(messages)
def test_fast_path_agrees_with_pydantic(message):
    validator = ExampleValidator({"s": domain_check(100)})
    raw = json.dumps(message).encode()
    got, want = validator.validate(raw), reference(validator, raw)
    if isinstance(want, Invalid):
        assert isinstance(got, Invalid) and got.reason == want.reason
    else:
        assert got == want and type(got.y) is int


def test_example_batches_are_validated_as_a_whole(validator):
    ok = validator.validate(raw(stream_id="s", xs=[1, 2, 3], ys=[1, -1, True]))
    assert isinstance(ok, ExampleBatch) and ok.ys == [1, 0, 1]
    assert validator.validate(raw(stream_id="s", xs=[1, 100], ys=[1, 1])).reason == "out_of_domain"
    assert validator.validate(raw(stream_id="s", xs=[1, 2], ys=[1])).reason == "wrong_type"
    assert validator.validate(raw(stream_id="s", xs=[1], ys=[5])).reason == "invalid_label"
    assert validator.validate(raw(stream_id="zz", xs=[1], ys=[1])).reason == "unknown_stream"
    assert validator.validate(raw(stream_id="s", xs=[], ys=[])).reason == "wrong_type"


def test_user_level_streams_need_user_ids():
    validator = ExampleValidator({"u": domain_check(10)}, user_level=frozenset({"u"}))
    assert validator.validate(raw(stream_id="u", x=1, y=1)).reason == "missing_field"
    assert isinstance(validator.validate(raw(stream_id="u", x=1, y=1, user_id="a")), ValidExample)
    assert validator.validate(raw(stream_id="u", xs=[1, 2], ys=[1, 1], user_ids=["a", None])).reason \
        == "missing_field"


def test_vector_and_integer_streams_check_their_kind_of_point():
    from privstream.agents.validation import integer_domain, vector_domain

    validator = ExampleValidator({"v": vector_domain(2), "s": integer_domain(domain_check(10))})
    assert validator.validate(raw(stream_id="v", x=[0.5, 1], y=1)) == ValidExample("v", [0.5, 1.0], 1)
    assert validator.validate(raw(stream_id="v", x=3, y=1)).reason == "wrong_type"
    assert validator.validate(raw(stream_id="v", x=[1.0, 2.0, 3.0], y=1)).reason == "out_of_domain"
    assert validator.validate(raw(stream_id="s", x=[1.0], y=1)).reason == "wrong_type"
    assert validator.validate(b'{"stream_id": "v", "x": [NaN, 1], "y": 1}').reason == "wrong_type"
    batch = validator.validate(raw(stream_id="v", xs=[[0.1, 0.2], [0.3, 0.4]], ys=[0, 1]))
    assert isinstance(batch, ExampleBatch) and batch.xs == [[0.1, 0.2], [0.3, 0.4]]
