"""The online side: one Standard Optimal Algorithm per stream, predicting before learning.

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
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from privstream.agents.interfaces import IngestMetrics, StateStore
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.soa import SOA
from privstream.schemas import PredictionBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnlineStream:
    """What the online agent needs to know of a configured stream."""

    stream_id: str
    hypothesis_class: HypothesisClass
    tie: int = 1


class OnlineLearners:
    """Per-stream SOA state; :meth:`learn` is the whole online step for one example."""

    def __init__(
        self, streams: Mapping[str, OnlineStream], metrics: IngestMetrics, store: StateStore | None = None
    ):
        self._streams = dict(streams)
        self._metrics = metrics
        self._store = store
        self._soas: dict[str, SOA] = {}
        self.reload()
        for stream_id, soa in self._soas.items():
            metrics.mistake_bound(stream_id, soa.mistake_bound)

    def reload(self) -> None:
        """(Re)load every stream's SOA from the store: at start, and when partitions move."""
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
        return stream_id in self._soas

    def soa(self, stream_id: str) -> SOA:
        return self._soas[stream_id]

    def learn_batch(
        self,
        stream_id: str,
        partition: int,
        offsets: list[int],
        items: list[int],
        xs: np.ndarray,
        ys: np.ndarray,
        ids: list[str | None] | None = None,
    ) -> PredictionBatch:
        """Predict each label before learning it, in order (the SOA's vectorised path)."""
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
        return PredictionBatch(
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
