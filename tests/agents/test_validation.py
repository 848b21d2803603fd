"""Validation of raw messages: every invalid kind maps to its reason."""

import json
from typing import NamedTuple

import pytest

from privstream.agents.validation import (
    ENCODING_REASONS,
    INVALID_REASONS,
    ExampleValidator,
    Invalid,
    ValidExample,
)
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

from privstream.agents.validation import (  # noqa: E402
    SCHEMA_REASONS,
    STREAM_RULES,
    VALUE_REASONS,
    PlainExample,
    ValidRows,
    integer_domain,
    vector_domain,
)
from privstream.stream_app.sources.synthetic import hostile_messages  # noqa: E402

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
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


def reference(validator: ExampleValidator, raw: bytes | None):
    """What the plain pydantic path decides on a single example: the JSON as the validator reads it,
    the model, its first error classified, then the stream and its rules (the validator as it was
    before the fast path). A batch: its stream, then each row as the single example it stands for."""
    from privstream.agents.validation import MAX_MESSAGE_BYTES, read_json

    if raw is None:
        return Invalid("invalid_json", "")
    if len(raw) > MAX_MESSAGE_BYTES:
        return Invalid("message_too_large", "")
    data = read_json(raw)
    if isinstance(data, Invalid):
        return data
    if type(data) is not dict:
        return Invalid("wrong_type", "")
    if "xs" in data:
        return reference_batch(validator, data)
    return reference_example(validator, data)


def reference_example(validator: ExampleValidator, data: dict):
    from pydantic import ValidationError

    from privstream.agents.validation import classify

    try:
        example = ValidExample.of(Example.model_validate(data))
    except ValidationError as exc:
        return classify(exc)
    stream = validator._streams.get(example.stream_id)
    if stream is None:
        return Invalid("unknown_stream", "")
    for rule in STREAM_RULES:
        if rule.applies(stream):
            invalid = rule.check(stream, example.x, example.user_id, example.event_time)
            if invalid is not None:
                return invalid
    return example


COLUMNS = {"xs": "x", "ys": "y", "user_ids": "user_id", "event_times": "event_time", "ids": "id"}


class BatchVerdict(NamedTuple):
    kept: list[ValidExample]  # the valid rows, as single examples
    rejected: dict[int, str]  # row -> reason


def reference_batch(validator: ExampleValidator, data: dict):
    """A batch: an Invalid for the whole message (its stream, the shape of its columns), else
    (its valid rows as single examples, {row: reason}), each row decided as a single example."""
    from pydantic import TypeAdapter, ValidationError

    from privstream.agents.validation import HugeNumber
    from privstream.schemas.examples import StreamId

    def missing_or_wrong(value):
        if value is absent:
            return Invalid("missing_field", "")
        return Invalid("out_of_range" if isinstance(value, HugeNumber) else "wrong_type", "")

    absent = object()
    sid = data.get("stream_id", absent)
    try:
        TypeAdapter(StreamId).validate_python(sid, strict=True)
    except ValidationError:
        return missing_or_wrong(sid)
    given = {}
    for name in COLUMNS:
        column = data.get(name, absent)
        if name not in ("xs", "ys") and (column is None or column is absent):
            continue
        if not isinstance(column, list):
            return missing_or_wrong(column)
        given[name] = column
    if not given["xs"]:
        return Invalid("wrong_type", "")
    if sid not in validator._streams:
        return Invalid("unknown_stream", "")
    kept, rejected = [], {}
    for i in range(max(map(len, given.values()))):
        if any(i >= len(column) for column in given.values()):
            rejected[i] = "missing_field"
            continue
        row = {"stream_id": sid, **{COLUMNS[c]: column[i] for c, column in given.items()}}
        alone = reference_example(validator, row)
        if isinstance(alone, Invalid):
            rejected[i] = alone.reason
        else:
            kept.append(alone)
    return BatchVerdict(kept, rejected)


