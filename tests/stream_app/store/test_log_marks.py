"""Log marks in the state store: a partition whose log was replaced is told from a replay, and its
new log's examples are stored once each, after the old ones (SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from privstream.stream_app.kafka.log_marks import (
    ExamplesLogReplacedError,
    LogMark,
    LogMarks,
    replaced_because,
)
from tests.stream_app.store.backends import StateBackend


@dataclass
class Rec:
    """A Kafka record as the marks and the store read it."""

    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = b"{}"


def log(day: int, n: int) -> list[Rec]:
    """A partition's log: ``n`` records written on ``day`` (their timestamps differ by day)."""
    return [Rec(o, timestamp=day * 86_400_000 + o, value=b'{"x": %d}' % o) for o in range(n)]


def store_all(store, marks: LogMarks, records: list[Rec]) -> list[int]:
    """What ingest does with a poll of partition 0: anchor, shift, store; the sequence numbers."""
    if marks.needs_anchor(0):
        marks.anchor(0, records[0])
    return store.append_many("s", 0, [(r.offset, 3, 1, None, None) for r in marks.shifted(0, records)])


def judge(marks: LogMarks, records: list[Rec]):
    mark = marks.marks.get(0, LogMark())
    found = next((fp for r in records if r.offset == mark.anchor_offset for fp in [_fp(r)]), None)
    return replaced_because(mark, stored=marks.stored(0), end=len(records), found=found)


def _fp(record: Rec) -> str:
    from privstream.stream_app.kafka.log_marks import fingerprint

    return fingerprint(record)


def test_a_replaced_log_is_rebased_and_its_examples_stored_after_the_old_ones(
    state_backend: StateBackend,
) -> None:
    store = state_backend.open()
    try:
        marks = LogMarks(store, ["s"], rebase=True)
        day1 = log(1, 5)
        assert store_all(store, marks, day1) == [0, 1, 2, 3, 4]
        assert judge(marks, day1) is None  # a replay of the same log: nothing replaced
        assert store_all(store, marks, day1) == []  # and stored nothing twice

        # the broker restarted without its data: offsets from 0 again, 3 records so far
        day2 = log(2, 3)
        # without the mark's base, the state store takes them for a replay and drops them
        assert store.append_many("s", 0, [(r.offset, 3, 1, None, None) for r in day2]) == []
        why = judge(marks, day2)
        assert why == "its log ends at offset 3, below the 5 the state store holds"
        marks.replace("examples", 0, why, also=2)
        assert marks.base(0) == 5 and marks.needs_anchor(0)
        assert store_all(store, marks, day2) == [5, 6, 7]
        assert store.next_seq("s") == 8 and store.positions("s") == {0: 8}
        # read again after a crash: a replay of the new log, nothing stored twice
        assert judge(marks, day2) is None and store_all(store, marks, day2) == []

        # replaced again, and the new log outgrew the old positions before the worker looked:
        # its record at the anchor's offset is another one
        day3 = log(3, 10)
        why = judge(marks, day3)
        assert why == "its record at offset 0 is not the one read there before"
        mark = marks.replace("examples", 0, why)
        assert (mark.base, mark.replaced) == (8, 2)
        assert store_all(store, marks, day3) == list(range(8, 18))

        # another worker (or a restart) reads the marks back from the store
        again = LogMarks(store, ["s"], rebase=False)
        assert again.marks == marks.marks and judge(again, day3) is None
    finally:
        store.close()


def test_a_worker_that_may_not_rebase_refuses_in_one_line(state_backend: StateBackend) -> None:
    store = state_backend.open()
    try:
        marks = LogMarks(store, ["s"], rebase=False)
        store_all(store, marks, log(1, 5))
        why = judge(marks, log(2, 2))
        assert why is not None
        with pytest.raises(ExamplesLogReplacedError) as refused:
            marks.replace("it.examples", 0, why)
        message = str(refused.value)
        assert "\n" not in message and "it.examples partition 0 was replaced" in message
        assert "PRIVSTREAM_EXAMPLES_LOG_REPLACED=rebase" in message
        assert marks.base(0) == 0 and LogMarks(store, ["s"], rebase=False).base(0) == 0  # nothing changed
    finally:
        store.close()


def test_an_anchor_deleted_by_retention_is_dropped_and_taken_anew(state_backend: StateBackend) -> None:
    store = state_backend.open()
    try:
        marks = LogMarks(store, ["s"], rebase=True)
        store_all(store, marks, log(1, 5))
        marks.drop_anchor(0)
        assert marks.needs_anchor(0) and marks.base(0) == 0
        later = [Rec(o, timestamp=o, value=b"later") for o in range(5, 7)]
        assert store_all(store, marks, later) == [5, 6]
        assert marks.marks[0].anchor_offset == 5
    finally:
        store.close()


def test_a_replaced_log_under_a_restored_state_store_is_refused_unless_the_operator_chose(
    state_backend: StateBackend,
) -> None:
    store = state_backend.open()
    try:
        auto = LogMarks(store, ["s"], rebase=None)
        auto.rebase = True  # "auto" on the embedded broker
        store_all(store, auto, log(1, 5))
        why = judge(auto, log(2, 2))
        assert why is not None
        # the ledger charged windows whose examples this store lacks, and they were in the old log
        with pytest.raises(ExamplesLogReplacedError, match="older than the ledger"):
            auto.replace("examples", 0, why, behind=True)
        assert auto.base(0) == 0
        chosen = LogMarks(store, ["s"], rebase=True)  # examples_log_replaced = "rebase"
        assert chosen.replace("examples", 0, why, behind=True).base == 5
    finally:
        store.close()


def test_a_log_that_holds_its_anchor_is_not_replaced_whatever_its_end_offset_says(
    state_backend: StateBackend,
) -> None:
    # The embedded broker can answer the offset of its last record batch as the log's end
    # (4,995 where 5,000 records were read): taken for a shorter log, the partition was read again
    # as new examples and three workers charged 20 of 20 windows twice.
    store = state_backend.open()
    try:
        marks = LogMarks(store, ["s"], rebase=True)
        day1 = log(1, 50)
        store_all(store, marks, day1)
        mark = marks.marks[0]
        assert replaced_because(mark, stored=marks.stored(0), end=45, found=_fp(day1[0])) is None
        # a new log (other records at the anchor's offset, or none there) still counts as replaced
        assert replaced_because(mark, stored=marks.stored(0), end=45, found=_fp(log(2, 1)[0]))
        assert replaced_because(mark, stored=marks.stored(0), end=45, found=None)
    finally:
        store.close()
