"""Client SDK: subscribe to a stream's private releases and predict with them.

>>> async def follow():                                     # doctest: +SKIP
...     async for release in subscribe("clicks", bootstrap="127.0.0.1:9092"):
...         print(release.level, release.certificate.epsilon, release.predict(1234))

**Levels** (the release tree, E-DESIGN.md §1). A stream releases every window (level 0) and, at
level j, every node of 2^j consecutive windows once its last window has closed; a release's
``level`` is in its certificate. Higher levels learn from more examples at the same lifetime
budget, so they are usually more accurate but come less often. :func:`subscribe` yields

* ``level="best"`` (the default): the newest release of the highest level completed so far -- a
  release is yielded when its level is at least that of every release yielded before (and, within
  a level, when it covers later windows);
* ``level=j``: only the releases of level j, e.g. ``level=0`` for every window as soon as it closes;
* ``level="all"``: every release.

Releases are published at least once: after a crash the same release (same bytes, same ledger
entry) can appear twice on the topic; :func:`subscribe` yields each ledger entry once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Literal, Self, TypeAlias

import numpy as np
from aiokafka import AIOKafkaConsumer

from privstream.learning.hypotheses import Hypothesis, hypothesis_from_dict
from privstream.learning.private_learners.vector_base import (
    VectorModel,
    is_vector_model_dict,
    vector_model_from_dict,
)
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease
from privstream.stream_app.kafka.clients import client_options, start_client
from privstream.stream_app.settings import Settings


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
        return level  # type: ignore[return-value]
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    raise ValueError(f"level must be 'best', 'all' or a level >= 0, got {level!r}")


class ReleaseSelector:
    """Decides, release by release in publication order, which ones a subscriber gets.

    Each ledger entry once (re-publications after a crash are dropped), filtered by ``level``
    (see the module docstring). ``"best"`` keeps the highest (level, last window) yielded so far
    and yields a release that reaches it: a level-1 release replaces level 0 for good, and an
    older node of the same level published late is not yielded after a newer one.

    >>> best = ReleaseSelector("best")  # (ledger entry, level, last window) in publication order
    >>> [best.admits(*r) for r in [("1", 0, 0), ("2", 0, 1), ("3", 1, 1), ("3", 1, 1), ("4", 0, 2)]]
    [True, True, True, False, False]
    >>> ReleaseSelector(0).admits("3", 1, 1)
    False
    """

    def __init__(self, level: LevelChoice = "best"):
        self.level = check_level(level)
        self._seen: set[str] = set()
        self._best: tuple[int, int] | None = None

    def accept(self, release: Release) -> bool:
        """Whether the subscriber gets ``release`` (the next one published)."""
        entry = release.ledger_entry_id or json.dumps(release.model.hypothesis, sort_keys=True)
        return self.admits(entry, release.level, release.last_window)

    def admits(self, entry: str, level: int, last_window: int | None) -> bool:
        """:meth:`accept` on a release's ledger entry, level and last window (None: unknown)."""
        if entry in self._seen:  # the same release re-published after a crash
            return False
        self._seen.add(entry)
        if self.level == "all":
            return True
        if self.level != "best":
            return level == self.level
        rank = (level, -1 if last_window is None else last_window)
        if self._best is not None and (rank < self._best or (rank == self._best and last_window is not None)):
            return False
        self._best = rank
        return True


async def subscribe(
    stream_id: str,
    *,
    bootstrap: str | None = None,
    settings: Settings | None = None,
    from_beginning: bool = True,
    group_id: str | None = None,
    level: LevelChoice = "best",
) -> AsyncIterator[Release]:
    """Yield the stream's releases from the public ``hypotheses`` topic as they are published.

    ``level``: ``"best"`` (the newest release of the highest completed level), one level (an
    int), or ``"all"`` (module docstring). ``from_beginning`` replays the releases published so
    far first. Without ``group_id`` each subscriber reads independently (a fresh consumer group
    that commits nothing).
    """
    selector = ReleaseSelector(level)
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
    # Bounded, and a refused login or an unreachable broker is named (KafkaAuthenticationError /
    # KafkaUnavailableError) instead of aiokafka's generic "Unable to bootstrap".
    await start_client(consumer, settings)
    key = stream_id.encode()
    try:
        async for record in consumer:
            if record.key != key or record.value is None:
                continue
            release = Release.from_json(record.value)
            if selector.accept(release):
                yield release
    finally:
        await consumer.stop()


class SanitizedView(_Published):
    """A published sanitized release: answers every query of the stream's class (ggkm.md §1.3).

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