def assert_agrees(validator: ExampleValidator, raw: bytes | None) -> None:
    got, want = validator.validate(raw), reference(validator, raw)
    if isinstance(want, Invalid):
        assert isinstance(got, Invalid), (raw, got, want)
        assert got.reason == want.reason, (raw, got, want)
        assert got.detail and len(got.detail) < 1000  # a dead-letter header: bounded whatever the input
    elif isinstance(want, BatchVerdict):  # a batch: each row's fate is the fate it has alone
        kept, rejected = want
        assert isinstance(got, ValidRows), (raw, got)
        assert {r.row: r.invalid.reason for r in got.rejected} == rejected, raw
        assert [
            ValidExample(got.stream_id, *row)
            for row in zip(
                got.xs,
                got.ys,
                *(c or [None] * len(got.rows) for c in (got.user_ids, got.event_times, got.ids)),
                strict=True,
            )
        ] == kept
        assert sorted(got.rows + list(rejected)) == list(range(len(got.rows) + len(rejected)))
    else:
        assert got == want, raw
        if isinstance(got, ValidExample):
            assert type(got.y) is int


@settings(max_examples=400, deadline=None)
@given(messages)
def test_fast_path_agrees_with_pydantic(message):
    assert_agrees(ExampleValidator({"s": domain_check(100)}), json.dumps(message).encode())


# Messages of every kind, valid and invalid: near misses field by field (as text, unicode escaped or
# not), raw bytes, any JSON, literals the parser reads specially, batches, and the benchmark's flood.
near_fields = {
    "stream_id": st.sampled_from(["s", "u", "v", "other", "", "s s", "é", "s\n", "x" * 201, 3, None]),
    "x": st.sampled_from(
        [
            0,
            1,
            99,
            100,
            -1,
            10**30,
            -(10**30),
            1.0,
            2.5,
            "3",
            True,
            None,
            [],
            [0.5, 1],
            [1, 2, 3],
            ["a"],
            {"x": 1},
        ]
    ),
    "y": st.sampled_from([0, 1, -1, 2, True, False, 1.0, 0.0, "1", None, [0]]),
    "user_id": st.sampled_from(["alice", "", "ü" * 3, "x" * 200, "x" * 201, 7, ["a"], None]),
    "event_time": st.sampled_from(
        ["2026-01-01T00:00:00", "2026-01-01T00:00:00+02:00", "not a time", 0, 1.5e9, True, [], None]
    ),
    "id": st.sampled_from(["e1", "x" * 201, 1, None]),
    "extra": json_values,
}


@st.composite
def near_valid(draw) -> bytes:
    fields = draw(st.fixed_dictionaries({}, optional=near_fields))
    keys = draw(st.permutations(list(fields)))  # JSON order does not change the verdict
    return json.dumps({k: fields[k] for k in keys}, ensure_ascii=draw(st.booleans())).encode()


batches = st.fixed_dictionaries(
    {
        "stream_id": st.sampled_from(["s", "u", "v", "zz", ""]),
        "xs": st.sampled_from([[1, 2], [1, 100], [], "12", [[0.5, 1], [1, 2]], [1, -1]]),
    },
    optional={
        "ys": st.sampled_from([[1, 0], [1], [5, 1], [True, -1]]),
        "user_ids": st.sampled_from([["a", "b"], ["a", None], None]),
    },
).map(lambda d: json.dumps(d).encode())

literals = st.sampled_from(
    [
        b'{"stream_id": "s", "x": NaN, "y": 1}',
        b'{"stream_id": "s", "x": 1, "y": -Infinity}',
        b'{"stream_id": "s", "x": 1, "y": 1, "extra": NaN}',
        b'{"stream_id": "s", "x": 1e400, "y": 1}',
        b'{"stream_id": "s", "x": 1' + b"0" * 5000 + b', "y": 1}',
        b'{"stream_id": "v", "x": [NaN, 1], "y": 1}',
        b'{"stream_id": "s", "xs": [1, NaN], "ys": [1, 1]}',
        b'{"stream_id": "s", "x": 12, "y": 1, "stream_id": "nope"}',
        b'{"stream_id": "\\ud800", "x": 12, "y": 1}',
        b"\xef\xbb\xbf" + b'{"stream_id": "s", "x": 12, "y": 1}',
        b'{"stream_id": "s", "x": 12, "y": 1}\x00',
        b"[" * 3000 + b"]" * 3000,
        b"",
        b"null",
        b"NaN",
        b"12",
        b'"s"',
        b"\xff\xfe",
    ]
)

