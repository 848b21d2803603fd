"""Client SDK: subscribe to a stream's private releases and predict with them.

The subscriber's code is the ``privstream-client`` distribution (:mod:`privstream_client`, in
``clients/python/``: numpy, cryptography and aiokafka only); this module re-exports it and adds
what needs the service: :func:`subscribe` with the worker's :class:`Settings` (its Kafka security
options, topic prefix and key settings) and :class:`SanitizedView` for sanitized releases.

>>> async def follow():                                     # doctest: +SKIP
...     async for release in subscribe("clicks", bootstrap="127.0.0.1:9092"):
...         print(release.level, release.certificate.epsilon, release.predict(1234))

**Levels** and **verification**: as in :mod:`privstream_client.release` and
:mod:`privstream_client.subscription`. ``subscribe(level="best")`` (the default) yields the newest
release of the highest level completed so far, ``level=j`` only level j, ``level="all"`` every
release; only releases signed by a trusted key whose certificate is possible are yielded, the rest
are skipped and counted (``Subscription.skipped``). The trusted keys come from ``trusted_keys=``,
``PRIVSTREAM_TRUSTED_KEYS_FILE``, or the worker's public listener (``/keys``). Only fresh releases
of the deployment are yielded (:mod:`privstream_client.freshness`): a replay or another
deployment's release is skipped as ``stale`` or ``foreign_deployment``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from privstream_client.release import (
    Certificate as ReleaseCertificate,
)
from privstream_client.release import (
    LevelChoice,
    Release,
    ReleaseSelector,
    certificate_problem,
    check_level,
)
from privstream_client.subscription import (
    KEYS_REFRESH_SECONDS,
    SKIP_REASONS,
    KeysUnavailableError,
    Subscription,
    TrustedKeys,
    fetch_key_set,
    trusted_key_set,
)

from privstream.learning.hypotheses import Hypothesis
from privstream.schemas import Certificate, SanitizedRelease
from privstream.stream_app.kafka.clients import client_options, start_client
from privstream.stream_app.settings import Settings

__all__ = [
    "KEYS_REFRESH_SECONDS",
    "SKIP_REASONS",
    "KeysUnavailableError",
    "LevelChoice",
    "Release",
    "ReleaseCertificate",
    "ReleaseSelector",
    "SanitizedView",
    "Subscription",
    "TrustedKeys",
    "certificate_problem",
    "check_level",
    "fetch_key_set",
    "subscribe",
    "trusted_key_set",
]


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
    ledger_id: str | None = None,
    state_file: Path | str | None = None,
    keys_topic: bool = False,
) -> Subscription:
    """:func:`privstream_client.subscribe` with the settings of a deployment (``settings``, else
    the environment's ``PRIVSTREAM_*``): its Kafka security options, ``topic_prefix``, and where
    the keys come from (``trusted_keys``, else ``trusted_keys_file``, else ``keys_url`` or the
    public listener's ``/keys``; trusted keys with a ``keys_url`` follow its rotation statements,
    with ``keys_topic=True`` those of the deployment's keys topic).
    ``ledger_id`` (else ``PRIVSTREAM_LEDGER_ID``) pins the deployment, ``state_file`` keeps the
    newest release held per level across restarts (:mod:`privstream_client.freshness`).

    >>> subscribe("clicks", bootstrap="127.0.0.1:9092", topic_prefix="prod.").topic
    'prod.hypotheses'
    """
    chosen = check_level(level)
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
    if trusted_keys is None and settings.trusted_keys_file is not None:
        trusted_keys = settings.trusted_keys_file
    configured = settings
    # Pinned keys follow rotations only from a URL named for it, never the default listener's.
    url = (
        (keys_url or settings.keys_url)
        if trusted_keys is not None
        else keys_url or settings.resolved_keys_url
    )

    async def start(consumer: Any) -> None:
        # Bounded, and a refused login or an unreachable broker is named (KafkaAuthenticationError /
        # KafkaUnavailableError) instead of aiokafka's generic "Unable to bootstrap".
        await start_client(consumer, configured)

    return Subscription(
        stream_id,
        topic=settings.topic("hypotheses"),
        kafka_options=client_options(settings),
        from_beginning=from_beginning,
        group_id=group_id,
        level=chosen,
        verify=verify,
        trusted_keys=trusted_keys,
        keys_url=url,
        until_caught_up=until_caught_up,
        start=start,
        ledger_id=ledger_id or os.environ.get("PRIVSTREAM_LEDGER_ID") or None,
        state_file=state_file,
        keys_topic=settings.topic("keys") if keys_topic else None,
    )


class SanitizedView:
    """A published sanitized release: answers every query of the stream's class.

    ``answer(h)`` is ``Pr[h(x) = 1]`` (or ``Pr[h(x) = y]`` for a labelled release) under the released
    synthetic distribution; ``max_error_on``/``mean_error_on`` compare it with data over *all* queries
    of the class without enumerating them (prefix sums over data points and block boundaries).
    """

    def __init__(self, model: SanitizedRelease):
        from privstream.learning.sanitizers import SyntheticDistribution

        self.model = model
        self.distribution = SyntheticDistribution.from_dict(model.distribution)

    @classmethod
    def from_json(cls, data: bytes | str | dict[str, Any]) -> SanitizedView:
        if isinstance(data, dict):
            return cls(SanitizedRelease.model_validate(data))
        return cls(SanitizedRelease.model_validate_json(data))

    @property
    def stream_id(self) -> str:
        return self.model.stream_id

    @property
    def certificate(self) -> Certificate:
        return self.model.certificate

    @property
    def level(self) -> int:
        """The release's level in the release tree (0: one window)."""
        return self.certificate.level or 0

    def to_json(self) -> str:
        return self.model.model_dump_json()

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
