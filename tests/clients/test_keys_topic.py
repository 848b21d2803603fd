"""A subscriber that pinned a key follows the rotation statements of the deployment's keys topic
(a stand-in reader): a chain from the pinned key is followed, a forged statement and junk add no
key, and a keys topic it cannot read leaves it with the pinned keys (a warning)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest
from privstream_client import subscription
from privstream_client.signing import KeySet, RotationStatement, Signer
from privstream_client.subscription import Subscription, subscribe

AT = datetime(2026, 12, 1, tzinfo=UTC)


def keys_of(sub: Subscription) -> list[str]:
    found = asyncio.run(sub._keys())
    if found is None:
        raise AssertionError("no keys")
    return sorted(found.keys.key_ids)


def test_pinned_keys_follow_the_chain_on_the_keys_topic_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old, new, newer, thief = (Signer.generate() for _ in range(4))
    chain = [RotationStatement.sign(new, newer, "L", AT), RotationStatement.sign(old, new, "L", AT)]
    forged = RotationStatement("L", old.key_id, thief.public_entry(), AT, chain[1].signature, "AAAA")
    read: list[tuple[str, str]] = []

    async def stand_in(options: dict, topic: str, start: object = None) -> list[RotationStatement]:
        read.append((topic, ",".join(options["bootstrap_servers"])))
        return [*chain, forged]

    monkeypatch.setattr(subscription, "read_rotation_statements", stand_in)
    pinned = KeySet([old.public_entry()])
    sub = subscribe("s", bootstrap="127.0.0.1:9", topic_prefix="p.", trusted_keys=pinned, keys_topic=True)
    assert keys_of(sub) == sorted([old.key_id, new.key_id, newer.key_id])
    assert read == [("p.keys", "127.0.0.1:9")]
    # Without keys_topic a pinned subscriber reads no topic and trusts the pinned key only.
    assert keys_of(subscribe("s", bootstrap="127.0.0.1:9", trusted_keys=pinned)) == [old.key_id]
    assert len(read) == 1


def test_a_keys_topic_that_cannot_be_read_leaves_the_pinned_keys(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    old = Signer.generate()

    async def refused(options: dict, topic: str, start: object = None) -> list[RotationStatement]:
        raise ConnectionError("TopicAuthorizationFailedError")

    monkeypatch.setattr(subscription, "read_rotation_statements", refused)
    sub = subscribe("s", bootstrap="127.0.0.1:9", trusted_keys=KeySet([old.public_entry()]), keys_topic=True)
    with caplog.at_level(logging.WARNING, logger="privstream_client.keys_topic"):
        assert keys_of(sub) == [old.key_id]
    assert "cannot read the keys topic" in caplog.text