any_kind = (
    near_valid()
    | batches
    | literals
    | st.sampled_from(hostile_messages(10, "s", 100, seed=1))
    | st.binary(max_size=80)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.none()
)


@settings(max_examples=1500, deadline=None)
@given(any_kind)
def test_every_kind_of_message_gets_the_reason_pydantic_gives(message):
    points = integer_domain(domain_check(100))
    validator = ExampleValidator(
        {"s": integer_domain(domain_check(100), 100), "u": points, "v": vector_domain(2)},
        user_level=frozenset("u"),
    )
    assert_agrees(validator, message)


# --- the fast path (msgspec) reads what the full checks read --------------------------------------


def fast_and_full_validator() -> ExampleValidator:
    """Streams of every kind the fast path treats apart: integer points of a known domain (compared
    inline), of an unknown one (checked by the function), user level, feature vectors, and a time
    window's event-time skew (a rule that needs the event time parsed)."""
    return ExampleValidator(
        {
            "s": integer_domain(domain_check(100), 100),
            "n": integer_domain(domain_check(100)),
            "u": integer_domain(domain_check(100), 100),
            "v": vector_domain(2),
            "t": integer_domain(domain_check(100), 100),
        },
        user_level=frozenset({"u"}),
        event_time_skew={"t": 3600.0},
        clock=lambda: 1_767_225_600.0,  # 2026-01-01T00:00:00Z
    )


def assert_fast_agrees(validator: ExampleValidator, raw: bytes | None) -> None:
    """``read`` (the pipeline's, fast path first) gives what the full checks give, field for field."""
    full = validator._validate(raw)
    fast = validator.read(raw)
    if type(fast) is PlainExample:
        assert isinstance(full, ValidExample), (raw, full)
        assert (fast.stream_id, fast.x, fast.y, fast.user_id, fast.event_time, fast.id) == tuple(full), raw
        assert type(fast.y) is int and type(full.y) is int
    else:
        assert fast == full, raw
    assert validator.validate(raw) == full, raw


near_fast_fields = {
    **near_fields,
    "stream_id": st.sampled_from(["s", "n", "u", "v", "t", "other", "s\n", "x" * 201, 3]),
    "event_time": st.sampled_from(
        ["2026-01-01T00:10:00Z", "2025-01-01T00:00:00", "2026-01-01", 1_767_225_600, "not a time", True, None]
    ),
}


@st.composite
def near_fast(draw) -> bytes:
    fields = draw(st.fixed_dictionaries({}, optional=near_fast_fields))
    keys = draw(st.permutations(list(fields)))
    return json.dumps({k: fields[k] for k in keys}, ensure_ascii=draw(st.booleans())).encode()


#: What msgspec reads where the schema's reader does not, or the other way round: the fast path must
#: leave each to the full checks.
READERS_DIFFER = [
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": "\xff"}',  # not UTF-8
    b'{"stream_id": "s", "x": 3, "y": 1, "\xff": 1}',
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": ' + b"[" * 300 + b"]" * 300 + b"}",  # deep, not too deep
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": ' + b"[" * 70 + b"]" * 70 + b"}",
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": 1' + b"0" * 5000 + b"}",  # more digits than int() reads
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": "\\ud800"}',  # half a surrogate pair
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": 1e999}',
    b'{"stream_id": "s", "x": 3, "y": 1, "extra": NaN}',
    b'{"stream_id": "s", "x": 3, "y": 1, "xs": null}',
    b'{"stream_id": "s", "x": 3, "y": 1, "event_time": null}',
    b'{"stream_id": "s", "x": 3, "y": 1, "x": 4}',
    b'{"stream_id": "s", "x": 3.0, "y": 1}',
    b'{"stream_id": "s", "x": 1e2, "y": 1}',
    b'{"stream_id": "s", "x": 3, "y": 1.0}',
    b'{"stream_id": "s", "x": 3, "y": true}',
    b'{"stream_id": "s", "x": 3, "y": -1}',
    b'{"stream_id": "s", "x": 100, "y": 1}',
    b'{"stream_id": "s", "x": -0, "y": 1}',
    b'{"stream_id": "s", "x": 3' + b"0" * 40 + b', "y": 1}',
    b'{"stream_id": "v", "x": [1e999, 1], "y": 1}',
    b'{"stream_id": "v", "x": [1' + b"0" * 400 + b', 1], "y": 1}',
    b'{"stream_id": "v", "x": [true, 1], "y": 1}',
    b'{"stream_id": "v", "x": ["1", 1], "y": 1}',
    b'{"stream_id": "v", "x": [9007199254740993, 0.1], "y": 1}',
    b'{"stream_id": "u", "x": 3, "y": 1, "user_id": "a\\u0000"}',
    b'{"stream_id": "\\u0073", "x": 3, "y": 1}',
    b'{"stream_id": "s", "x": 3, "y": 1}  ',
    b'{"stream_id": "s", "x": 3, "y": 1} x',
    b'{"stream_id": "t", "x": 3, "y": 1, "event_time": "2026-01-01T00:10:00Z"}',
    b'{"stream_id": "t", "x": 3, "y": 1, "event_time": "2030-01-01T00:10:00Z"}',
    b'{"stream_id": "t", "x": 3, "y": 1, "event_time": [1]}',
]


