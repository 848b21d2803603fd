"""Follow a stream: its verified releases from the public ``hypotheses`` topic, as an async iterator.

>>> async def follow():                                     # doctest: +SKIP
...     async for release in subscribe("clicks", bootstrap="127.0.0.1:9092"):
...         print(release.level, release.certificate.epsilon, release.predict(1234))

**Verification.** Anyone allowed to write to the topic could put anything there, so by default
:func:`subscribe` yields only releases signed by a key it trusts (:mod:`privstream_client.signing`)
whose certificate is possible (:func:`~privstream_client.release.certificate_problem`), and skips
and counts the rest (``Subscription.skipped``): a record that is not a release, or is forged, can
neither stop the iteration nor change which release is "best" or already seen. The trusted keys
come from ``trusted_keys=``, ``PRIVSTREAM_TRUSTED_KEYS_FILE``, or the key set the worker's public
listener serves (``keys_url``, ``PRIVSTREAM_KEYS_URL``, default ``http://127.0.0.1:6066/keys``):
pinning keys trusts nothing but the keys; fetching them trusts the network path to the listener at
that moment. Pinned keys *and* a ``keys_url`` follow the deployment's key rotations: the
subscriber trusts a new key only through a chain of valid rotation statements from a pinned key
(:meth:`~privstream_client.signing.KeySet.following`); the URL's keys themselves are not trusted.
Pinned keys and ``keys_topic=True`` follow the rotation statements of the deployment's keys topic
(the signed log's record of every rotation) the same way, with no URL to trust.

**Freshness.** A verified release is yielded only if it is the deployment's and newer than what
the subscriber holds of its level (:mod:`privstream_client.freshness`): a replay, or another
deployment's release signed with a shared key, is skipped and counted (``stale``,
``foreign_deployment``) and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeAlias

from aiokafka import AIOKafkaConsumer, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privstream_client.freshness import FRESHNESS_PROBLEMS, Freshness, StateFile
from privstream_client.kafka_logs import held_bootstrap_logs
from privstream_client.keys_topic import StatementReader, follow_keys_topic, read_rotation_statements
from privstream_client.release import LevelChoice, Release, ReleaseSelector, certificate_problem, check_level
from privstream_client.signing import (
    VERIFY_PROBLEMS,
    KeySet,
    PublicKeyEntry,
    RotationStatement,
    SigningKeyError,
    deployment_ledger_id,
    key_id,
    rotation_statements,
)
from privstream_client.signing import public_key_from_text as _public_key

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_KEYS_URL",
    "SKIP_REASONS",
    "KeysUnavailableError",
    "Subscription",
    "fetch_key_document",
    "fetch_key_set",
    "key_set_of",
    "subscribe",
    "trusted_key_set",
]

#: Why :func:`subscribe` skipped a record of the stream (the keys of ``Subscription.skipped``).
SKIP_REASONS = (
    "not_a_release",
    *VERIFY_PROBLEMS,
    "wrong_stream",
    "inconsistent_certificate",
    *FRESHNESS_PROBLEMS,
)

#: How often a subscriber that fetched its keys from a URL may fetch them again (a record signed
#: by a key it does not know yet: a rotation).
KEYS_REFRESH_SECONDS = 60.0
#: The key set of a worker's public listener at its default address.
DEFAULT_KEYS_URL = "http://127.0.0.1:6066/keys"
#: How long the consumer may take to connect before the subscription gives up.
CONNECT_TIMEOUT_SECONDS = 30.0


class KeysUnavailableError(ConnectionError):
    """The subscriber has no keys to verify with (a ConnectionError: a CLI prints one line)."""


TrustedKeys: TypeAlias = KeySet | Path | str | Iterable[Ed25519PublicKey | str]


def trusted_key_set(trusted_keys: TrustedKeys) -> KeySet:
    """A key set from what a subscriber was given: a ``KeySet``, a file (key set JSON or PEM
    public keys), or public keys (objects, PEM or base64 text)."""
    if isinstance(trusted_keys, KeySet):
        return trusted_keys
    if isinstance(trusted_keys, Path):
        return KeySet.from_file(trusted_keys)
    if isinstance(trusted_keys, str):
        return KeySet.from_text(trusted_keys)
    keys = [k if isinstance(k, Ed25519PublicKey) else _public_key(k) for k in trusted_keys]
    return KeySet(PublicKeyEntry(key_id(k), k) for k in keys)


def fetch_key_document(url: str, timeout: float = 10.0) -> bytes:
    """The key statement a public listener serves (``/keys``), as served."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bytes(response.read(1 << 20))
    except (OSError, ValueError) as exc:
        raise KeysUnavailableError(
            f"cannot fetch the release signing keys from {url} ({exc}); give the trusted keys "
            "(trusted_keys=, PRIVSTREAM_TRUSTED_KEYS_FILE), another keys_url, or turn verification off"
        ) from None


