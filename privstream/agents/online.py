"""The online side: one online learner per stream, predicting each label before learning it.

A class stream has a Standard Optimal Algorithm; a stream of feature vectors has the online
learner its settings name (:mod:`privstream.learning.online`: the Perceptron with its margin's
mistake bound by default).

By default a stream's examples are keyed by ``stream_id``, so they arrive in order on one
partition and its SOA lives on the worker that owns that partition. A stream spread over the
topic's partitions (``partitions`` set: keyed by example or user id) has one learner per partition,
a *shard*, saved under ``stream_id#p<partition>``: each shard learns its partition's examples in
order and makes at most the class's bound of mistakes on them, so the stream makes at most
``partitions`` times that bound, whichever workers serve the shards.

Replays are harmless on realizable streams: the SOA is consistent with every example it has
learned, so an example delivered twice (at-least-once) is predicted correctly the second time
and leaves the version space unchanged.

Durability: with a :class:`StateStore`, the SOA's state is saved whenever an example changes
it (a mistake, or a smaller version space) before the example is acknowledged. Examples that
change nothing are not saved, and need not be: so a worker that crashes and restarts, or takes
over a stream's partition, continues with exactly the SOA it had (only ``examples_seen`` may
lag behind by examples that changed nothing). On a realizable stream changes are rare (at most
Ldim mistakes; the version space shrinks less and less often), so this costs little.

A vector learner's state changes with every example (its counts, and the averaged and logistic
learners' vectors), so it is saved after every batch, with the Kafka position of the last example
it learned from each source partition. A replay after a crash (examples redelivered because their
offsets were not committed) skips what the saved state has already learned: nothing is counted
twice. Their predictions were published before the crash, unless it came between the save and the
publication, in which case they are not published again: predicting them now, after learning
them, would break the contract.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privstream.agents.interfaces import IngestMetrics, StateStore
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.online import (
    OnlineStateError,
    StreamLearner,
    learner_from_state,
    make_stream_learner,
)
from privstream.learning.soa import SOA
from privstream.schemas import PredictionBatch, VectorPredictionBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnlineStream:
    """What the online agent needs to know of a configured stream."""

    stream_id: str
    hypothesis_class: HypothesisClass
    tie: int = 1
    partitions: int | None = None  # spread over this many partitions, a learner each (None: one)


@dataclass(frozen=True)
class VectorStream:
    """A stream of feature vectors: its public bounds and the online learner its settings name."""

    stream_id: str
    bounds: tuple[tuple[float, float], ...]
    learner: str = "perceptron"
    params: Mapping[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = ()  # the features' names (default x1, x2, ...), for the clipped counter
    partitions: int | None = None  # spread over this many partitions, a learner each (None: one)
    classes: int = 2  # labels 0..classes-1

    def feature_names(self) -> tuple[str, ...]:
        return self.names or tuple(f"x{t + 1}" for t in range(len(self.bounds)))

    def new_learner(self) -> StreamLearner:
        bounds = [list(b) for b in self.bounds]
        return make_stream_learner(self.learner, bounds, self.classes, **dict(self.params))


@dataclass
class _VectorState:
    """A vector stream's learner and, per source partition, the position ``(offset, item)`` of the
    last example it learned (what a replay skips)."""

    learner: StreamLearner
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "learner_state": self.learner.state_dict(),
            "positions": [[p, o, i] for p, (o, i) in sorted(self.positions.items())],
        }

    @classmethod
    def from_dict(cls, stream: VectorStream, d: dict[str, Any]) -> _VectorState:
        """Restore a saved state; ``OnlineStateError`` if it is not one of this stream's learner."""
        try:
            learner = learner_from_state(d["learner_state"])
            positions = {int(p): (int(o), int(i)) for p, o, i in d["positions"]}
        except OnlineStateError:
            raise
        except (KeyError, TypeError, ValueError) as exc:  # e.g. an SOA's snapshot, saved under the name
            raise OnlineStateError(f"malformed online state: {exc!r}") from None
        fresh, saved = stream.new_learner().state_dict(), learner.state_dict()
        if any(saved.get(k) != fresh[k] for k in ("learner", "bounds", *type(learner)._params)):
            raise OnlineStateError("the saved state is of another learner, bounds or parameters")
        return cls(learner, positions)


