"""Row-level fates: each row of an ``ExampleBatch`` is kept or dead-lettered on its own.

A batch message used to live or die whole: one invalid row, one row past 100,000, or one byte past
1 MB dead-lettered every row of it. Here two inputs that differ in one row differ in that row's fate
only, and a batch of any size up to the hard cap is read whole.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import (
    INVALID_REASONS,
    MAX_MESSAGE_BYTES,
    ExampleValidator,
    integer_domain,
)
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.schemas import PredictionBatch
from privstream.stream_app.metrics import ServiceMetrics

DOMAIN = 1024
CLASS = parse_class_spec(f"thresholds:{DOMAIN}")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def make_pipeline(*, skew: float | None = None) -> tuple[IngestPipeline, ServiceMetrics]:
    """Streams "s" (example level) and "u" (user level, time windows with a public skew)."""
    metrics = ServiceMetrics(["s", "u"])
    learners = OnlineLearners({s: OnlineStream(s, CLASS) for s in ("s", "u")}, metrics, None)
    validator = ExampleValidator(
        {s: integer_domain(CLASS.check_point) for s in ("s", "u")},
        user_level=frozenset({"u"}),
        event_time_skew={"u": skew} if skew is not None else {},
        clock=NOW.timestamp,
    )
    return IngestPipeline(validator, learners, metrics, Progress()), metrics


def batch(stream: str = "s", **columns: object) -> bytes:
    return json.dumps({"stream_id": stream, **columns}).encode()


def fates(pipeline: IngestPipeline, *values: bytes) -> dict[tuple[int, int], str]:
    """(offset, row) -> "learned" or the dead letter's reason; a whole message's letter is row -1."""
    records = [RawRecord("examples", 0, i, b"s", v, 1_700_000_000_000) for i, v in enumerate(values)]
    out = pipeline.process(records)
    fate: dict[tuple[int, int], str] = {}
    for _, value in out.predictions:
        predictions = PredictionBatch.model_validate_json(value)
        for offset, item in zip(predictions.source_offsets, predictions.source_items, strict=True):
            assert (offset, item) not in fate
            fate[(offset, item)] = "learned"
    for letter in out.dead_letters:
        headers = dict(letter.headers)
        where = (int(headers["source.offset"]), int(headers.get("source.row", b"-1")))
        assert where not in fate
        fate[where] = headers["error.reason"].decode()
    return fate


def test_one_invalid_row_loses_that_row_and_its_dead_letter_says_which():
    pipeline, metrics = make_pipeline()
    message = batch(xs=[1, 2, DOMAIN, 3], ys=[1, 0, 1, 1], ids=["a", "b", "c", "d"])
    out = pipeline.process([RawRecord("examples", 2, 40, b"s", message)])
    (predictions,) = [PredictionBatch.model_validate_json(v) for _, v in out.predictions]
    assert predictions.xs == [1, 2, 3] and predictions.source_items == [0, 1, 3]
    assert predictions.example_ids == ["a", "b", "d"]
    (letter,) = out.dead_letters
    headers = dict(letter.headers)
    assert headers["error.reason"] == b"out_of_domain" and headers["source.row"] == b"2"
    assert (headers["source.partition"], headers["source.offset"]) == (b"2", b"40")
    # The letter carries the row as the single example it stands for.
    assert json.loads(letter.value) == {"stream_id": "s", "x": DOMAIN, "y": 1, "id": "c"}
    assert metrics.invalid_counts["out_of_domain"] == 1


def test_a_row_past_the_old_row_limit_no_longer_dead_letters_the_batch():
    """100,000 rows were the most a batch could hold: one more lost all of them."""
    pipeline, _ = make_pipeline()
    n = 100_001
    xs = [i % DOMAIN for i in range(n)]
    fate = fates(pipeline, batch(xs=xs, ys=[int(x >= 512) for x in xs]))
    assert list(fate.values()).count("learned") == n


def test_a_batch_over_one_megabyte_is_read_whole_up_to_the_hard_cap():
    """1 MB was the most a message could hold: one row more lost every row."""
    pipeline, _ = make_pipeline()
    n = 260_000  # 4-5 bytes a row in each column: ~1.2 MB
    xs = [100 + i % 900 for i in range(n)]
    message = batch(xs=xs, ys=[int(x >= 512) for x in xs])
    assert len(message) > 1_000_000
    fate = fates(pipeline, message)
    assert list(fate.values()).count("learned") == n


def test_a_message_over_the_hard_cap_is_one_bounded_dead_letter():
    pipeline, _ = make_pipeline()
    message = batch(xs=[1] * (MAX_MESSAGE_BYTES // 3), ys=[1] * 10)
    assert len(message) > MAX_MESSAGE_BYTES
    out = pipeline.process([RawRecord("examples", 0, 0, b"s", message)])
    (letter,) = out.dead_letters
    headers = dict(letter.headers)
    assert headers["error.reason"] == b"message_too_large"
    assert int(headers["source.bytes"]) == len(message) > len(letter.value)
    assert message.startswith(letter.value)


def test_a_skewed_event_time_at_the_user_level_loses_its_row_not_forty_other_users():
    """A user-level batch with one row's event time beyond the public skew: that row alone goes."""
    pipeline, _ = make_pipeline(skew=60.0)
    users = [f"user-{i}" for i in range(41)]
    times = [NOW.isoformat()] * 41
    times[17] = (NOW + timedelta(days=3650)).isoformat()
    message = batch("u", xs=list(range(41)), ys=[0] * 41, user_ids=users, event_times=times)
    fate = fates(pipeline, message)
    assert fate.pop((0, 17)) == "event_time_out_of_range"
    assert set(fate.values()) == {"learned"} and len(fate) == 40


