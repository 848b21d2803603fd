"""Key rotations on the public log: the keys topic, the rotations' witness beside ``/keys``.

Each record of the keys topic is one rotation statement
(:class:`~privstream_client.signing.RotationStatement`): its key is the ledger id, its value the
statement's JSON. ``privstream keys rotate`` sends the statement once the ledger has recorded it;
a starting worker sends again every statement its ledger records that the topic lacks
(:func:`publish_missing`), so a rotation made while Kafka was down reaches the log at the next
start; ``privstream ledger recover`` reads the statements from the topic
(:func:`read_rotation_log`) to record the rotations a restored ledger backup lacks.

Anyone who may write the topic can append to it, so a record decides nothing by being there: a
statement counts only where its old key's signature and its new key's countersignature verify
and its old key is one the reader already trusts (the ledger's current key in
:func:`~privstream.stream_app.key_rotation.replay_rotations`, a pinned key in
:meth:`~privstream_client.signing.KeySet.following`). Records that are not statements of this
ledger are counted by reason and ignored.

>>> from privstream.stream_app.signing import Signer
>>> from datetime import UTC, datetime
>>> old, new = Signer.generate(), Signer.generate()
>>> statement = RotationStatement.sign(old, new, "5f0c3e9a7b2d4e61", datetime(2026, 12, 1, tzinfo=UTC))
>>> key, value = rotation_record(statement)
>>> log = statements_in([(value, [], 0), (b"junk", [], 0)], "5f0c3e9a7b2d4e61")
>>> log.statements == [statement], dict(log.ignored)
(True, {'not_a_statement': 1})
>>> missing([statement], log.statements), len(missing([statement], []))
([], 1)
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from privstream_client.signing import RotationStatement, SigningKeyError

from privstream.stream_app.settings import Settings
from privstream.stream_app.store.ledger_governance import RecordedKey
from privstream.stream_app.store.published import Record, read_records

__all__ = [
    "RotationLog",
    "missing",
    "publish_missing",
    "publish_rotations",
    "read_rotation_log",
    "recorded_statements",
    "rotation_record",
    "statements_in",
]

log = logging.getLogger(__name__)


@dataclass
class RotationLog:
    """The rotation statements of one ledger read from the keys topic, oldest first, and how
    many records were ignored, by reason (``not_a_statement``, ``another_ledger``)."""

    statements: list[RotationStatement] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)


def rotation_record(statement: RotationStatement) -> tuple[str, bytes]:
    """The keys topic's record of ``statement``: (key, value)."""
    return statement.ledger_id, statement.to_json().encode()


def _identity(statement: RotationStatement) -> tuple[bytes, str, str]:
    return statement.signed_bytes(), statement.signature, statement.countersignature


def statements_in(records: Iterable[Record], ledger_id: str | None = None) -> RotationLog:
    """The statements among ``records`` (of ``ledger_id``, or of any ledger: None), parsed, not
    yet verified (a reader verifies them against the keys it trusts); the others counted."""
    found = RotationLog()
    seen: set[tuple[bytes, str, str]] = set()
    for value, _headers, _timestamp in records:
        try:
            statement = RotationStatement.from_json(value or b"")
        except (SigningKeyError, ValueError, TypeError, AttributeError):
            found.ignored["not_a_statement"] += 1
            continue
        if ledger_id is not None and statement.ledger_id != ledger_id:
            found.ignored["another_ledger"] += 1
        elif _identity(statement) not in seen:  # sent again by a later worker start
            seen.add(_identity(statement))
            found.statements.append(statement)
    return found


def recorded_statements(recorded: Sequence[RecordedKey]) -> list[RotationStatement]:
    """The rotation statements a ledger records (its keys' ``statement``), oldest first."""
    return [RotationStatement.from_json(k.statement) for k in recorded if k.statement is not None]


def missing(
    recorded: Sequence[RotationStatement], on_topic: Sequence[RotationStatement]
) -> list[RotationStatement]:
    """The statements of ``recorded`` that ``on_topic`` lacks, in their order."""
    there = {_identity(s) for s in on_topic}
    return [s for s in recorded if _identity(s) not in there]


def read_rotation_log(settings: Settings, ledger_id: str, timeout: float = 60.0) -> RotationLog:
    """The statements of ``ledger_id`` on the keys topic, every record of it read (blocking; runs
    its own event loop: call it where none runs)."""
    records = asyncio.run(asyncio.wait_for(read_records(settings, None, ("keys",)), timeout))
    return statements_in(records, ledger_id)


async def publish_rotations(settings: Settings, statements: Sequence[RotationStatement]) -> int:
    """Send ``statements`` to the keys topic (acknowledged by all in-sync replicas); the count."""
    from privstream.stream_app.kafka.clients import produce_json

    if not statements:
        return 0
    return await produce_json(settings, settings.topic("keys"), [rotation_record(s) for s in statements])


def publish_missing(settings: Settings, recorded: Sequence[RecordedKey], timeout: float = 60.0) -> list[str]:
    """Send to the keys topic each rotation the ledger records (``recorded``, its signing keys)
    that the topic lacks; the new key ids sent (blocking)."""
    statements = recorded_statements(recorded)
    if not statements:
        return []
    on_topic = read_rotation_log(settings, statements[0].ledger_id, timeout)
    lacking = missing(statements, on_topic.statements)
    asyncio.run(asyncio.wait_for(publish_rotations(settings, lacking), timeout))
    if lacking:
        log.info(
            "sent %d key rotation statements the keys topic lacked (new keys %s)",
            len(lacking),
            ", ".join(s.new_key.key_id for s in lacking),
        )
    return [s.new_key.key_id for s in lacking]