def shard_key(stream_id: str, partition: int | None) -> str:
    """The name a learner is saved under: the stream's, or its shard's (``#`` is no stream's).

    >>> shard_key("clicks", None), shard_key("clicks", 3)
    ('clicks', 'clicks#p3')
    """
    return stream_id if partition is None else f"{stream_id}#p{partition}"


class OnlineLearners:
    """Per-stream online state: an SOA per class stream, a vector learner per vector stream (per
    partition, a shard each, for a stream spread over partitions)."""

    def __init__(
        self,
        streams: Mapping[str, OnlineStream | VectorStream],
        metrics: IngestMetrics,
        store: StateStore | None = None,
    ):
        self._streams = {k: v for k, v in streams.items() if isinstance(v, OnlineStream)}
        self._vector_streams = {k: v for k, v in streams.items() if isinstance(v, VectorStream)}
        self._metrics = metrics
        self._store = store
        self._soas: dict[str, SOA] = {}  # by shard key
        self._vectors: dict[str, _VectorState] = {}  # by shard key
        self._unrealizable: set[str] = set()  # streams a shard of which proved not realizable
        self.reload()
        for stream_id, stream in self._streams.items():
            soa = SOA(stream.hypothesis_class, tie=stream.tie) if stream.partitions else self.soa(stream_id)
            bound = soa.mistake_bound
            # A stream's bound is the sum of its shards' (each shard's substream is realizable too).
            metrics.mistake_bound(stream_id, bound * (stream.partitions or 1))
        for stream_id in self._vector_streams:
            if self._vector_streams[stream_id].partitions:
                continue  # its shards report when they learn
            learner = self._vectors[stream_id].learner
            metrics.online_learned(
                stream_id, 0, 0, learner.margin_mistakes, learner.margin_bound, learner.realizable
            )

    def _partitioned(self, stream_id: str) -> bool:
        stream = self._streams.get(stream_id) or self._vector_streams.get(stream_id)
        return stream is not None and stream.partitions is not None

    def reload(self) -> None:
        """(Re)load every stream's learner from the store: at start, and when partitions move (a
        shard is loaded when its partition's first examples arrive)."""
        for key in [k for k in self._soas if "#" in k]:
            del self._soas[key]
        for key in [k for k in self._vectors if "#" in k]:
            del self._vectors[key]
        for stream_id in self._vector_streams:
            if not self._partitioned(stream_id):
                self._vectors[stream_id] = self._load_vector(stream_id, stream_id)
        for stream_id in self._streams:
            if not self._partitioned(stream_id):
                self._soas[stream_id] = self._load_soa(stream_id, stream_id)

    def _load_vector(self, stream_id: str, key: str) -> _VectorState:
        vector = self._vector_streams[stream_id]
        saved = self._store.load_soa(key) if self._store else None
        if saved is not None:
            try:
                return _VectorState.from_dict(vector, saved)
            except OnlineStateError as exc:  # e.g. the learner or its margin changed in the settings
                log.warning("stream %s: ignoring its saved online state (%s); starting afresh", key, exc)
        return _VectorState(vector.new_learner())

    def _load_soa(self, stream_id: str, key: str) -> SOA:
        stream = self._streams[stream_id]
        snapshot = self._store.load_soa(key) if self._store else None
        if snapshot is not None:
            try:
                return SOA.from_state_dict(stream.hypothesis_class, snapshot)
            except ValueError as exc:  # e.g. the stream's class was changed in the settings
                log.warning("stream %s: ignoring its saved SOA state (%s); starting afresh", key, exc)
        return SOA(stream.hypothesis_class, tie=stream.tie)

    def _key(self, stream_id: str, partition: int | None) -> str:
        if not self._partitioned(stream_id):
            return stream_id
        if partition is None:
            raise ValueError(f"stream {stream_id} is spread over partitions: name the shard's partition")
        return shard_key(stream_id, partition)

    def has(self, stream_id: str) -> bool:
        return stream_id in self._streams or stream_id in self._vector_streams

    def soa(self, stream_id: str, partition: int | None = None) -> SOA:
        """The SOA of a class stream, or of its shard of ``partition`` if it is spread."""
        key = self._key(stream_id, partition)
        soa = self._soas.get(key)
        if soa is None:
            soa = self._soas[key] = self._load_soa(stream_id, key)
        return soa

    def vector_learner(self, stream_id: str, partition: int | None = None) -> StreamLearner:
        """The online learner of a stream of feature vectors (of its shard of ``partition``)."""
        return self._vector_state(stream_id, partition).learner

    def _vector_state(self, stream_id: str, partition: int | None) -> _VectorState:
        key = self._key(stream_id, partition)
        state = self._vectors.get(key)
        if state is None:
            state = self._vectors[key] = self._load_vector(stream_id, key)
        return state

    def shards(self, stream_id: str) -> dict[int, SOA | StreamLearner]:
        """The shards of a spread stream this worker holds, by partition (none for other streams)."""
        prefix = f"{stream_id}#p"
        held: dict[int, SOA | StreamLearner] = {
            int(k[len(prefix) :]): soa for k, soa in self._soas.items() if k.startswith(prefix)
        }
        for k, state in self._vectors.items():
            if k.startswith(prefix):
                held[int(k[len(prefix) :])] = state.learner
        return dict(sorted(held.items()))

    def learned_up_to(self, partition: int) -> int:
        """The position after the last example of ``partition`` a vector learner this worker holds
        learned (-1: none): a partition counted anew starts above it."""
        held = [
            state.positions[partition][0] + 1
            for state in self._vectors.values()
            if partition in state.positions
        ]
        return max([-1, *held])

    def prediction_point_digits(self, stream_id: str) -> int:
        """The digits of the widest point a stream's prediction message repeats (bounding its size):
        a class's largest point; none for feature vectors, whose predictions do not repeat them."""
        if stream_id in self._vector_streams:
            return 0
        return len(str(self._streams[stream_id].hypothesis_class.domain_size - 1))

    def learn_batch(
        self,
        stream_id: str,
        partition: int,
        offsets: list[int],
        items: list[int],
        xs: Sequence[Any] | np.ndarray,
        ys: Sequence[int] | np.ndarray,
        ids: list[str | None] | None = None,
    ) -> PredictionBatch | VectorPredictionBatch:
        """Predict each label before learning it, in order (the learners' vectorised paths)."""
        if stream_id in self._vector_streams:
            return self._learn_vectors(stream_id, partition, offsets, items, xs, ys, ids)
        xs = np.asarray(xs, dtype=np.int64)
        ys = np.asarray(ys, dtype=np.uint8)
        key = self._key(stream_id, partition)
        soa = self.soa(stream_id, partition)
        was_realizable, mistakes_before = soa.realizable, soa.mistakes
        size_before = soa.version_space_size
        predictions = soa.learn_many(xs, ys)
        new_mistakes = soa.mistakes - mistakes_before
        if self._store is not None and (new_mistakes or soa.version_space_size != size_before):
            # Saved before the batch's offsets are committed: a crash cannot lose a change.
            self._store.save_soa(key, soa.state_dict())
        if was_realizable and not soa.realizable:
            log.warning(
                "stream %s is not realizable by its class %s: no hypothesis agrees with all of its "
                "%d examples; the SOA keeps serving with the papers' pointwise extension",
                stream_id,
                soa.hypothesis_class.spec,
                soa.examples_seen,
            )
        if mistakes_before <= soa.mistake_bound < soa.mistakes:
            log.warning(
                "stream %s made %d mistakes, more than its mistake bound %d (the Littlestone "
                "dimension): it is not realizable by %s",
                stream_id,
                soa.mistakes,
                soa.mistake_bound,
                soa.hypothesis_class.spec,
            )
        realizable = self._realizable(stream_id, soa.realizable and soa.mistakes <= soa.mistake_bound)
        self._metrics.learned(stream_id, len(xs), new_mistakes, realizable)
        if key != stream_id:
            self._metrics.shard_learned(stream_id, partition, soa.mistakes, soa.mistake_bound)
        # Built without pydantic's checks (model_construct): every field is of its type already, and
        # checking 5,000 entries per column cost more than learning them.
        return PredictionBatch.model_construct(
            schema_version=1,
            stream_id=stream_id,
            source_partition=partition,
            source_offsets=offsets,
            source_items=items,
            xs=xs.tolist(),
            ys=ys.tolist(),
            predictions=predictions.tolist(),
            mistakes_before=mistakes_before,
            mistakes=soa.mistakes,
            mistake_bound=soa.mistake_bound,
            realizable=realizable,
            example_ids=ids if ids is not None and any(i is not None for i in ids) else None,
        )

    def _realizable(self, stream_id: str, shard_realizable: bool) -> bool:
        """A stream is realizable while each of its shards is (one shard's proof is the stream's)."""
        if not shard_realizable:
            self._unrealizable.add(stream_id)
        return stream_id not in self._unrealizable

    def _count_clipped(self, stream_id: str, X: np.ndarray) -> None:
        """Count, per feature, the values outside the stream's bounds (the learners clip them): an
        operator's counter of raw data, on /metrics only, never on a public topic or page."""
        stream = self._vector_streams[stream_id]
        bounds = np.asarray(stream.bounds, dtype=np.float64)
        if not len(X) or bounds.shape != (X.shape[1], 2):
            return
        lo, hi = bounds[:, 0], bounds[:, 1]
        outside = np.count_nonzero(np.less(X, lo) | np.greater(X, hi), axis=0)
        for name, count in zip(stream.feature_names(), outside.tolist(), strict=True):
            if count:
                self._metrics.clipped(stream_id, name, int(count))

    def _learn_vectors(
        self,
        stream_id: str,
        partition: int,
        offsets: list[int],
        items: list[int],
        xs: Sequence[Any] | np.ndarray,
        ys: Sequence[int] | np.ndarray,
        ids: list[str | None] | None,
    ) -> VectorPredictionBatch:
        key = self._key(stream_id, partition)
        vector = self._vector_streams[stream_id]
        state = self._vector_state(stream_id, partition)
        learner = state.learner
        offset_col, item_col = np.asarray(offsets, dtype=np.int64), np.asarray(items, dtype=np.int64)
        fresh = np.ones(len(offset_col), dtype=bool)
        if partition in state.positions:  # a replay: skip what the saved state has learned
            last_offset, last_item = state.positions[partition]
            fresh = (offset_col > last_offset) | ((offset_col == last_offset) & (item_col > last_item))
        keep = np.flatnonzero(fresh)
        X = np.asarray(xs, dtype=np.float64).reshape(len(offset_col), -1)[keep]
        y = np.asarray(ys, dtype=np.uint8)[keep]
        self._count_clipped(stream_id, X)
        was_realizable, mistakes_before = learner.realizable, learner.mistakes
        predictions = learner.learn_many(X, y) if len(keep) else np.zeros(0, np.uint8)
        if len(keep):
            state.positions[partition] = (int(offset_col[keep[-1]]), int(item_col[keep[-1]]))
            if self._store is not None:  # saved before the batch's offsets are committed
                self._store.save_soa(key, state.to_dict())
        if was_realizable and learner.realizable is False:
            log.warning(
                "stream %s: its online %s made %d Perceptron mistakes, more than its bound %d: no "
                "%s separates the stream (mapped to its public bounds) with margin %g",
                stream_id,
                learner.name,
                learner.margin_mistakes,
                learner.margin_bound,
                "halfspace" if vector.classes == 2 else f"set of {vector.classes} linear scores",
                getattr(learner, "margin", float("nan")),
            )
        realizable: bool | None = learner.realizable
        if key != stream_id:
            realizable = self._realizable(stream_id, learner.realizable is not False)
            self._metrics.shard_learned(stream_id, partition, learner.mistakes, learner.mistake_bound)
        whole = key == stream_id  # a shard's margin counts are its own: on its shard_learned gauges
        self._metrics.online_learned(
            stream_id,
            len(keep),
            learner.mistakes - mistakes_before,
            learner.margin_mistakes if whole else None,
            learner.margin_bound if whole else None,
            realizable,
        )
        skipped = int(len(fresh) - len(keep))
        if skipped:
            log.info(
                "stream %s: skipped %d replayed examples its online learner had learned", stream_id, skipped
            )
        return VectorPredictionBatch.model_construct(  # as a PredictionBatch
            schema_version=1,
            stream_id=stream_id,
            learner=learner.name,
            source_partition=partition,
            source_offsets=offset_col[keep].tolist(),
            source_items=item_col[keep].tolist(),
            ys=y.tolist(),
            predictions=predictions.tolist(),
            mistakes_before=mistakes_before,
            mistakes=learner.mistakes,
            mistake_bound=learner.mistake_bound,
            margin_mistakes=learner.margin_mistakes,
            margin_bound=learner.margin_bound,
            realizable=realizable,
            example_ids=[ids[i] for i in keep]
            if ids is not None and any(ids[i] is not None for i in keep)
            else None,
        )
