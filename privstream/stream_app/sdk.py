"""Client SDK: subscribe to a stream's private releases and predict with them.

>>> async def follow():                                     # doctest: +SKIP
...     async for release in subscribe("clicks", bootstrap="127.0.0.1:9092"):
...         print(release.level, release.certificate.epsilon, release.predict(1234))

**Levels** (the release tree). A stream releases every window (level 0) and, at
level j, every node of 2^j consecutive windows once its last window has closed; a release's
``level`` is in its certificate. Higher levels learn from more examples at the same lifetime
budget, so they are usually more accurate but come less often. :func:`subscribe` yields

* ``level="best"`` (the default): the newest release of the highest level completed so far -- a
  release is yielded when its level is at least that of every release yielded before (and, within
  a level, when it covers later windows);
* ``level=j``: only the releases of level j, e.g. ``level=0`` for every window as soon as it closes;
* ``level="all"``: every release.

Releases are published at least once: after a crash the same release (same bytes, same ledger
entry) can appear twice on the topic; :func:`subscribe` yields each release once.

**Verification.** Anyone allowed to write to the topic could put anything there, so by default
:func:`subscribe` yields only releases signed by a key it trusts
(:mod:`privstream.stream_app.signing`) whose certificate is possible (:func:`certificate_problem`),
and skips and counts the rest (``Subscription.skipped``): a record that is not a release, or is
forged, can neither stop the iteration nor change which release is "best" or already seen. The
trusted keys come from ``trusted_keys=``, ``PRIVSTREAM_TRUSTED_KEYS_FILE``, or the worker's public
listener (``/keys``): pinning keys trusts nothing but the keys; fetching them trusts the network
path to the listener at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import re
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, TypeAlias

import numpy as np
from aiokafka import AIOKafkaConsumer, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privstream.learning.hypotheses import Hypothesis, hypothesis_from_dict
from privstream.learning.private_learners.vector_base import (
    VectorModel,
    is_vector_model_dict,
    vector_model_from_dict,
)
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease
from privstream.stream_app.kafka.clients import client_options, start_client
from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import (
    VERIFY_PROBLEMS,
    KeySet,
    PublicKeyEntry,
    SigningKeyError,
    key_id,
    public_key_from_text,
)

log = logging.getLogger(__name__)


class _Published:
    """What every published release has: its pydantic model, stream, certificate and JSON form."""

    schema: ClassVar[type[HypothesisRelease] | type[SanitizedRelease]]

    def __init__(self, model: Any):
        self.model = model

    @classmethod
    def from_json(cls, data: bytes | str | dict[str, Any]) -> Self:
        if isinstance(data, dict):
            return cls(cls.schema.model_validate(data))
        return cls(cls.schema.model_validate_json(data))

    @property
    def stream_id(self) -> str:
        return self.model.stream_id

    @property
    def certificate(self) -> Certificate:
        return self.model.certificate

    @property
    def level(self) -> int:
        """The release's level in the release tree (0: one window; releases made before the tree
        carry no level and are windows, level 0)."""
        return self.certificate.level or 0

    @property
    def last_window(self) -> int | None:
        """The index of the last level-0 window the release covers, if its certificate says."""
        window = self.certificate.window
        return None if window is None else window.last_window

    def to_json(self) -> str:
        return self.model.model_dump_json()


class Release(_Published):
    """A published private hypothesis with its certificate; ``predict`` evaluates it."""

    schema = HypothesisRelease

    def __init__(self, model: HypothesisRelease):
        super().__init__(model)
        # A hypothesis of a class (integer points) or a model on feature vectors.
        self.hypothesis: Hypothesis | VectorModel = (
            vector_model_from_dict(model.hypothesis)
            if is_vector_model_dict(model.hypothesis)
            else hypothesis_from_dict(model.hypothesis)
        )

    @property
    def ledger_entry_id(self) -> str | None:
        return self.model.certificate.ledger_entry_id

    def predict(self, x: int | np.ndarray | list[Any]) -> int | np.ndarray:
        """The released hypothesis at a point (an int, or one feature vector) or at many points
        (an array of ints, or an (n, d) array of feature vectors): a label or an array of labels."""
        if isinstance(self.hypothesis, Hypothesis):
            return self.hypothesis.predict(np.asarray(x) if isinstance(x, list) else x)
        points = np.asarray(x, dtype=np.float64)
        if points.ndim == 1:  # one feature vector
            return int(self.hypothesis.predict(points[None, :])[0])
        return self.hypothesis.predict(points)

    def error_on(self, xs: np.ndarray, ys: np.ndarray) -> float:
        """Fraction of ``(xs, ys)`` the hypothesis gets wrong."""
        if len(xs) == 0:
            raise ValueError("no examples to evaluate on")
        points = np.asarray(xs)
        return float(np.mean(np.asarray(self.predict(points)) != np.asarray(ys)))

    def __repr__(self) -> str:
        c = self.certificate
        return (
            f"Release(stream={self.stream_id!r}, entry={c.ledger_entry_id}, level={self.level}, "
            f"epsilon={c.epsilon})"
        )


#: Which releases :func:`subscribe` yields: ``"best"``, ``"all"`` or one level (an int >= 0).
LevelChoice: TypeAlias = Literal["best", "all"] | int


def check_level(level: object) -> LevelChoice:
    """A valid level choice, or ``ValueError`` naming the choices.

    >>> check_level("best"), check_level(3)
    ('best', 3)
    >>> check_level(-1)
    Traceback (most recent call last):
    ...
    ValueError: level must be 'best', 'all' or a level >= 0, got -1
    """
    if level in ("best", "all"):
        return level
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    raise ValueError(f"level must be 'best', 'all' or a level >= 0, got {level!r}")


class ReleaseSelector:
    """Decides, release by release in publication order, which ones a subscriber gets.

    Each release once (re-publications after a crash are dropped), filtered by ``level``
    (see the module docstring). ``"best"`` keeps the highest (level, last window) yielded so far
    and yields a release that reaches it: a level-1 release replaces level 0 for good, and an
    older node of the same level published late is not yielded after a newer one.

    >>> best = ReleaseSelector("best")  # (release, level, last window) in publication order
    >>> [best.admits(*r) for r in [("1", 0, 0), ("2", 0, 1), ("3", 1, 1), ("3", 1, 1), ("4", 0, 2)]]
    [True, True, True, False, False]
    >>> ReleaseSelector(0).admits("3", 1, 1)
    False
    """

    def __init__(self, level: LevelChoice = "best"):
        self.level = check_level(level)
        self._seen: set[str] = set()
        self._best: tuple[int, int] | None = None

    def accept(self, release: Release, published: bytes | None = None) -> bool:
        """Whether the subscriber gets ``release`` (the next one published, as the bytes
        ``published``). A release is known by its bytes: a re-publication after a crash is the
        same bytes, while two different releases never share them, whatever entry id they claim."""
        data = release.to_json().encode() if published is None else published
        return self.admits(hashlib.sha256(data).hexdigest(), release.level, release.last_window)

    def admits(self, release: str, level: int, last_window: int | None) -> bool:
        """:meth:`accept` on a release's identity (its digest), level and last window (None: unknown)."""
        if release in self._seen:  # the same release re-published after a crash
            return False
        self._seen.add(release)
        if self.level == "all":
            return True
        if self.level != "best":
            return level == self.level
        rank = (level, -1 if last_window is None else last_window)
        if self._best is not None and (rank < self._best or (rank == self._best and last_window is not None)):
            return False
        self._best = rank
        return True