@pytest.mark.parametrize("message", READERS_DIFFER)
def test_the_fast_path_leaves_what_the_readers_read_differently_to_the_full_checks(message):
    assert_fast_agrees(fast_and_full_validator(), message)


@settings(max_examples=1500, deadline=None)
@given(near_fast() | any_kind)
def test_the_fast_path_agrees_with_the_full_checks(message):
    assert_fast_agrees(fast_and_full_validator(), message)


def test_the_usual_message_takes_the_fast_path():
    """Else the pipeline would be as slow as before, with every test still green."""
    validator = fast_and_full_validator()
    assert type(validator.read(raw(stream_id="s", x=3, y=1, id="e1"))) is PlainExample
    assert type(validator.read(raw(stream_id="t", x=3, y=0))) is PlainExample


def test_the_reasons_are_the_schemas_then_the_rules():
    """The reasons are metric labels and dead-letter headers: the existing ones stay, in order."""
    assert INVALID_REASONS[:6] == (
        "invalid_json",
        "missing_field",
        "wrong_type",
        "invalid_label",
        "out_of_domain",
        "unknown_stream",
    )
    rules = {r for rule in STREAM_RULES for r in rule.reasons}
    reading = {"unknown_stream", "message_too_large", *VALUE_REASONS}
    assert set(INVALID_REASONS) == set(SCHEMA_REASONS) | rules | reading | set(ENCODING_REASONS)
    assert len(set(INVALID_REASONS)) == len(INVALID_REASONS)
    from privstream.stream_app.metrics import ServiceMetrics

    assert set(ServiceMetrics(["s"]).invalid_counts) == set(INVALID_REASONS)


def test_stream_rules_apply_in_order_and_the_first_broken_one_names_the_reason():
    validator = ExampleValidator({"u": integer_domain(domain_check(10))}, user_level=frozenset({"u"}))
    # Outside the domain and without a user: the domain rule comes first.
    assert validator.validate(raw(stream_id="u", x=50, y=1)).reason == "out_of_domain"
    assert validator.validate(raw(stream_id="u", x=5, y=1)).reason == "missing_field"
    # A schema error comes before any rule: an unknown stream with a bad label is a bad label.
    assert validator.validate(raw(stream_id="zz", x=5, y=3)).reason == "invalid_label"


def test_details_of_huge_values_stay_short():
    from privstream.learning.hypothesis_classes import parse_class_spec

    validator = ExampleValidator({"s": integer_domain(parse_class_spec("thresholds:100").check_point)})
    for message in (
        raw(stream_id="s", x="x" * 100_000, y=1),
        raw(stream_id="s", x=10**300, y=1),
        raw(stream_id="s", x=3, y=[0] * 100_000),
        raw(stream_id="s", x=-(10**300), y=1),
        raw(stream_id="s" * 100_000, x=1, y=1),
    ):
        result = validator.validate(message)
        assert isinstance(result, Invalid) and len(result.detail) < 200, result.detail[:300]


