"""Hostile input against the ingest pipeline, offline (no broker): property-based fuzzing.

Whatever bytes arrive -- random bytes, deep or huge JSON, huge numbers, ``NaN``/``Infinity``
literals, wrong types, unicode, messages over the size limit -- ``IngestPipeline.process`` never
raises; every message is accounted for exactly once, either whole (a dead letter whose
``error.reason`` is one of :data:`INVALID_REASONS`) or row by row (each row of a batch, or the single
example, a prediction or a dead letter of its own); and a single-example message is valid exactly
when the schema (``Example``, pydantic) and the stream's domain say so -- the fast path never decides
otherwise.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import MAX_DEAD_LETTER_VALUE_BYTES, IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import INVALID_REASONS, MAX_MESSAGE_BYTES, ExampleValidator, read_json
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.schemas import Example, PredictionBatch
from privstream.stream_app.metrics import ServiceMetrics

DOMAIN = 1024
CLASS = parse_class_spec(f"thresholds:{DOMAIN}")
STREAMS = ("s", "u")  # "u" is user-level: a user_id is required
WHOLE = -1  # the "row" of a dead letter for a whole message


def make_pipeline() -> tuple[IngestPipeline, ServiceMetrics]:
    metrics = ServiceMetrics(list(STREAMS))
    learners = OnlineLearners({s: OnlineStream(s, CLASS) for s in STREAMS}, metrics, None)
    validator = ExampleValidator({s: CLASS.check_point for s in STREAMS}, user_level=frozenset({"u"}))
    return IngestPipeline(validator, learners, metrics, Progress()), metrics


def reference_verdict(raw: bytes) -> bool:
    """Is ``raw`` a valid single example? Decided by the schema alone (the slow, trusted path)."""
    if len(raw) > MAX_MESSAGE_BYTES:
        return False
    data = read_json(raw)
    if type(data) is not dict:
        return False
    try:
        example = Example.model_validate(data)
    except ValidationError:
        return False
    if example.stream_id not in STREAMS or not isinstance(example.x, int) or example.x >= DOMAIN:
        return False
    # the user-level stream's ids go to the user ledger: present, and without a NUL (text in PostgreSQL)
    return not (example.stream_id == "u" and (example.user_id is None or "\x00" in example.user_id))


def run_batch(
    values: list[bytes | None],
) -> tuple[dict[tuple[int, int], str], set[tuple[int, int]], ServiceMetrics]:
    """Process one batch; return {(offset, row): dead-letter reason} (row -1: the whole message), the
    (offset, row) of each prediction, and the metrics."""
    pipeline, metrics = make_pipeline()
    records = [RawRecord("examples", 0, i, b"k", v, 1_700_000_000_000) for i, v in enumerate(values)]
    out = pipeline.process(records)  # must not raise, whatever the input
    dead: dict[tuple[int, int], str] = {}
    for letter in out.dead_letters:
        headers = dict(letter.headers)
        offset, row = int(headers["source.offset"]), int(headers.get("source.row", WHOLE))
        assert (offset, row) not in dead, "dead-lettered twice"
        dead[(offset, row)] = headers["error.reason"].decode()
        assert dead[(offset, row)] in INVALID_REASONS
        assert headers["error.detail"]  # a human reason, too
        if row == WHOLE:  # the raw message, unchanged, cut to the limit (so that the DLQ takes it)
            assert letter.value == (values[offset] or b"")[:MAX_DEAD_LETTER_VALUE_BYTES]
        else:  # the row as a single example of the batch's stream
            assert json.loads(letter.value)["stream_id"] == json.loads(values[offset])["stream_id"]
    predicted: set[tuple[int, int]] = set()
    for _, value in out.predictions:
        batch = PredictionBatch.model_validate_json(value)
        assert len(batch.predictions) == len(batch.xs) == len(batch.source_offsets)
        predicted.update(zip(batch.source_offsets, batch.source_items, strict=True))
    assert not (predicted & dead.keys()), "both predicted and dead-lettered"
    whole = {offset for offset, row in dead if row == WHOLE}
    in_rows = {offset for offset, _ in predicted} | {offset for offset, row in dead if row != WHOLE}
    assert not (whole & in_rows), "a message dead-lettered whole and row by row"
    assert whole | in_rows == set(range(len(values))), "a message neither predicted nor dead-lettered"
    assert metrics.received_count == len(values)
    assert sum(metrics.invalid_counts.values()) == len(dead)
    return dead, predicted, metrics


# JSON values of every shape, including unicode strings and huge numbers.
json_scalars = (
    st.none()
    | st.booleans()
    | st.text(max_size=30)
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Field values that are near misses of valid ones: the interesting boundary of the fast path.
near_x = st.sampled_from([0, 1, DOMAIN - 1, DOMAIN, -1, 10**30, 1.0, 2.5, "3", True, None, [1], {"x": 1}])
near_y = st.sampled_from([0, 1, -1, 2, True, False, 1.0, "1", None, [0], 0.0])
near_ids = st.sampled_from(["s", "u", "", "S", "unknown", "s s", "é", "x" * 201, 1, None])
near_users = st.none() | st.sampled_from(["alice", "", "ü" * 3, "x" * 200, "x" * 201, 7, ["a"]])


@st.composite
def near_valid_messages(draw) -> bytes:
    message: dict[str, object] = {}
    for key, strategy in (
        ("stream_id", near_ids),
        ("x", near_x),
        ("y", near_y),
        ("user_id", near_users),
        ("id", near_users),
    ):
        if draw(st.integers(0, 9)) > 0:  # each field present 90% of the time
            message[key] = draw(strategy)
    if draw(st.booleans()):
        message[draw(st.text(max_size=6))] = draw(json_values)  # an extra field, possibly a known one
    return json.dumps(message, ensure_ascii=draw(st.booleans())).encode()


special_literals = st.sampled_from(
    [
        b'{"stream_id": "s", "x": NaN, "y": 1}',
        b'{"stream_id": "s", "x": Infinity, "y": 1}',
        b'{"stream_id": "s", "x": 1, "y": -Infinity}',
        b'{"stream_id": "s", "x": 1, "y": 1, "extra": NaN}',
        b'{"stream_id": "s", "x": 1e400, "y": 1}',
        b'{"stream_id": "s", "x": 1' + b"0" * 5000 + b', "y": 1}',
        b'{"stream_id": "s", "x": 12, "y": 1, "stream_id": "nope"}',  # duplicate key: the last one wins
        b'{"stream_id": "s\\u0000", "x": 12, "y": 1}',
        b'{"stream_id": "\\ud800", "x": 12, "y": 1}',  # a lone surrogate
        b"\xef\xbb\xbf" + b'{"stream_id": "s", "x": 12, "y": 1}',  # a byte-order mark
        b'{"stream_id": "s", "x": 12, "y": 1}\x00',
        b'{"stream_id": "s", "xs": [1, 2], "ys": [1]}',
        b'{"stream_id": "s", "xs": [], "ys": []}',
        b'{"stream_id": "s", "xs": [1, 5000], "ys": [0, 1]}',
        b'{"stream_id": "u", "xs": [1, 2], "ys": [0, 1]}',
        b'{"stream_id": "s", "xs": "12", "ys": [0]}',
        b"[" * 100_000 + b"]" * 100_000,  # deep nesting
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b"",
        b"null",
        b"\xff\xfe\xfd",
    ]
)


def oversized(payload_bytes: int) -> bytes:
    """A well-formed, otherwise valid example padded past the size limit."""
    pad = "p" * payload_bytes
    return json.dumps({"stream_id": "s", "x": 3, "y": 1, "pad": pad}).encode()


hostile = (
    st.binary(max_size=200)
    | json_values.map(lambda v: json.dumps(v).encode())
    | near_valid_messages()
    | special_literals
    | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.none()
)
valid = st.builds(
    lambda s, x, y, user: json.dumps({"stream_id": s, "x": x, "y": y, "user_id": user}).encode(),
    st.sampled_from(STREAMS),
    st.integers(0, DOMAIN - 1),
    st.sampled_from([0, 1, -1, True, False]),
    st.text(min_size=1, max_size=20).filter(lambda u: "\x00" not in u),  # NUL: refused at user level
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile | valid, min_size=1, max_size=25))
def test_hostile_batches_never_raise_and_every_message_is_accounted_for(values):
    dead, predicted, _ = run_batch(values)
    for offset, raw in enumerate(values):
        if raw is None:
            assert dead[(offset, WHOLE)] == "invalid_json"
        elif b'"xs"' not in raw:  # single examples: the verdict is the schema's, fast path or not
            assert ((offset, 0) in predicted) == reference_verdict(raw), raw[:200]


@settings(max_examples=50, deadline=None)
@given(st.lists(valid, min_size=1, max_size=30), st.lists(hostile, min_size=1, max_size=30), st.randoms())
def test_valid_examples_among_hostile_ones_all_get_predictions(good, bad, random):
    values = [(True, v) for v in good] + [(False, v) for v in bad]
    random.shuffle(values)
    _, predicted, _ = run_batch([v for _, v in values])
    for offset, (is_valid, _) in enumerate(values):
        if is_valid:
            assert (offset, 0) in predicted


def test_named_hostile_inputs_land_with_their_reasons():
    cases = {
        b"\xff\xfe\xfd": "invalid_json",
        b"[" * 100_000 + b"]" * 100_000: "invalid_json",
        oversized(MAX_MESSAGE_BYTES): "message_too_large",  # rejected before parsing
        b'{"stream_id": "s", "x": NaN, "y": 1}': "not_finite",
        b'{"stream_id": "s", "x": Infinity, "y": 1}': "not_finite",
        b'{"stream_id": "s", "x": 1e400, "y": 1}': "not_finite",
        b'{"stream_id": "s", "x": 1' + b"0" * 5000 + b', "y": 1}': "out_of_range",  # beyond Python's int
        b'{"stream_id": "s", "x": 1024, "y": 1}': "out_of_domain",
        b'{"stream_id": "s", "x": -1, "y": 1}': "out_of_domain",
        b'{"stream_id": "s", "x": "3", "y": 1}': "wrong_type",
        b'{"stream_id": "s", "x": 3, "y": 2}': "invalid_label",
        b'{"stream_id": "s", "y": 1}': "missing_field",
        b'{"stream_id": "u", "x": 3, "y": 1}': "missing_field",  # user-level stream without user
        b'{"stream_id": "nope", "x": 3, "y": 1}': "unknown_stream",
        b'{"stream_id": "s", "xs": [1, 2]}': "missing_field",
    }
    values = list(cases)
    dead, predicted, metrics = run_batch(values)
    assert predicted == set()
    assert [dead.get((i, WHOLE), dead.get((i, 0))) for i in range(len(values))] == list(cases.values())
    assert metrics.invalid_counts["invalid_json"] == 2


def test_oversized_batch_of_valid_and_hostile_messages_keeps_the_valid_ones():
    good = [json.dumps({"stream_id": "s", "x": i, "y": int(i >= 512)}).encode() for i in range(0, DOMAIN, 7)]
    bad = [oversized(2 * MAX_MESSAGE_BYTES), b"[" * 200_000, b'{"x": NaN}', json.dumps(math.pi).encode()]
    values = bad[:2] + good + bad[2:]
    dead, predicted, _ = run_batch(values)
    assert predicted == {(i, 0) for i in range(2, 2 + len(good))}
    assert set(dead) == {(i, WHOLE) for i in (0, 1, len(values) - 2, len(values) - 1)}


def test_oversized_dead_letters_are_cut_to_the_limit():
    """Regression: a > 1 MB message's dead letter kept all its bytes, so the service's producer
    (max_request_size 1 MB) raised MessageSizeTooLargeError and the ingest consumer crashed."""
    raw = oversized(2 * MAX_MESSAGE_BYTES)
    pipeline, _ = make_pipeline()
    out = pipeline.process([RawRecord("examples", 0, 0, b"k", raw)])
    (letter,) = out.dead_letters
    assert letter.value == raw[:MAX_DEAD_LETTER_VALUE_BYTES]
    assert len(letter.value) + sum(len(k) + len(v) for k, v in letter.headers) < 1 << 20
    headers = dict(letter.headers)
    assert headers["error.reason"] == b"message_too_large"
    assert headers["source.bytes"] == str(len(raw)).encode()  # the original size is told
    assert str(len(raw)).encode() in headers["error.detail"]
