"""The online side: one online learner per stream, predicting each label before learning it.

A class stream has a Standard Optimal Algorithm; a stream of feature vectors has the online
learner its settings name (:mod:`privstream.learning.online`: the Perceptron with its margin's
mistake bound by default).

Examples are keyed by ``stream_id``, so a stream's examples arrive in order on one partition
and its SOA lives on the worker that owns that partition.

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
from privstream.learning.online import OnlineStateError, learner_from_state, make_online_learner
from privstream.learning.online.base import LinearLearner
from privstream.learning.soa import SOA
from privstream.schemas import PredictionBatch, VectorPredictionBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnlineStream:
    """What the online agent needs to know of a configured stream."""

    stream_id: str
    hypothesis_class: HypothesisClass
    tie: int = 1


@dataclass(frozen=True)
class VectorStream:
    """A stream of feature vectors: its public bounds and the online learner its settings name."""

    stream_id: str
    bounds: tuple[tuple[float, float], ...]
    learner: str = "perceptron"
    params: Mapping[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = ()  # the features' names (default x1, x2, ...), for the clipped counter

    def feature_names(self) -> tuple[str, ...]:
        return self.names or tuple(f"x{t + 1}" for t in range(len(self.bounds)))

    def new_learner(self) -> LinearLearner:
        return make_online_learner(self.learner, [list(b) for b in self.bounds], **dict(self.params))


@dataclass
class _VectorState:
    """A vector stream's learner and, per source partition, the position ``(offset, item)`` of the
    last example it learned (what a replay skips)."""

    learner: LinearLearner
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


class OnlineLearners:
    """Per-stream online state: an SOA per class stream, a vector learner per vector stream."""

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
        self._soas: dict[str, SOA] = {}
        self._vectors: dict[str, _VectorState] = {}
        self.reload()
        for stream_id, soa in self._soas.items():
            metrics.mistake_bound(stream_id, soa.mistake_bound)
        for stream_id, state in self._vectors.items():
            learner = state.learner
            metrics.online_learned(
                stream_id, 0, 0, learner.margin_mistakes, learner.margin_bound, learner.realizable
            )

    def reload(self) -> None:
        """(Re)load every stream's learner from the store: at start, and when partitions move."""
        for stream_id, vector in self._vector_streams.items():
            saved = self._store.load_soa(stream_id) if self._store else None
            self._vectors[stream_id] = _VectorState(vector.new_learner())
            if saved is not None:
                try:
                    self._vectors[stream_id] = _VectorState.from_dict(vector, saved)
                except OnlineStateError as exc:  # e.g. the learner or its margin changed in the settings
                    log.warning(
                        "stream %s: ignoring its saved online state (%s); starting afresh", stream_id, exc
                    )
        for stream_id, stream in self._streams.items():
            snapshot = self._store.load_soa(stream_id) if self._store else None
            if snapshot is None:
                self._soas[stream_id] = SOA(stream.hypothesis_class, tie=stream.tie)
                continue
            try:
                self._soas[stream_id] = SOA.from_state_dict(stream.hypothesis_class, snapshot)
            except ValueError as exc:  # e.g. the stream's class was changed in the settings
                log.warning("stream %s: ignoring its saved SOA state (%s); starting afresh", stream_id, exc)
                self._soas[stream_id] = SOA(stream.hypothesis_class, tie=stream.tie)

    def has(self, stream_id: str) -> bool:
        return stream_id in self._soas or stream_id in self._vectors

    def soa(self, stream_id: str) -> SOA:
        return self._soas[stream_id]

    def prediction_point_digits(self, stream_id: str) -> int:
        """The digits of the widest point a stream's prediction message repeats (bounding its size):
        a class's largest point; none for feature vectors, whose predictions do not repeat them."""
        if stream_id in self._vectors:
            return 0
        return len(str(self._soas[stream_id].hypothesis_class.domain_size - 1))

    def vector_learner(self, stream_id: str) -> LinearLearner:
        """The online learner of a stream of feature vectors."""
        return self._vectors[stream_id].learner

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
        if stream_id in self._vectors:
            return self._learn_vectors(stream_id, partition, offsets, items, xs, ys, ids)
        xs = np.asarray(xs, dtype=np.int64)
        ys = np.asarray(ys, dtype=np.uint8)
        soa = self._soas[stream_id]
        was_realizable, mistakes_before = soa.realizable, soa.mistakes
        size_before = soa.version_space_size
        predictions = soa.learn_many(xs, ys)
        new_mistakes = soa.mistakes - mistakes_before
        if self._store is not None and (new_mistakes or soa.version_space_size != size_before):
            # Saved before the batch's offsets are committed: a crash cannot lose a change.
            self._store.save_soa(stream_id, soa.state_dict())
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
        realizable = soa.realizable and soa.mistakes <= soa.mistake_bound
        self._metrics.learned(stream_id, len(xs), new_mistakes, realizable)
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
        state = self._vectors[stream_id]
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
                self._store.save_soa(stream_id, state.to_dict())
        if was_realizable and learner.realizable is False:
            log.warning(
                "stream %s: its online %s made %d Perceptron mistakes, more than (R/γ)² = %d: no "
                "halfspace separates the stream (mapped to its public bounds) with margin %g",
                stream_id,
                learner.name,
                learner.margin_mistakes,
                learner.margin_bound,
                getattr(learner, "margin", float("nan")),
            )
        realizable = learner.realizable
        self._metrics.online_learned(
            stream_id,
            len(keep),
            learner.mistakes - mistakes_before,
            learner.margin_mistakes,
            learner.margin_bound,
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
