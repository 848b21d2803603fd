"""De-duplication by the producer's example ``id``, per stream, within a bounded horizon.

An at-least-once producer may send an example twice; it marks each example with an ``id`` so that
the copies count once. An example whose ``id`` was already seen on its stream less than the stream's
horizon ago (on the worker's clock) is a repeat: it is dropped before the online learner and the
windows, and counted for operators. Examples without an ``id`` are never repeats.

The rule compares an example with the last one seen with the same ``id``, whatever became of that
one, so an example's fate depends only on the earlier examples with its ``id``: one example more
changes the fate of at most one other (the next with its ``id``, within the horizon), and an
example with an ``id`` of its own changes no other's. This holds while the stream has at most
``max_ids`` distinct ids within its horizon; past that the least recently seen are forgotten early
(counted: :meth:`Deduplicator.take_forgotten`), which can only let a repeat through.

A message read again after a rebalance (Kafka's at-least-once delivery) is not a repeat of itself:
each stream remembers how far it read each partition, and a row read again gets the fate it had
(the last ``max_ids`` repeats dropped are remembered, whatever their age).

>>> clock = [0.0]
>>> dedup = Deduplicator({"s": 60.0}, clock=lambda: clock[0])
>>> [dedup.is_repeat("s", "a", 0, offset, 0) for offset in (0, 1)]
[False, True]
>>> clock[0] = 100.0  # past the horizon: seen again, learned again
>>> dedup.is_repeat("s", "a", 0, 2, 0), dedup.is_repeat("s", "a", 0, 1, 0)  # offset 1 is read again
(False, True)
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: The distinct ids a stream remembers at most (the memory bound: a few tens of MB per stream).
MAX_IDS = 100_000

Position = tuple[int, int]  # (offset, row) in a partition of the examples topic


@dataclass
class _Seen:
    """What one stream remembers: each id's last sighting, and where repeats were dropped."""

    horizon: float
    last_seen: OrderedDict[str, float] = field(default_factory=OrderedDict)  # oldest first
    dropped: OrderedDict[tuple[int, int, int], None] = field(default_factory=OrderedDict)  # oldest first
    read_up_to: dict[int, Position] = field(default_factory=dict)  # partition -> last position read


class Deduplicator:
    """Tells repeats of an ``id`` within each stream's horizon (seconds; streams without one, or
    with 0, are not de-duplicated)."""

    def __init__(
        self,
        horizons: Mapping[str, float],
        *,
        max_ids: int = MAX_IDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._streams = {sid: _Seen(h) for sid, h in horizons.items() if h > 0}
        self._max_ids = max_ids
        self._clock = clock
        self._forgotten: dict[str, int] = {}  # stream -> ids forgotten early since the last take

    def is_repeat(self, stream_id: str, example_id: str, partition: int, offset: int, row: int) -> bool:
        """Whether the example at (``partition``, ``offset``, ``row``) repeats an ``id`` seen within
        the horizon; it counts as seen from now on."""
        seen = self._streams.get(stream_id)
        if seen is None:
            return False
        position = (offset, row)
        read = seen.read_up_to.get(partition)
        if read is not None and position <= read:  # read again: the fate it had
            return (partition, offset, row) in seen.dropped
        seen.read_up_to[partition] = position
        now = self._clock()
        self._forget_before(seen, now - seen.horizon)
        last = seen.last_seen.pop(example_id, None)
        seen.last_seen[example_id] = now  # the most recent at the end
        if len(seen.last_seen) > self._max_ids:
            seen.last_seen.popitem(last=False)
            self._forgotten[stream_id] = self._forgotten.get(stream_id, 0) + 1
        if last is None:
            return False
        seen.dropped[(partition, offset, row)] = None
        if len(seen.dropped) > self._max_ids:
            seen.dropped.popitem(last=False)
        return True

    def take_forgotten(self) -> dict[str, int]:
        """Per stream, the ids forgotten before their horizon (the memory was full) since the last call."""
        forgotten, self._forgotten = self._forgotten, {}
        return forgotten

    @staticmethod
    def _forget_before(seen: _Seen, moment: float) -> None:
        last_seen = seen.last_seen
        while last_seen:
            example_id = next(iter(last_seen))
            if last_seen[example_id] > moment:
                break
            del last_seen[example_id]
