"""Offsets that go backwards: a partition of the examples topic whose log was replaced.

The state store keeps, per stream and partition, the position after the last example it stored,
and skips anything below it as a replay (at-least-once delivery). A partition whose log was
replaced starts again at offset 0: the embedded broker (memory only) restarted, or a topic deleted
and re-created. Every example of the new log would then be below the old position, and dropped
unseen. So the state store keeps a *log mark* per partition:

* its *base*, added to every Kafka offset of the partition before the pipeline sees it (the state
  store, the vector learners and the de-duplication all count positions from it, so positions only
  ever rise, across logs);
* its *anchor*, the offset and fingerprint (timestamp, key and value) of the first record the
  worker read from the current log.

At each assignment (a restarted broker makes the worker join its group again), and when a
partition's offsets go back without a seek of the worker's own, the worker compares each
partition with its mark (:func:`replaced_because`): a log that ends below the position stored,
or that holds another record at the anchor's offset, was replaced; a log that still holds its
anchor was not, whatever its end offset says. Then, by the setting
``examples_log_replaced``, the worker either *rebases* the partition (a new base above every
position stored, a fresh anchor, read from its start: every example of the new log is learned and
stored once, as a new example after the old ones; logged and counted), or *refuses* (one line,
the worker stops: on Kafka a re-created topic may hold examples read before, which a rebase
would learn and charge twice). The default rebases on the embedded broker only.

>>> mark = LogMark(base=0, anchor_offset=0, anchor="aa")
>>> replaced_because(mark, stored=5000, end=0, found=None)
'its log ends at offset 0, below the 5000 the state store holds'
>>> replaced_because(mark, stored=5000, end=6000, found="bb")
'its record at offset 0 is not the one read there before'
>>> replaced_because(mark, stored=5000, end=6000, found="aa") is None
True
>>> replaced_because(mark, stored=5000, end=4995, found="aa") is None  # its anchor is there
True
>>> mark.rebased(5000).base, LogMark.from_json(mark.to_json()) == mark
(5000, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

__all__ = ["ExamplesLogReplacedError", "LogMark", "LogMarks", "fingerprint", "replaced_because"]


class ExamplesLogReplacedError(RuntimeError):
    """A partition of the examples topic was replaced and the worker may not rebase it (one line)."""


@dataclass(frozen=True)
class LogMark:
    """A partition's base and anchor (module docstring); ``replaced``: how often it was rebased."""

    base: int = 0
    anchor_offset: int | None = None
    anchor: str | None = None
    replaced: int = 0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LogMark:
        data = json.loads(text)
        offset = data.get("anchor_offset")
        return cls(
            base=int(data.get("base", 0)),
            anchor_offset=None if offset is None else int(offset),
            anchor=data.get("anchor"),
            replaced=int(data.get("replaced", 0)),
        )

    def rebased(self, base: int) -> LogMark:
        """The mark of the partition's new log, counted from ``base``, its anchor still unread."""
        return LogMark(base=base, replaced=self.replaced + 1)


