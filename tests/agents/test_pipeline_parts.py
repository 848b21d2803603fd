"""A poll taken in parts of a bounded number of rows: however many rows one ``ExampleBatch``
holds, no part of ingest reads, checks, learns or stores more than ``CHUNK_EXAMPLES`` of them, and
the parts together give what processing the poll at once gives, row by row."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privstream.agents.pipeline import CHUNK_EXAMPLES, BatchOutput, RawRecord, chunked, process_in_chunks
from privstream.agents.validation import ExampleValidator, integer_domain
from tests.agents.test_pipeline_rows import CLASS, DOMAIN, batch, fates, make_pipeline


def row_fates(out: BatchOutput) -> dict[tuple[int, int], str]:
    """(offset, row) -> "learned" or the dead letter's reason, of an output already computed."""
    from privstream.schemas import PredictionBatch

    fate: dict[tuple[int, int], str] = {}
    for _, value in out.predictions:
        predictions = PredictionBatch.model_validate_json(value)
        for offset, item in zip(predictions.source_offsets, predictions.source_items, strict=True):
            fate[(offset, item)] = "learned"
    for letter in out.dead_letters:
        headers = dict(letter.headers)
        fate[(int(headers["source.offset"]), int(headers.get("source.row", b"-1")))] = headers[
            "error.reason"
        ].decode()
    return fate


def test_a_batch_of_a_hundred_thousand_rows_is_taken_in_parts_of_at_most_the_chunk():
    """One message of 100,000 rows (a few invalid): every part checks and hands the release agent
    at most CHUNK_EXAMPLES rows, the learner sees them in order, and the fates are the whole's."""
    n = 100_000
    xs = [i % DOMAIN for i in range(n)]
    for bad in (7, 50_001, 99_999):
        xs[bad] = DOMAIN  # out of the domain: that row alone is dead-lettered
    message = batch(xs=xs, ys=[int(x >= 600) for x in xs])
    record = RawRecord("examples", 0, 0, b"s", message, 1_700_000_000_000)
    whole, _ = make_pipeline()
    pipeline, _ = make_pipeline()
    checked: list[int] = []
    validator = pipeline.validator
    rows_of = validator._batch_rows

    def spy(stream_id: str, sent: dict[str, Any], lo: int, hi: int | None) -> Any:
        result = rows_of(stream_id, sent, lo, hi)
        checked.append(len(result.rows) + len(result.rejected))
        return result

    validator._batch_rows = spy  # type: ignore[method-assign]
    taken: list[int] = []
    learn = pipeline.learners.learn_batch

    def learn_batch(stream_id: str, partition: int, offsets: Any, items: Any, *rest: Any) -> Any:
        taken.append(len(items))
        return learn(stream_id, partition, offsets, items, *rest)

    pipeline.learners.learn_batch = learn_batch  # type: ignore[method-assign]
    parts = list(chunked(pipeline)([record]))
    assert len(parts) == n // CHUNK_EXAMPLES and max(checked) == CHUNK_EXAMPLES and sum(checked) == n
    assert max(taken) <= CHUNK_EXAMPLES and sum(taken) == n - 3
    together = BatchOutput()
    for part in parts:
        together.predictions += part.predictions
        together.dead_letters += part.dead_letters
        together.examples += part.examples
    assert together.examples == n - 3
    expected = fates(whole, message)
    assert row_fates(together) == expected and sorted(k for k, v in expected.items() if v != "learned") == [
        (0, 7),
        (0, 50_001),
        (0, 99_999),
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    xs=st.lists(st.one_of(st.integers(-2, DOMAIN + 1), st.just("x")), min_size=1, max_size=40),
    short=st.integers(0, 40),
    rows=st.integers(1, 9),
)
def test_a_batch_read_in_parts_gives_each_row_the_verdict_of_the_whole(xs: list[Any], short: int, rows: int):
    """Any batch (rows out of the domain or of the wrong type, a short ys column): read in slices of
    ``rows`` rows, each row keeps its number, its value and its verdict."""
    validator = ExampleValidator({"s": integer_domain(CLASS.check_point)})
    message = json.dumps({"stream_id": "s", "xs": xs, "ys": [1] * min(short, len(xs))}).encode()
    whole = validator.read(message)
    parts = list(validator.read_parts(message, rows))
    assert len(parts) == -(-len(xs) // rows) if len(message) > 4 * rows else len(parts) == 1
    kept = [(r, x, y) for p in parts for r, x, y in zip(p.rows, p.xs, p.ys, strict=True)]
    assert kept == list(zip(whole.rows, whole.xs, whole.ys, strict=True))
    rejected = [tuple(r) for p in parts for r in p.rejected]
    assert rejected == [tuple(r) for r in whole.rejected]
    assert {r.invalid.reason for r in whole.rejected} <= {"out_of_domain", "wrong_type", "missing_field"}


async def test_ingest_pauses_between_the_parts_of_one_large_batch():
    """The ingest loop's pause (the deadline guard) runs before every part, not only between
    records: a poll of one 2,000-row batch pauses at least four times."""
    pipeline, _ = make_pipeline()
    message = batch(xs=[i % DOMAIN for i in range(2_000)], ys=[0] * 2_000)
    pauses = 0

    async def pause() -> None:
        nonlocal pauses
        pauses += 1

    out = await process_in_chunks(chunked(pipeline), [RawRecord("examples", 0, 0, b"s", message)], pause)
    assert out.examples == 2_000 and pauses >= 2_000 // CHUNK_EXAMPLES