def fetch_key_set(url: str, timeout: float = 10.0, pinned: KeySet | None = None) -> KeySet:
    """The key set a public listener serves (``/keys``); with ``pinned``, that set with the keys
    the served rotation statements lead to from it (the served keys are not trusted)."""
    return key_set_of(fetch_key_document(url, timeout), url, pinned)


def key_set_of(body: bytes, url: str, pinned: KeySet | None = None) -> KeySet:
    """:func:`fetch_key_set` of a document already fetched from ``url``."""
    try:
        return (
            KeySet.from_json(body)
            if pinned is None
            else pinned.following(rotation_statements(body, strict=False))
        )
    except SigningKeyError as exc:
        raise KeysUnavailableError(f"{url} does not serve a key set: {exc}") from None


class _Keys:
    """The subscriber's trusted keys; fetched ones are fetched again (rarely) when a record names a
    key not in the set, so a key rotation needs no restart: from the URL, and from the keys topic
    (``statements``) followed from the keys already trusted."""

    def __init__(
        self,
        keys: KeySet,
        url: str | None,
        pinned: KeySet | None = None,
        statements: StatementReader | None = None,
    ):
        self.keys, self.url, self.pinned, self.statements = keys, url, pinned, statements
        self._fetched_at = time.monotonic()

    async def problem(self, record: Any) -> str | None:
        value, headers, timestamp = record.value or b"", record.headers, record.timestamp
        problem = self.keys.header_problem(value, headers, timestamp)
        if (
            problem == "unknown_key"
            and (self.url or self.statements)
            and time.monotonic() - self._fetched_at > KEYS_REFRESH_SECONDS
        ):
            self._fetched_at = time.monotonic()
            if self.url:
                with contextlib.suppress(KeysUnavailableError):
                    self.keys = await asyncio.to_thread(fetch_key_set, self.url, 10.0, self.pinned)
            if self.statements is not None:
                self.keys = await follow_keys_topic(self.keys, self.statements)
            problem = self.keys.header_problem(value, headers, timestamp)
        return problem


async def _start(consumer: Any) -> None:
    with held_bootstrap_logs() as held:  # the error raised says it, once
        try:
            await asyncio.wait_for(consumer.start(), CONNECT_TIMEOUT_SECONDS)
        except Exception as exc:
            held.failed()
            with contextlib.suppress(Exception):
                await consumer.stop()
            raise ConnectionError(f"cannot read from Kafka: {type(exc).__name__}: {exc}") from None