class Record(Protocol):
    """What a fingerprint reads of a Kafka record (aiokafka's ``ConsumerRecord``)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def fingerprint(record: Record) -> str:
    """A record's identity in its log: its timestamp, key and value (hashed).

    >>> from types import SimpleNamespace as R
    >>> one = fingerprint(R(offset=0, timestamp=1, key=None, value=b"x"))
    >>> one == fingerprint(R(offset=9, timestamp=1, key=None, value=b"x"))  # the offset aside
    True
    >>> one == fingerprint(R(offset=0, timestamp=2, key=None, value=b"x"))
    False
    """
    digest = hashlib.sha256(str(record.timestamp).encode())
    for part in (record.key, record.value):
        digest.update(b"\x00" if part is None else b"\x01%d:" % len(part) + part)
    return digest.hexdigest()[:32]


def replaced_because(mark: LogMark, *, stored: int, end: int, found: str | None) -> str | None:
    """Why the partition's log is not the one ``mark`` describes (None: nothing says so).
    ``stored``: the highest position the state store holds of it (its base included; -1: none),
    ``end``: the log's end offset, ``found``: the fingerprint of its record at the anchor's offset
    (None: not read, or no longer there)."""
    held = stored - mark.base
    if mark.anchor is not None and found == mark.anchor:
        # The same log: its anchor is there. An end offset below what was stored is the broker's
        # answer, not a shorter log: the embedded broker can answer the offset of its last record
        # batch (4,995 where 5,000 records were read), and judging the log replaced on that would
        # read it again as new examples and charge its windows twice.
        return None
    if held > end:
        return f"its log ends at offset {end}, below the {held} the state store holds"
    if mark.anchor is not None and found is not None and found != mark.anchor:
        return f"its record at offset {mark.anchor_offset} is not the one read there before"
    return None


class PositionStore(Protocol):
    """What the marks need of the state store."""

    def positions(self, stream_id: str) -> dict[int, int]: ...

    def log_marks(self) -> dict[int, str]: ...

    def put_log_mark(self, partition: int, mark: str) -> None: ...


class LogMarks:
    """The examples topic's log marks, as the state store keeps them, for one worker."""

    def __init__(self, store: PositionStore, streams: list[str], *, rebase: bool | None) -> None:
        self.store, self.streams = store, streams
        #: Rebase a replaced log (True), refuse (False), or decide by the broker (None: see ``auto``).
        self.rebase = rebase
        #: The operator chose (``examples_log_replaced`` not ``auto``).
        self.chosen = rebase is not None
        self.marks: dict[int, LogMark] = {p: LogMark.from_json(m) for p, m in store.log_marks().items()}
        #: Partitions rebased by this worker (for its metric).
        self.rebases = 0

    def reload(self) -> None:
        """Read the marks again (another worker may have rebased a partition meanwhile)."""
        self.marks = {p: LogMark.from_json(m) for p, m in self.store.log_marks().items()}

    def base(self, partition: int) -> int:
        mark = self.marks.get(partition)
        return 0 if mark is None else mark.base

    def stored(self, partition: int) -> int:
        """The highest position of ``partition`` the state store holds over the streams (the
        offset after the last example stored, its base included), -1 if none."""
        return max([-1, *(self.store.positions(stream).get(partition, -1) for stream in self.streams)])

    def needs_anchor(self, partition: int) -> bool:
        mark = self.marks.get(partition)
        return mark is None or mark.anchor is None

    def anchor(self, partition: int, record: Record) -> None:
        """Make ``record`` (the first read of the partition's current log) its anchor."""
        mark = self.marks.get(partition, LogMark())
        mark = dataclasses.replace(mark, anchor_offset=record.offset, anchor=fingerprint(record))
        self.store.put_log_mark(partition, mark.to_json())
        self.marks[partition] = mark

    def drop_anchor(self, partition: int) -> None:
        """Forget an anchor the log no longer holds (retention deleted it): the next read anchors."""
        mark = self.marks.get(partition)
        if mark is not None and mark.anchor is not None:
            mark = dataclasses.replace(mark, anchor_offset=None, anchor=None)
            self.store.put_log_mark(partition, mark.to_json())
            self.marks[partition] = mark

    def replace(
        self, topic: str, partition: int, why: str, *, also: int = -1, behind: bool = False
    ) -> LogMark:
        """The partition's log was replaced: rebase it (logged), or raise
        :class:`ExamplesLogReplacedError` if the worker may not. ``also``: a position past every
        one this worker handled or learned (the new base is at or above it, and every stored one).
        ``behind``: the state store holds fewer examples than the ledger charged (a restored
        backup), whose missing examples were in the old log: refused unless the operator chose."""
        old = self.marks.get(partition, LogMark())
        if behind and not self.chosen:
            raise ExamplesLogReplacedError(
                f"{topic} partition {partition} was replaced ({why}), and the state store is older than "
                f"the ledger (a restored backup?): the examples of the windows charged since were in the "
                f"old log; restore the state store's newest copy, or set examples_log_replaced = "
                f'"rebase" (PRIVSTREAM_EXAMPLES_LOG_REPLACED=rebase) to read the new log as new examples '
                f"(the windows charged are not released again)"
            )
        if not self.rebase:
            raise ExamplesLogReplacedError(
                f"{topic} partition {partition} was replaced ({why}): its examples would be dropped as "
                f"read before; if its log holds only examples never read, set examples_log_replaced = "
                f'"rebase" (PRIVSTREAM_EXAMPLES_LOG_REPLACED=rebase) to read it as new examples'
            )
        mark = old.rebased(max(self.stored(partition), also, old.base))
        self.store.put_log_mark(partition, mark.to_json())
        self.marks[partition] = mark
        self.rebases += 1
        log.warning(
            "%s partition %d was replaced (%s): reading its new log from its start as new examples, "
            "counted from position %d (replacement %d of this partition)",
            topic,
            partition,
            why,
            mark.base,
            mark.replaced,
        )
        return mark

    def shifted(self, partition: int, records: list[Any]) -> list[Any]:
        """``records`` of ``partition`` with their offsets counted from its base."""
        base = self.base(partition)
        if base == 0:
            return records
        return [dataclasses.replace(r, offset=r.offset + base) for r in records]