#: Why :func:`subscribe` skipped a record of the stream (the keys of ``Subscription.skipped``).
SKIP_REASONS = ("not_a_release", *VERIFY_PROBLEMS, "wrong_stream", "inconsistent_certificate")

#: How often a subscriber that fetched its keys from a URL may fetch them again (a record signed
#: by a key it does not know yet: a rotation).
KEYS_REFRESH_SECONDS = 60.0


def certificate_problem(release: Release) -> str | None:
    """Why a release's certificate cannot be a privstream worker's, or None: ε not positive, no
    mechanism, ε or the lifetime bound over the lifetime budget, a level beyond the tree's.

    A signature proves who published a release, not that its worker was configured soundly (or
    that its key was not stolen): these checks are cheap and no real release fails them.

    >>> from privstream.schemas import LifetimeBound
    >>> bound = LifetimeBound(epsilon=1.0, delta=0.0, epsilon_budget=1.0, delta_budget=0.0, top_level=1,
    ...                       level_epsilon=[0.5, 0.5], rule="...")
    >>> def check(**changes):
    ...     c = {"mechanism": "m", "epsilon": 0.5, "delta": 0.0, "neighbouring_relation": "replace-one",
    ...          "privacy": "information-theoretic", "proper": True, "accuracy_guarantee_holds": None,
    ...          "randomness": "secure", "library_version": "0", "level": 1, "lifetime": bound, **changes}
    ...     h = {"kind": "bits", "domain": 4, "bits": "DA=="}
    ...     model = HypothesisRelease(stream_id="s", hypothesis_class="thresholds:4", hypothesis=h,
    ...                               certificate=c)
    ...     return certificate_problem(Release(model))
    >>> check() is None
    True
    >>> check(epsilon=0.0), check(mechanism="none")
    ('epsilon 0 is not positive', "mechanism 'none'")
    >>> check(epsilon=1000.0), check(level=20)
    ('epsilon 1000 exceeds the lifetime budget 1', 'level 20 is beyond the top level 1')
    """
    c = release.certificate
    if not (math.isfinite(c.epsilon) and c.epsilon > 0):
        return f"epsilon {c.epsilon:g} is not positive"
    if c.mechanism.strip().lower() in ("", "none", "null"):
        return f"mechanism {c.mechanism!r}"
    bound = c.lifetime
    if bound is None:
        return None
    slack = 1 + 1e-9  # the sums are floats
    if c.epsilon > bound.epsilon_budget * slack:
        return f"epsilon {c.epsilon:g} exceeds the lifetime budget {bound.epsilon_budget:g}"
    if bound.epsilon > bound.epsilon_budget * slack:
        return f"the lifetime bound {bound.epsilon:g} exceeds the lifetime budget {bound.epsilon_budget:g}"
    level = release.level
    if level > bound.top_level:
        return f"level {level} is beyond the top level {bound.top_level}"
    if level < len(bound.level_epsilon) and c.epsilon > bound.level_epsilon[level] * slack:
        return f"epsilon {c.epsilon:g} exceeds level {level}'s {bound.level_epsilon[level]:g}"
    return None