class Subscription:
    """The releases of one stream, verified, as an async iterator (what :func:`subscribe` returns).

    ``skipped`` counts the records of the stream that were not yielded because they are not
    releases, are not signed by a trusted key, carry an impossible certificate, are another
    deployment's or are older than the release held of their level, by reason
    (:data:`SKIP_REASONS`); ``yielded`` counts the releases yielded, ``caught_up`` says whether
    the iteration ended having read everything published before it started; :meth:`stats` says
    all that and what is held. ``freshness`` is the deployment and the newest release held per
    level (:mod:`privstream_client.freshness`), kept in ``state_file`` if one is given.
    """

    #: What each release is read as (a subclass of :class:`Release`).
    release_type: type[Release] = Release

    def __init__(
        self,
        stream_id: str,
        *,
        topic: str,
        kafka_options: dict[str, Any],
        from_beginning: bool = True,
        group_id: str | None = None,
        level: LevelChoice = "best",
        verify: bool = True,
        trusted_keys: TrustedKeys | None = None,
        keys_url: str | None = None,
        until_caught_up: bool = False,
        start: Callable[[Any], Awaitable[None]] | None = None,
        ledger_id: str | None = None,
        state_file: Path | str | None = None,
        keys_topic: str | None = None,
    ):
        self.stream_id, self.topic = stream_id, topic
        self.kafka_options = kafka_options
        self.freshness = Freshness(ledger_id)
        self.selector = ReleaseSelector(level, self.freshness, fresh_only=verify)
        self.state_file = state_file
        self.from_beginning, self.group_id = from_beginning, group_id
        self.verify, self.trusted_keys, self.keys_url = verify, trusted_keys, keys_url
        self.keys_topic = keys_topic
        self.until_caught_up = until_caught_up
        self.start = start or _start
        self.skipped: Counter[str] = Counter()
        self.yielded = 0
        self.caught_up = False

    def __aiter__(self) -> AsyncIterator[Release]:
        return self._releases()

    def stats(self) -> dict[str, Any]:
        """What the subscription did: releases yielded, records skipped by reason, whether it
        caught up, the deployment (ledger id) it follows and the newest window held per level.

        >>> subscribe("clicks", bootstrap="127.0.0.1:9092", ledger_id="5f0c3e9a7b2d4e61").stats()
        {'yielded': 0, 'skipped': {}, 'caught_up': False, 'ledger_id': '5f0c3e9a7b2d4e61', 'held': {}}
        """
        return {
            "yielded": self.yielded,
            "skipped": dict(sorted(self.skipped.items())),
            "caught_up": self.caught_up,
            "ledger_id": self.freshness.ledger_id,
            "held": {level: held.last_window for level, held in sorted(self.freshness.held.items())},
        }

    def summary(self) -> str:
        """:meth:`stats` in one line, e.g. ``3 releases; 2 records skipped (1 stale, 1 unsigned)``.

        >>> subscribe("clicks", bootstrap="127.0.0.1:9092").summary()
        '0 releases; 0 records skipped'
        """
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
        return f"{self.yielded} releases; {skipped} records skipped" + (f" ({reasons})" if skipped else "")

    async def _keys(self) -> _Keys | None:
        if not self.verify:
            return None
        if self.trusted_keys is not None and (self.keys_url or self.keys_topic):  # pinned, following
            pinned = trusted_key_set(self.trusted_keys)
            reader = None
            if self.keys_topic is not None:
                topic, options, start = self.keys_topic, self.kafka_options, self.start

                async def reader() -> list[RotationStatement]:
                    return await read_rotation_statements(options, topic, start)

            keys, body = pinned, None
            if self.keys_url:
                with contextlib.suppress(KeysUnavailableError):
                    body = await asyncio.to_thread(fetch_key_document, self.keys_url, 10.0)
                    keys = key_set_of(body, self.keys_url, pinned)
            if reader is not None:
                keys = await follow_keys_topic(keys, reader)
            if body is not None:
                self._deployment(body, keys)
            return _Keys(keys, self.keys_url, pinned, reader)
        if self.trusted_keys is not None:
            return _Keys(trusted_key_set(self.trusted_keys), None)
        url = self.keys_url or DEFAULT_KEYS_URL
        body = await asyncio.to_thread(fetch_key_document, url)
        keys = key_set_of(body, url)
        self._deployment(body, keys)
        return _Keys(keys, url)

    def _deployment(self, body: bytes, keys: KeySet) -> None:
        """Take the deployment's ledger id from the fetched ``/keys`` where it states one that a
        trusted key signed, unless the subscriber was given one (``ledger_id=``, its state file):
        then no release, not even the first, is trusted on first use for it."""
        if self.freshness.ledger_id is None:
            self.freshness.ledger_id = deployment_ledger_id(body, keys)

    async def _releases(self) -> AsyncIterator[Release]:
        state = None if self.state_file is None else StateFile(self.state_file, self.topic, self.stream_id)
        positions = {} if state is None else state.load(self.freshness)  # before connecting: one line
        # Without a group every partition is read from its start (or where the state file left
        # it): with ``from_beginning=False`` what was published before is read, not yielded, so
        # the subscriber knows the newest release of each level before it yields a later one.
        own = self.group_id is None
        consumer = AIOKafkaConsumer(
            **self.kafka_options,
            group_id=self.group_id,
            auto_offset_reset="earliest" if self.from_beginning or own else "latest",
            enable_auto_commit=not own,
        )
        await self.start(consumer)
        dirty = False
        try:
            keys = await self._keys()
            if not await self._wait_for_topic(consumer):
                self.caught_up = True  # nothing was ever published
                return
            past: dict[int, int] = {}  # per partition, the end when the subscription started
            if own:  # no group to join: every partition, at once
                partitions = sorted(consumer.partitions_for_topic(self.topic) or ())
                assigned = [TopicPartition(self.topic, p) for p in partitions]
                consumer.assign(assigned)
                await self._resume(consumer, assigned, positions)
                if not self.from_beginning:
                    past = {tp.partition: end for tp, end in (await consumer.end_offsets(assigned)).items()}
            else:
                consumer.subscribe([self.topic])
            ends: dict[Any, int] | None = None
            while True:
                batch = await consumer.getmany(timeout_ms=500, max_records=1000)
                for tp, records in batch.items():
                    for record in records:
                        release = await self._admit(record, keys)
                        positions[tp.partition], dirty = record.offset + 1, True
                        if release is None or record.offset < past.get(tp.partition, 0):
                            continue  # a past release only tells what the subscriber holds
                        if state is not None:
                            state.save(self.freshness, positions)  # held before it is handed over
                            dirty = False
                        self.yielded += 1
                        yield release
                if dirty and state is not None:
                    state.save(self.freshness, positions)
                    dirty = False
                if not self.until_caught_up:
                    continue
                if ends is None and consumer.assignment():
                    ends = await consumer.end_offsets(list(consumer.assignment()))
                if ends is not None and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                    self.caught_up = True
                    return
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
            if dirty and state is not None:
                state.save(self.freshness, positions)

    async def _resume(self, consumer: Any, assigned: list[Any], positions: dict[int, int]) -> None:
        """Start each partition where the state file left it, if the topic still holds that offset
        (else from the start: the topic was re-created or its offsets went back)."""
        kept = [tp for tp in assigned if tp.partition in positions]
        if not kept:
            return
        first, last = await consumer.beginning_offsets(kept), await consumer.end_offsets(kept)
        for tp in kept:
            at = positions[tp.partition]
            if first[tp] <= at <= last[tp]:
                consumer.seek(tp, at)
            else:
                log.warning(
                    "stream %s: %s partition %d holds offsets %d..%d, the state file's position %d is not "
                    "among them (the topic was re-created?): reading it from its start",
                    self.stream_id,
                    self.topic,
                    tp.partition,
                    first[tp],
                    last[tp],
                    at,
                )
                positions.pop(tp.partition)

    async def _wait_for_topic(self, consumer: Any) -> bool:
        """Wait until the topic exists (warning once that it does not); False if it does not and
        the subscription stops when caught up."""
        warned = False
        while self.topic not in await consumer.topics():
            if not warned:
                warned = True
                prefix = self.topic[: -len("hypotheses")] if self.topic.endswith("hypotheses") else ""
                log.warning(
                    "no topic %r on Kafka at %s (yet): no release has been published there. Is the "
                    "topic prefix right (topic_prefix=%r; subscribe(topic_prefix=...) or "
                    "PRIVSTREAM_TOPIC_PREFIX)? Waiting for it.",
                    self.topic,
                    ",".join(self.kafka_options.get("bootstrap_servers", [])),
                    prefix,
                )
            if self.until_caught_up:
                return False
            await asyncio.sleep(2.0)
        return True

    async def _admit(self, record: Any, keys: _Keys | None) -> Release | None:
        """The record's release if the subscriber gets it; a skipped record is counted."""
        if record.key != self.stream_id.encode():
            return None  # another stream's
        value = record.value if record.value is not None else b""
        problem = None if keys is None else await keys.problem(record)
        release = None
        if problem is None:
            try:
                release = self.release_type.from_json(value)
            except Exception:  # anything at all can be written to a topic
                problem = "not_a_release"
        if release is not None and release.stream_id != self.stream_id:
            problem = "wrong_stream"
        elif release is not None and certificate_problem(release) is not None:
            problem = "inconsistent_certificate"
        if problem is not None or release is None:
            self._skip(record, problem or "not_a_release")
            return None
        verdict = self.selector.judge(release, value)
        if verdict in FRESHNESS_PROBLEMS:
            self._skip(record, verdict)
            return None
        return self.selector.pick(release, verdict)

    def _skip(self, record: Any, reason: str) -> None:
        if not self.skipped[reason]:
            log.warning(
                "stream %s: skipping a record at %s offset %d (%s); later ones are only counted",
                self.stream_id,
                record.topic,
                record.offset,
                reason,
            )
        self.skipped[reason] += 1


