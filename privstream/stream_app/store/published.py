"""The public log as the ledger's witness: the verified releases on the public topics.

Every release the worker publishes is signed (:mod:`privstream.stream_app.signing`) and its
certificate states the ledger that charged it (``ledger_id``), the ledger's epoch then, and its
public id ``stream/node/product`` (``ledger_entry_id``). A starting worker reads the public topics
back to the ledger's checkpoint (:func:`checkpoint`: its newest charge, less a margin for clocks)
and keeps only the records whose signature verifies under the deployment's keys: those are what
the world has seen from this deployment, and a ledger that lacks one of them is behind what was
published (:mod:`.identity`). Anyone can write to a public topic, so every other record
(unsigned, signed by another key, a bad signature, not a release) is counted by reason and
ignored: it decides nothing.

>>> from privstream.stream_app.signing import KeySet, Signer
>>> signer = Signer.generate()
>>> body = (b'{"stream_id": "s", "certificate": {"ledger_id": "ab", "ledger_epoch": 3, '
...         b'"ledger_entry_id": "s/c10-L0-1/learner:generic", "level": 0, "epsilon": 0.5, '
...         b'"delta": 0.0, "window": {"window_id": "c10-L0-1", "first_window": 1, "last_window": 1}}}')
>>> log = public_log([(body, signer.headers(body), 0), (body, [], 0)], KeySet([signer.public_entry()]))
>>> [(r.public_id, r.epoch) for r in log.releases], dict(log.ignored)
([('s/c10-L0-1/learner:generic', 3)], {'unsigned': 1})
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from privstream.agents.ledger_port import NodeRange, public_entry_id
from privstream.schemas.numbers import MAX_SAFE_INTEGER
from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import KeySet

__all__ = [
    "CLOCK_MARGIN_SECONDS",
    "PublicLog",
    "PublicRelease",
    "checkpoint",
    "public_log",
    "read_public_log",
    "read_records",
]

#: Public topics whose records carry certificates.
PUBLIC_TOPICS = ("hypotheses", "sanitized")
#: How far before the ledger's newest charge the public log is read: a release the ledger lacks
#: was charged after that one, and its record's timestamp (its deadline) is later still; the
#: margin covers clocks of several hosts and transactions that committed out of order.
CLOCK_MARGIN_SECONDS = 3600.0

#: A record as read: its value, its headers and its timestamp (ms).
Record = tuple[bytes | None, Sequence[tuple[str, bytes]] | None, int | None]


class PublicRelease(NamedTuple):
    """One verified release on a public topic: what it states of its charge, and its bytes."""

    stream_id: str
    window_id: str
    mechanism: str
    ledger_id: str
    epoch: int
    node: NodeRange | None
    epsilon: float
    delta: float
    privacy_unit: str
    scheduled_at: float | None
    release: bytes

    @property
    def public_id(self) -> str:
        return public_entry_id(self.stream_id, self.window_id, self.mechanism)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.stream_id, self.window_id, self.mechanism


@dataclass
class PublicLog:
    """The verified releases read, and how many records were ignored, by reason."""

    releases: list[PublicRelease] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)

    def describe_ignored(self) -> str:
        """``"unknown_key 2, unsigned 25"``: for the log line that counts what was not trusted."""
        return ", ".join(f"{reason} {n}" for reason, n in sorted(self.ignored.items()))


def _int(value: Any, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_SAFE_INTEGER:
        raise ValueError(f"not an integer within bounds: {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e15:
        raise ValueError(f"not a cost: {value!r}")
    return float(value)


def parse_release(value: bytes) -> PublicRelease:
    """What a (verified) release's bytes state; ValueError where they are not a release of this
    schema or state figures out of bounds (a signed record is ours, but it is checked anyway)."""
    data = json.loads(value)
    certificate, stream_id = data["certificate"], data["stream_id"]
    window = certificate["window"]
    window_id, public_id = window["window_id"], certificate["ledger_entry_id"]
    ledger_id = certificate["ledger_id"]
    if not all(isinstance(v, str) and v for v in (stream_id, window_id, public_id, ledger_id)):
        raise ValueError("a release names its stream, window, ledger and entry")
    prefix = f"{stream_id}/{window_id}/"
    if not public_id.startswith(prefix) or len(public_id) == len(prefix):
        raise ValueError(f"entry id {public_id!r} is not of stream {stream_id!r}, window {window_id!r}")
    level, first, last = certificate.get("level"), window.get("first_window"), window.get("last_window")
    node = None
    if level is not None and first is not None and last is not None:
        node = NodeRange(_int(level), _int(first), _int(last))
    scheduled = (certificate.get("publication") or {}).get("scheduled_at")
    return PublicRelease(
        stream_id,
        window_id,
        public_id[len(prefix) :],
        ledger_id,
        _int(certificate["ledger_epoch"]),
        node,
        _number(certificate["epsilon"]),
        _number(certificate["delta"]),
        str(certificate.get("privacy_unit", "example")),
        None if scheduled is None else datetime.fromisoformat(scheduled).timestamp(),
        bytes(value),
    )


def public_log(records: Iterable[Record], keys: KeySet) -> PublicLog:
    """The releases among ``records`` whose signature verifies under ``keys``; the others counted."""
    log = PublicLog()
    for value, headers, timestamp in records:
        problem = keys.header_problem(value or b"", headers, timestamp)
        if problem is not None:
            log.ignored[problem] += 1
            continue
        try:
            log.releases.append(parse_release(value or b""))
        except (ValueError, TypeError, KeyError, AttributeError):
            log.ignored["not_a_release"] += 1
    return log


def checkpoint(newest_charge: datetime | None) -> float | None:
    """Unix seconds from which the public log is read (None: from the beginning)."""
    return None if newest_charge is None else newest_charge.timestamp() - CLOCK_MARGIN_SECONDS


def read_public_log(
    settings: Settings, keys: KeySet, since: float | None = None, timeout: float = 60.0
) -> PublicLog:
    """Every record of the public topics with a timestamp at ``since`` (Unix seconds) or later
    (all: None), verified under ``keys`` (blocking; runs its own event loop: call it where none
    runs)."""
    # aiokafka logs each assignment at INFO: noise in a check that precedes the worker's start.
    quiet = logging.getLogger("aiokafka.consumer.subscription_state")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        records = asyncio.run(asyncio.wait_for(read_records(settings, since), timeout))
    finally:
        quiet.setLevel(level)
    return public_log(records, keys)


async def read_records(
    settings: Settings, since: float | None, topics: Sequence[str] = PUBLIC_TOPICS
) -> list[Record]:
    """Every record of the logical ``topics`` with a timestamp at ``since`` (Unix seconds) or
    later (all: None), unverified, as the broker holds them when the read starts."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from privstream.stream_app.embedded.broker import runs_embedded_broker
    from privstream.stream_app.kafka.clients import client_options, start_client

    consumer = AIOKafkaConsumer(
        group_id=None,
        client_id=f"privstream-ledger-check-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        **client_options(settings),
    )
    await start_client(consumer, settings)
    try:
        names = [settings.topic(name) for name in topics]
        await consumer.topics()  # metadata, so the partitions are known
        partitions = [
            TopicPartition(topic, p)
            for topic in names
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        if not partitions:
            return []
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        starts = await consumer.beginning_offsets(partitions)
        first = dict(starts)
        # The embedded broker answers a lookup by time with its first offset, whatever the time:
        # read it all there (it is memory-only, its topics are short).
        if since is not None and not await runs_embedded_broker(settings):
            found = await consumer.offsets_for_times({tp: max(0, int(since * 1000)) for tp in partitions})
            first = {tp: ends[tp] if found.get(tp) is None else found[tp].offset for tp in partitions}
        wanted = {tp: ends[tp] for tp in partitions if ends[tp] > first[tp]}
        for tp in partitions:
            consumer.seek(tp, max(starts[tp], first[tp]))
        records: list[Record] = []
        while wanted:
            batch = await consumer.getmany(*wanted, timeout_ms=1000)
            for got in batch.values():
                records.extend((r.value, list(r.headers or ()), r.timestamp) for r in got)
            for tp, end in list(wanted.items()):
                if await consumer.position(tp) >= end:
                    del wanted[tp]
        return records
    finally:
        await consumer.stop()