class KeysUnavailableError(ConnectionError):
    """The subscriber has no keys to verify with (a ConnectionError: the CLI prints one line)."""


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
    keys = [k if isinstance(k, Ed25519PublicKey) else public_key_from_text(k) for k in trusted_keys]
    return KeySet(PublicKeyEntry(key_id(k), k) for k in keys)


def fetch_key_set(url: str, timeout: float = 10.0) -> KeySet:
    """The key set a public listener serves (``/keys``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read(1 << 20)
    except (OSError, ValueError) as exc:
        raise KeysUnavailableError(
            f"cannot fetch the release signing keys from {url} ({exc}); give the trusted keys "
            "(trusted_keys=, PRIVSTREAM_TRUSTED_KEYS_FILE), another keys_url, or turn verification off"
        ) from None
    try:
        return KeySet.from_json(body)
    except SigningKeyError as exc:
        raise KeysUnavailableError(f"{url} does not serve a key set: {exc}") from None


class _Keys:
    """The subscriber's trusted keys; fetched ones are fetched again (rarely) when a record names a
    key not in the set, so a key rotation needs no restart."""

    def __init__(self, keys: KeySet, url: str | None):
        self.keys, self.url = keys, url
        self._fetched_at = time.monotonic()

    async def problem(self, record: Any) -> str | None:
        value, headers, timestamp = record.value or b"", record.headers, record.timestamp
        problem = self.keys.header_problem(value, headers, timestamp)
        if (
            problem == "unknown_key"
            and self.url
            and time.monotonic() - self._fetched_at > KEYS_REFRESH_SECONDS
        ):
            self._fetched_at = time.monotonic()
            with contextlib.suppress(KeysUnavailableError):
                self.keys = await asyncio.to_thread(fetch_key_set, self.url)
                problem = self.keys.header_problem(value, headers, timestamp)
        return problem


class Subscription:
    """The releases of one stream, verified, as an async iterator (what :func:`subscribe` returns).

    ``skipped`` counts the records of the stream that were not yielded because they are not
    releases, are not signed by a trusted key, or carry an impossible certificate, by reason
    (:data:`SKIP_REASONS`); ``yielded`` counts the releases yielded, ``caught_up`` says whether
    the iteration ended having read everything published before it started.
    """

    def __init__(
        self,
        stream_id: str,
        settings: Settings,
        *,
        from_beginning: bool,
        group_id: str | None,
        level: LevelChoice,
        verify: bool,
        trusted_keys: TrustedKeys | None,
        keys_url: str | None,
        until_caught_up: bool,
    ):
        self.stream_id = stream_id
        self.settings = settings
        self.topic = settings.topic("hypotheses")
        self.selector = ReleaseSelector(level)
        self.from_beginning, self.group_id = from_beginning, group_id
        self.verify, self.trusted_keys, self.keys_url = verify, trusted_keys, keys_url
        self.until_caught_up = until_caught_up
        self.skipped: Counter[str] = Counter()
        self.yielded = 0
        self.caught_up = False

    def __aiter__(self) -> AsyncIterator[Release]:
        return self._releases()

    async def _keys(self) -> _Keys | None:
        if not self.verify:
            return None
        if self.trusted_keys is not None:
            return _Keys(trusted_key_set(self.trusted_keys), None)
        if self.settings.trusted_keys_file is not None:
            return _Keys(KeySet.from_file(self.settings.trusted_keys_file), None)
        url = self.keys_url or self.settings.resolved_keys_url
        return _Keys(await asyncio.to_thread(fetch_key_set, url), url)

    async def _releases(self) -> AsyncIterator[Release]:
        consumer = AIOKafkaConsumer(
            **client_options(self.settings),
            group_id=self.group_id,
            auto_offset_reset="earliest" if self.from_beginning else "latest",
            enable_auto_commit=self.group_id is not None,
        )
        # Bounded, and a refused login or an unreachable broker is named (KafkaAuthenticationError /
        # KafkaUnavailableError) instead of aiokafka's generic "Unable to bootstrap".
        await start_client(consumer, self.settings)
        try:
            keys = await self._keys()
            if not await self._wait_for_topic(consumer):
                self.caught_up = True  # nothing was ever published
                return
            if self.group_id is None:  # no group to join: every partition, at once
                partitions = sorted(consumer.partitions_for_topic(self.topic) or ())
                consumer.assign([TopicPartition(self.topic, p) for p in partitions])
            else:
                consumer.subscribe([self.topic])
            ends: dict[TopicPartition, int] | None = None
            while True:
                batch = await consumer.getmany(timeout_ms=500, max_records=1000)
                for records in batch.values():
                    for record in records:
                        release = await self._admit(record, keys)
                        if release is not None:
                            self.yielded += 1
                            yield release
                if not self.until_caught_up:
                    continue
                if ends is None and consumer.assignment():
                    ends = await consumer.end_offsets(list(consumer.assignment()))
                if ends is not None and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                    self.caught_up = True
                    return
        finally:
            await consumer.stop()

    async def _wait_for_topic(self, consumer: AIOKafkaConsumer) -> bool:
        """Wait until the topic exists (warning once that it does not); False if it does not and
        the subscription stops when caught up."""
        warned = False
        while self.topic not in await consumer.topics():
            if not warned:
                warned = True
                log.warning(
                    "no topic %r on Kafka at %s (yet): no release has been published there. Is the "
                    "topic prefix right (topic_prefix=%r; subscribe(topic_prefix=...) or "
                    "PRIVSTREAM_TOPIC_PREFIX)? Waiting for it.",
                    self.topic,
                    self.settings.kafka_bootstrap,
                    self.settings.topic_prefix,
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
                release = Release.from_json(value)
            except Exception:  # anything at all can be written to a topic
                problem = "not_a_release"
        if release is not None and release.stream_id != self.stream_id:
            problem = "wrong_stream"
        elif release is not None and certificate_problem(release) is not None:
            problem = "inconsistent_certificate"
        if problem is not None:
            if not self.skipped[problem]:
                log.warning(
                    "stream %s: skipping a record at %s offset %d (%s); later ones are only counted",
                    self.stream_id,
                    record.topic,
                    record.offset,
                    problem,
                )
            self.skipped[problem] += 1
            return None
        assert release is not None
        return release if self.selector.accept(release, value) else None


def subscribe(
    stream_id: str,
    *,
    bootstrap: str | None = None,
    topic_prefix: str | None = None,
    settings: Settings | None = None,
    from_beginning: bool = True,
    group_id: str | None = None,
    level: LevelChoice = "best",
    verify: bool = True,
    trusted_keys: TrustedKeys | None = None,
    keys_url: str | None = None,
    until_caught_up: bool = False,
) -> Subscription:
    """The stream's releases from the public ``hypotheses`` topic as they are published: an async
    iterator (:class:`Subscription`, whose ``skipped`` counts what it left out).

    ``level``: ``"best"`` (the newest release of the highest completed level), one level (an
    int), or ``"all"`` (module docstring). ``from_beginning`` replays the releases published so
    far first; ``until_caught_up`` ends the iteration once those are read. ``topic_prefix`` is
    the deployment's (``PRIVSTREAM_TOPIC_PREFIX``). Without ``group_id`` each subscriber reads
    every partition on its own and commits nothing; with one, the group shares them.

    ``verify`` (the default) yields only releases signed by a trusted key: ``trusted_keys`` (a
    :class:`~privstream.stream_app.signing.KeySet`, a key file, or public keys), else
    ``PRIVSTREAM_TRUSTED_KEYS_FILE``, else the key set fetched from ``keys_url`` (default: the
    public listener of ``settings``). Records that fail to parse or verify are skipped and counted.
    """
    selector_level = check_level(level)
    if settings is None:
        settings = Settings(kafka_bootstrap=bootstrap) if bootstrap else Settings()
    elif bootstrap:
        settings = settings.model_copy(update={"kafka_bootstrap": bootstrap})
    if topic_prefix is not None:
        if not re.fullmatch(r"[A-Za-z0-9._-]*", topic_prefix):
            raise ValueError(f"topic_prefix may hold letters, digits, '.', '_' and '-', got {topic_prefix!r}")
        settings = settings.model_copy(update={"topic_prefix": topic_prefix})
    if settings.kafka_bootstrap is None:
        raise ValueError("no Kafka to subscribe to: pass bootstrap= or set PRIVSTREAM_KAFKA_BOOTSTRAP")
    return Subscription(
        stream_id,
        settings,
        from_beginning=from_beginning,
        group_id=group_id,
        level=selector_level,
        verify=verify,
        trusted_keys=trusted_keys,
        keys_url=keys_url,
        until_caught_up=until_caught_up,
    )


class SanitizedView(_Published):
    """A published sanitized release: answers every query of the stream's class.

    ``answer(h)`` is ``Pr[h(x) = 1]`` (or ``Pr[h(x) = y]`` for a labelled release) under the released
    synthetic distribution; ``max_error_on``/``mean_error_on`` compare it with data over *all* queries
    of the class without enumerating them (prefix sums over data points and block boundaries).
    """

    schema = SanitizedRelease

    def __init__(self, model: SanitizedRelease):
        from privstream.learning.sanitizers import SyntheticDistribution

        super().__init__(model)
        self.distribution = SyntheticDistribution.from_dict(model.distribution)

    @property
    def labelled(self) -> bool:
        return self.model.labelled

    def answer(self, h: Hypothesis | dict[str, Any]) -> float:
        """The released answer to query ``h`` (a hypothesis or its canonical dict)."""
        return self.distribution.answer(h)

    def errors_on(self, xs: np.ndarray | list[int], ys: np.ndarray | list[int] | None) -> tuple[float, float]:
        """``(max_error_on, mean_error_on)`` in one pass."""
        from privstream.learning.domain import as_labels, as_points
        from privstream.learning.hypothesis_classes import parse_class_spec
        from privstream.learning.sanitizers.evaluation import class_errors

        hclass = parse_class_spec(self.model.hypothesis_class)
        points = as_points(np.asarray(xs), hclass.domain_size)
        labels = None if ys is None else as_labels(np.asarray(ys), points.shape[0])
        return class_errors(hclass, self.distribution, points, labels)

    def max_error_on(self, xs: np.ndarray | list[int], ys: np.ndarray | list[int] | None = None) -> float:
        """``max_h |q_h(data) - answer(h)|`` over every query h of the class."""
        return self.errors_on(xs, ys)[0]

    def mean_error_on(self, xs: np.ndarray | list[int], ys: np.ndarray | list[int] | None = None) -> float:
        """Mean of ``|q_h(data) - answer(h)|`` over every query h of the class (NaN: intervals > 2^24)."""
        return self.errors_on(xs, ys)[1]

    def __repr__(self) -> str:
        c = self.certificate
        spec = self.model.hypothesis_class
        return f"SanitizedView(stream={self.stream_id!r}, class={spec!r}, epsilon={c.epsilon})"