def subscribe(
    stream_id: str,
    *,
    bootstrap: str | None = None,
    topic_prefix: str | None = None,
    from_beginning: bool = True,
    group_id: str | None = None,
    level: LevelChoice = "best",
    verify: bool = True,
    trusted_keys: TrustedKeys | None = None,
    keys_url: str | None = None,
    until_caught_up: bool = False,
    kafka_options: dict[str, Any] | None = None,
    ledger_id: str | None = None,
    state_file: Path | str | None = None,
    keys_topic: bool = False,
) -> Subscription:
    """The stream's releases from the public ``hypotheses`` topic as they are published: an async
    iterator (:class:`Subscription`, whose ``skipped`` counts what it left out).

    ``bootstrap`` (else ``PRIVSTREAM_KAFKA_BOOTSTRAP``): the Kafka servers, ``host:port,...``;
    ``kafka_options``: more options for aiokafka's consumer (TLS, SASL). ``topic_prefix`` (else
    ``PRIVSTREAM_TOPIC_PREFIX``) is the deployment's. ``level``: ``"best"`` (the newest release
    of the highest completed level), ``"most-accurate"`` (the release of lowest private error
    estimate, where the stream publishes estimates), one level (an int), or ``"all"``.
    ``from_beginning`` replays the releases published so far first; ``until_caught_up`` ends the
    iteration once those are read. Without ``group_id`` each subscriber reads every partition on
    its own and commits nothing; with one, the group shares them.

    ``verify`` (the default) yields only releases signed by a trusted key: ``trusted_keys`` (a
    :class:`~privstream_client.signing.KeySet`, a key file, or public keys), else the file
    ``PRIVSTREAM_TRUSTED_KEYS_FILE``, else the key set fetched from ``keys_url`` (else
    ``PRIVSTREAM_KEYS_URL``, else :data:`DEFAULT_KEYS_URL`). Trusted keys and a ``keys_url``
    given together follow the deployment's key rotations from the trusted keys; so do trusted keys
    and ``keys_topic=True``, from the rotation statements on the deployment's keys topic
    (``<topic_prefix>keys``). Records that fail to parse or verify are skipped and counted.

    Only fresh releases of the deployment are yielded (:mod:`privstream_client.freshness`): of
    the ledger ``ledger_id`` (else ``PRIVSTREAM_LEDGER_ID``, else the state file's, else the
    first verified release's), and each newer than the release held of its level, else skipped as
    ``foreign_deployment`` or ``stale``. ``state_file`` keeps what is held (and the positions read)
    across restarts. With ``from_beginning=False`` and no group, the releases published before are
    read first without being yielded, to know what is held.

    >>> subscribe("clicks", bootstrap="127.0.0.1:9092", topic_prefix="prod.").topic
    'prod.hypotheses'
    >>> subscribe("clicks", bootstrap="127.0.0.1:9092", level=-1)
    Traceback (most recent call last):
    ...
    ValueError: level must be 'best', 'most-accurate', 'all' or a level >= 0, got -1
    """
    chosen = check_level(level)
    bootstrap = bootstrap or os.environ.get("PRIVSTREAM_KAFKA_BOOTSTRAP")
    if not bootstrap:
        raise ValueError("no Kafka to subscribe to: pass bootstrap= or set PRIVSTREAM_KAFKA_BOOTSTRAP")
    prefix = topic_prefix if topic_prefix is not None else os.environ.get("PRIVSTREAM_TOPIC_PREFIX", "")
    if not re.fullmatch(r"[A-Za-z0-9._-]*", prefix):
        raise ValueError(f"topic_prefix may hold letters, digits, '.', '_' and '-', got {prefix!r}")
    keys_file = os.environ.get("PRIVSTREAM_TRUSTED_KEYS_FILE")
    if trusted_keys is None and keys_file:
        trusted_keys = Path(keys_file)
    return Subscription(
        stream_id,
        topic=f"{prefix}hypotheses",
        kafka_options={"bootstrap_servers": bootstrap.split(","), **(kafka_options or {})},
        from_beginning=from_beginning,
        group_id=group_id,
        level=chosen,
        verify=verify,
        trusted_keys=trusted_keys,
        keys_url=keys_url or os.environ.get("PRIVSTREAM_KEYS_URL") or None,
        until_caught_up=until_caught_up,
        ledger_id=ledger_id or os.environ.get("PRIVSTREAM_LEDGER_ID") or None,
        state_file=state_file,
        keys_topic=f"{prefix}keys" if keys_topic else None,
    )
