"""What the public topics say about the ledger: the identity stated by the newest releases.

Every release's certificate states the ledger that charged it (``ledger_id``), the ledger's epoch
then, and its entry id. Reading the newest records of each partition of the public topics is
cheap (a seek to the end, a few records back), and tells a starting worker what the world has
seen, even when the state store is gone too: releases of another ledger, a later epoch or higher
entry ids than the ledger holds mean the ledger lacks history (:mod:`.identity`). Records that
are not releases of this deployment's schema are skipped (a subscriber's problem, not ours).

>>> published_from([b'{"certificate": {"ledger_id": "ab", "ledger_epoch": 3, "ledger_entry_id": "9"}}',
...                 b"\\x00not a release"])
[Published(ledger_id='ab', epoch=3, entry=9)]
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterable
from typing import NamedTuple

from privstream.stream_app.settings import Settings

__all__ = ["Published", "newest_published", "published_from"]

#: Public topics whose records carry certificates.
PUBLIC_TOPICS = ("hypotheses", "sanitized")


class Published(NamedTuple):
    """The ledger identity one published release states (``None`` where it states none)."""

    ledger_id: str | None
    epoch: int | None
    entry: int | None


def published_from(values: Iterable[bytes | None]) -> list[Published]:
    """The identities stated by the records ``values`` (records that are no releases: skipped)."""
    found = []
    for value in values:
        try:
            certificate = json.loads(value or b"")["certificate"]
            entry = certificate.get("ledger_entry_id")
            epoch = certificate.get("ledger_epoch")
            found.append(
                Published(
                    certificate.get("ledger_id"),
                    int(epoch) if isinstance(epoch, int) else None,
                    int(entry) if isinstance(entry, str) and entry.isdigit() else None,
                )
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return found


def newest_published(settings: Settings, per_partition: int = 20, timeout: float = 20.0) -> list[Published]:
    """The identities stated by the newest ``per_partition`` records of every partition of the
    public topics (blocking; runs its own event loop: call it where none runs)."""
    # aiokafka logs each assignment at INFO: noise in a check that precedes the worker's start.
    quiet = logging.getLogger("aiokafka.consumer.subscription_state")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        return asyncio.run(asyncio.wait_for(_newest(settings, per_partition), timeout))
    finally:
        quiet.setLevel(level)


async def _newest(settings: Settings, per_partition: int) -> list[Published]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from privstream.stream_app.kafka.clients import client_options, start_client

    consumer = AIOKafkaConsumer(
        group_id=None,
        client_id=f"privstream-ledger-check-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        **client_options(settings),
    )
    await start_client(consumer, settings)
    try:
        topics = [settings.topic(name) for name in PUBLIC_TOPICS]
        await consumer.topics()  # metadata, so the partitions are known
        partitions = [
            TopicPartition(topic, p)
            for topic in topics
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        if not partitions:
            return []
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        starts = await consumer.beginning_offsets(partitions)
        wanted = {tp: ends[tp] for tp in partitions if ends[tp] > starts[tp]}
        for tp in partitions:
            consumer.seek(tp, max(starts[tp], ends[tp] - per_partition))
        values: list[bytes | None] = []
        while wanted:
            batch = await consumer.getmany(*wanted, timeout_ms=1000)
            for records in batch.values():
                values.extend(record.value for record in records)
            for tp, end in list(wanted.items()):
                if await consumer.position(tp) >= end:
                    del wanted[tp]
        return published_from(values)
    finally:
        await consumer.stop()