def test_example_batches_are_validated_row_by_row(validator):
    ok = validator.validate(raw(stream_id="s", xs=[1, 2, 3], ys=[1, -1, True]))
    assert isinstance(ok, ValidRows) and ok.ys == [1, 0, 1] and ok.rows == [0, 1, 2] and not ok.rejected

    def rejected(**batch):
        rows = validator.validate(raw(**batch))
        return rows.rows, [(r.row, r.invalid.reason) for r in rows.rejected]

    assert rejected(stream_id="s", xs=[1, 100], ys=[1, 1]) == ([0], [(1, "out_of_domain")])
    assert rejected(stream_id="s", xs=[1, 2], ys=[1]) == ([0], [(1, "missing_field")])
    assert rejected(stream_id="s", xs=[1, 2], ys=[5, 0]) == ([1], [(0, "invalid_label")])
    # what concerns every row rejects the message
    assert validator.validate(raw(stream_id="zz", xs=[1], ys=[1])).reason == "unknown_stream"
    assert validator.validate(raw(stream_id="s", xs=[], ys=[])).reason == "wrong_type"
    assert validator.validate(raw(stream_id="s", xs=[1])).reason == "missing_field"
    assert validator.validate(raw(stream_id="s", xs=[1], ys=[1], ids="a")).reason == "wrong_type"


def test_a_batch_row_gets_its_true_reason():
    """NaN in a batch was labelled missing_field (the batch was read as a single example without
    an x), a 10,000-digit integer invalid_json (the whole message)."""
    validator = ExampleValidator({"s": domain_check(100), "v": vector_domain(2)})
    huge = b"1" + b"0" * 10_000
    rows = validator.validate(b'{"stream_id": "s", "xs": [1, NaN, ' + huge + b', 2], "ys": [1, 1, 1, 0]}')
    assert [(r.row, r.invalid.reason) for r in rows.rejected] == [(1, "not_finite"), (2, "out_of_range")]
    assert rows.xs == [1, 2] and rows.rows == [0, 3]
    rows = validator.validate(b'{"stream_id": "v", "xs": [[0.5, Infinity], [1, 2]], "ys": [1, 1]}')
    assert [(r.row, r.invalid.reason) for r in rows.rejected] == [(0, "not_finite")]
    assert rows.xs == [[1.0, 2.0]]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b'{"stream_id": "s", "x": NaN, "y": 1}', "not_finite"),
        (b'{"stream_id": "s", "x": -Infinity, "y": 1}', "not_finite"),
        (b'{"stream_id": "s", "x": 1e400, "y": 1}', "not_finite"),
        (b'{"stream_id": "v", "x": [NaN, 1], "y": 1}', "not_finite"),
        (b'{"stream_id": "s", "x": 1' + b"0" * 10_000 + b', "y": 1}', "out_of_range"),
        (b'{"stream_id": "s", "x": -1' + b"0" * 10_000 + b', "y": 1}', "out_of_range"),
        (b'{"stream_id": "v", "x": [1' + b"0" * 10_000 + b', 1], "y": 1}', "out_of_range"),
        (b'{"stream_id": "s", "x": 3, "y": 1' + b"0" * 10_000 + b"}", "out_of_range"),
        (b'{"stream_id": "s", "x": 3, "y": 1, "id": 1' + b"0" * 10_000 + b"}", "out_of_range"),
        (b'{"stream_id": "s", "x": 3, "y": NaN}', "invalid_label"),
        (b'{"stream_id": "s", "x": 3, "y": 1, "pad": 1' + b"0" * 10_000 + b"}", None),  # ignored field
        (b'{"stream_id": "s", "x": 3, "y": 1, "pad": "' + b"p" * (8 << 20) + b'"}', "message_too_large"),
    ],
)
def test_values_and_sizes_get_their_true_reasons(message, reason):
    validator = ExampleValidator({"s": domain_check(100), "v": vector_domain(2)})
    result = validator.validate(message)
    assert (result.reason if isinstance(result, Invalid) else None) == reason, result
    assert reason is None or len(result.detail) < 200


