"""The deployment's keys topic, read by a subscriber: every rotation statement recorded there.

A subscriber that pinned a key follows the statements that chain from it
(:meth:`~privstream_client.signing.KeySet.following`); anyone who may write the topic could
append to it, so a statement adds a key only if a key already trusted signed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from aiokafka import AIOKafkaConsumer, TopicPartition

from privstream_client.signing import KeySet, RotationStatement, SigningKeyError

__all__ = ["READ_TIMEOUT_SECONDS", "StatementReader", "follow_keys_topic", "read_rotation_statements"]

log = logging.getLogger(__name__)

#: How long a read of the keys topic may take before the subscriber goes on without it.
READ_TIMEOUT_SECONDS = 60.0

#: Reads the rotation statements of a keys topic.
StatementReader: TypeAlias = Callable[[], Awaitable[list[RotationStatement]]]


async def read_rotation_statements(
    kafka_options: dict[str, Any], topic: str, start: Callable[[Any], Awaitable[None]]
) -> list[RotationStatement]:
    """The rotation statements on the keys topic ``topic``, every record read from its start to
    its end when the read began. Records that are not statements are left out; a statement decides
    nothing until it chains from a trusted key (:meth:`~privstream_client.signing.KeySet.following`)."""
    consumer = AIOKafkaConsumer(**kafka_options, group_id=None, enable_auto_commit=False)
    await start(consumer)
    statements: list[RotationStatement] = []
    try:
        if topic not in await consumer.topics():
            return statements
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return statements
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        firsts = await consumer.beginning_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        wanted = {tp: end for tp, end in ends.items() if end > firsts[tp]}
        while wanted:
            batch = await consumer.getmany(*wanted, timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    with contextlib.suppress(SigningKeyError):
                        statements.append(RotationStatement.from_json(record.value or b""))
            for tp, end in list(wanted.items()):
                if await consumer.position(tp) >= end:
                    del wanted[tp]
        return statements
    finally:
        with contextlib.suppress(Exception):
            await consumer.stop()


async def follow_keys_topic(keys: KeySet, statements: StatementReader) -> KeySet:
    """``keys`` with the keys the topic's statements lead to from them; the keys alone where the
    topic cannot be read (a warning: not being able to follow trusts nothing new)."""
    try:
        return keys.following(await asyncio.wait_for(statements(), READ_TIMEOUT_SECONDS))
    except Exception as exc:  # the keys topic unreadable (no ACL, gone): follow nothing from it
        log.warning("cannot read the keys topic to follow key rotations (%s: %s)", type(exc).__name__, exc)
        return keys