def test_rows_of_a_short_column_are_missing_a_field_the_others_are_kept():
    pipeline, _ = make_pipeline()
    fate = fates(pipeline, batch(xs=[1, 2, 3], ys=[1, 0]), batch(xs=[4, 5], ys=[1, 1], ids=["a"]))
    assert fate == {
        (0, 0): "learned",
        (0, 1): "learned",
        (0, 2): "missing_field",
        (1, 0): "learned",
        (1, 1): "missing_field",
    }


def test_what_concerns_every_row_still_rejects_the_whole_message():
    pipeline, _ = make_pipeline()
    fate = fates(
        pipeline,
        batch("nope", xs=[1], ys=[1]),
        batch(xs=[1, 2]),
        batch(xs=[1, 2], ys="11"),
        batch(xs=[], ys=[]),
        json.dumps({"xs": [1], "ys": [1]}).encode(),
    )
    assert fate == {
        (0, -1): "unknown_stream",
        (1, -1): "missing_field",
        (2, -1): "wrong_type",
        (3, -1): "wrong_type",
        (4, -1): "missing_field",
    }


# --- twins: one row differs, only that row's fate may ------------------------------------------------

good_row = st.fixed_dictionaries(
    {
        "x": st.integers(0, DOMAIN - 1),
        "y": st.sampled_from([0, 1, -1, True, False]),
        "user_id": st.sampled_from(["alice", "bob", "carol"]),
        "event_time": st.sampled_from([NOW.isoformat(), (NOW - timedelta(seconds=30)).isoformat()]),
    }
)
# Anything a row can hold: near misses of every field, and values JSON alone cannot carry.
any_row = st.fixed_dictionaries(
    {
        "x": st.sampled_from([0, 5, DOMAIN - 1, DOMAIN, -1, 2.5, "3", None, True, [1.0], float("nan")]),
        "y": st.sampled_from([0, 1, -1, 2, "1", None, True, 0.5]),
        "user_id": st.sampled_from(["dave", None, 7, "x" * 201, "a\x00b"]),
        "event_time": st.sampled_from(
            [NOW.isoformat(), "not a time", None, (NOW + timedelta(days=1)).isoformat(), 12]
        ),
    }
)


def as_batch(stream: str, rows: list[dict]) -> bytes:
    columns = {"xs": "x", "ys": "y", "user_ids": "user_id", "event_times": "event_time"}
    return json.dumps({"stream_id": stream, **{c: [r[f] for r in rows] for c, f in columns.items()}}).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(good_row | any_row, min_size=1, max_size=12),
    other=any_row | good_row,
    where=st.integers(0, 11),
    stream=st.sampled_from(["s", "u"]),
)
def test_twin_batches_differing_in_one_row_differ_in_that_rows_fate_only(rows, other, where, stream):
    where %= len(rows)
    changed = [*rows[:where], other, *rows[where + 1 :]]
    a = fates(make_pipeline(skew=600.0)[0], as_batch(stream, rows))
    b = fates(make_pipeline(skew=600.0)[0], as_batch(stream, changed))
    assert set(a) == set(b) == {(0, i) for i in range(len(rows))}  # every row has a fate of its own
    assert {k: v for k, v in a.items() if k != (0, where)} == {k: v for k, v in b.items() if k != (0, where)}
    assert set(a.values()) | set(b.values()) <= {"learned", *INVALID_REASONS}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(good_row | any_row, min_size=1, max_size=12),
    extra=any_row | good_row,
    where=st.integers(0, 12),
    stream=st.sampled_from(["s", "u"]),
)
def test_one_row_more_changes_the_fate_of_no_other_row(rows, extra, where, stream):
    where %= len(rows) + 1
    more = [*rows[:where], extra, *rows[where:]]
    a = fates(make_pipeline(skew=600.0)[0], as_batch(stream, rows))
    b = fates(make_pipeline(skew=600.0)[0], as_batch(stream, more))
    shifted = {(0, i + (i >= where)): fate for (_, i), fate in a.items()}
    b.pop((0, where))
    assert b == shifted


# --- end to end: a skewed row changes nothing downstream, at the user level -------------------------


async def test_a_skewed_row_at_the_user_level_changes_no_release_not_even_its_dp_outputs():
    """The release path on two inputs that differ in one row of a user-level batch, a row whose event
    time is beyond the public skew. With the same seeds, even the DP outputs must agree: the windows
    hold the same examples. (When a batch lived or died whole, the other 40 users' rows went too.)"""
    from tests.agents.test_twins import time_stream
    from tests.agents.twins import T0, Step, assert_twins, twins

    stream = time_stream(privacy_unit="user", user_contribution_bound=2)
    users = [f"user-{i}" for i in range(40)]
    rows = {
        "stream_id": "s",
        "xs": [100 + 20 * i for i in range(40)],
        "ys": [int(100 + 20 * i >= 600) for i in range(40)],
        "user_ids": users,
        "event_times": [datetime.fromtimestamp(T0 + 65, UTC).isoformat()] * 40,
    }
    skewed = {
        key: [*column, extra]
        for (key, column), extra in zip(
            list(rows.items())[1:],
            [900, 1, "mallory", datetime.fromtimestamp(T0 + 10 * 365 * 86400, UTC).isoformat()],
            strict=True,
        )
    }

    def steps(batch: dict) -> list[Step]:
        return [Step(T0 + 60 * i + 5, [batch] if i == 1 else []) for i in range(5)]

    a, b = await twins(stream, steps(rows), steps({"stream_id": "s", **skewed}))
    assert_twins(a, b)
    assert a.dp == b.dp
    assert b.invalid == {"event_time_out_of_range": 1} and a.invalid == {}