def test_user_level_streams_need_user_ids():
    validator = ExampleValidator({"u": domain_check(10)}, user_level=frozenset({"u"}))
    assert validator.validate(raw(stream_id="u", x=1, y=1)).reason == "missing_field"
    assert isinstance(validator.validate(raw(stream_id="u", x=1, y=1, user_id="a")), ValidExample)
    rows = validator.validate(raw(stream_id="u", xs=[1, 2], ys=[1, 1], user_ids=["a", None]))
    assert rows.rows == [0] and [(r.row, r.invalid.reason) for r in rows.rejected] == [(1, "missing_field")]


def test_user_ids_with_a_nul_are_refused_at_the_example_level_too():
    """The window store keeps every stream's user ids as text: at the example level a NUL reached
    PostgreSQL, whose write failed (psycopg DataError), crashed the ingest loop, and did so again
    on every restart (the message was never committed)."""
    validator = ExampleValidator({"s": domain_check(10)})
    assert validator.validate(raw(stream_id="s", x=1, y=1, user_id="a\x00b")).reason == "wrong_type"
    rows = validator.validate(raw(stream_id="s", xs=[1, 2], ys=[1, 1], user_ids=["a", "\x00"]))
    assert rows.rows == [0] and [(r.row, r.invalid.reason) for r in rows.rejected] == [(1, "wrong_type")]


def test_user_ids_with_a_nul_are_dead_lettered_before_the_user_ledger():
    """The user ledger stores ids as text; PostgreSQL text cannot hold NUL, so such an id would make a
    release fail (data-dependently) unless it is refused at the door."""
    validator = ExampleValidator({"u": domain_check(10)}, user_level=frozenset({"u"}))
    assert validator.validate(raw(stream_id="u", x=1, y=1, user_id="a\x00b")).reason == "wrong_type"
    rows = validator.validate(raw(stream_id="u", xs=[1, 2], ys=[1, 1], user_ids=["a", "\x00"]))
    assert rows.rows == [0] and [(r.row, r.invalid.reason) for r in rows.rejected] == [(1, "wrong_type")]
    assert isinstance(validator.validate(raw(stream_id="u", x=1, y=1, user_id="a b")), ValidExample)


def test_vector_and_integer_streams_check_their_kind_of_point():
    validator = ExampleValidator({"v": vector_domain(2), "s": integer_domain(domain_check(10))})
    assert validator.validate(raw(stream_id="v", x=[0.5, 1], y=1)) == ValidExample("v", [0.5, 1.0], 1)
    assert validator.validate(raw(stream_id="v", x=3, y=1)).reason == "wrong_type"
    assert validator.validate(raw(stream_id="v", x=[1.0, 2.0, 3.0], y=1)).reason == "out_of_domain"
    assert validator.validate(raw(stream_id="s", x=[1.0], y=1)).reason == "wrong_type"
    batch = validator.validate(raw(stream_id="v", xs=[[0.1, 0.2], [0.3, 0.4]], ys=[0, 1]))
    assert isinstance(batch, ValidRows) and batch.xs == [[0.1, 0.2], [0.3, 0.4]]


def test_an_event_time_beyond_the_public_skew_is_refused_either_way():
    from privstream.agents.validation import ExampleValidator, integer_domain

    now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    validator = ExampleValidator(
        {"s": integer_domain(lambda x: None)}, event_time_skew={"s": 60.0}, clock=lambda: now
    )
    ok = validator.validate(b'{"stream_id": "s", "x": 1, "y": 1, "event_time": "2026-01-01T00:00:59Z"}')
    assert ok.event_time is not None
    for moment in ("2036-01-01T00:00:00Z", "2025-12-31T23:58:59Z"):
        raw = f'{{"stream_id": "s", "x": 1, "y": 1, "event_time": "{moment}"}}'.encode()
        assert validator.validate(raw).reason == "event_time_out_of_range"
    batch = b'{"stream_id": "s", "xs": [1, 2], "ys": [1, 0], "event_times": [null, "2036-01-01T00:00:00Z"]}'
    rows = validator.validate(batch)
    assert rows.rows == [0] and [(r.row, r.invalid.reason) for r in rows.rejected] == [
        (1, "event_time_out_of_range")
    ]
