"""Client SDK: subscribe to a stream's private releases and predict with them.

>>> async def follow():                                     # doctest: +SKIP
...     async for release in subscribe("clicks", bootstrap="127.0.0.1:9092"):
...         print(release.certificate.epsilon, release.predict(1234))

Releases are published at least once: after a crash the same release (same bytes, same ledger
entry) can appear twice on the topic; :func:`subscribe` yields each ledger entry once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer

from privstream.learning.hypotheses import Hypothesis, hypothesis_from_dict
from privstream.schemas import Certificate, HypothesisRelease
from privstream.stream_app.kafka_io import client_options
from privstream.stream_app.settings import Settings


class Release:
    """A published private hypothesis with its certificate; ``predict`` evaluates it."""

    def __init__(self, model: HypothesisRelease):
        self.model = model
        self.hypothesis: Hypothesis = hypothesis_from_dict(model.hypothesis)

    @classmethod
    def from_json(cls, data: bytes | str | dict[str, Any]) -> Release:
        if isinstance(data, dict):
            return cls(HypothesisRelease.model_validate(data))
        return cls(HypothesisRelease.model_validate_json(data))

    @property
    def stream_id(self) -> str:
        return self.model.stream_id

    @property
    def certificate(self) -> Certificate:
        return self.model.certificate

    @property
    def ledger_entry_id(self) -> str | None:
        return self.model.certificate.ledger_entry_id

    def predict(self, x: int | np.ndarray | list[int]) -> int | np.ndarray:
        """The released hypothesis at a point (an int) or at many points (an array of labels)."""
        if isinstance(x, list):
            x = np.asarray(x)
        return self.hypothesis.predict(x)

    def error_on(self, xs: np.ndarray, ys: np.ndarray) -> float:
        """Fraction of ``(xs, ys)`` the hypothesis gets wrong."""
        if len(xs) == 0:
            raise ValueError("no examples to evaluate on")
        return float(np.mean(np.asarray(self.predict(np.asarray(xs))) != np.asarray(ys)))

    def to_json(self) -> str:
        return self.model.model_dump_json()

    def __repr__(self) -> str:
        c = self.certificate
        return f"Release(stream={self.stream_id!r}, entry={c.ledger_entry_id}, epsilon={c.epsilon})"


async def subscribe(
    stream_id: str,
    *,
    bootstrap: str | None = None,
    settings: Settings | None = None,
    from_beginning: bool = True,
    group_id: str | None = None,
) -> AsyncIterator[Release]:
    """Yield the stream's releases from the public ``hypotheses`` topic as they are published.

    ``from_beginning`` replays the releases published so far first. Without ``group_id`` each
    subscriber reads independently (a fresh consumer group that commits nothing).
    """
    if settings is None:
        settings = Settings(kafka_bootstrap=bootstrap) if bootstrap else Settings()
    elif bootstrap:
        settings = settings.model_copy(update={"kafka_bootstrap": bootstrap})
    if settings.kafka_bootstrap is None:
        raise ValueError("no Kafka to subscribe to: pass bootstrap= or set PRIVSTREAM_KAFKA_BOOTSTRAP")
    consumer = AIOKafkaConsumer(
        settings.topic("hypotheses"),
        **client_options(settings),
        group_id=group_id or f"privstream-subscriber-{uuid.uuid4().hex}",
        auto_offset_reset="earliest" if from_beginning else "latest",
        enable_auto_commit=group_id is not None,
    )
    await consumer.start()
    seen: set[str] = set()
    key = stream_id.encode()
    try:
        async for record in consumer:
            if record.key != key or record.value is None:
                continue
            release = Release.from_json(record.value)
            entry = release.ledger_entry_id or json.dumps(release.model.hypothesis, sort_keys=True)
            if entry in seen:  # the same release re-published after a crash
                continue
            seen.add(entry)
            yield release
    finally:
        await consumer.stop()
