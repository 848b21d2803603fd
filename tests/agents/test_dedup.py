"""De-duplication by example ``id``: a repeat within the stream's horizon is dropped before the SOA
and the windows, and counted; the copies an at-least-once producer sends count once."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.agents.dedup import Deduplicator
from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import IngestPipeline, RawRecord
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator, integer_domain
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.schemas import PredictionBatch
from privstream.stream_app.metrics import ServiceMetrics

CLASS = parse_class_spec("thresholds:64")
HORIZON = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_pipeline(clock: Clock, *, max_ids: int = 100_000) -> tuple[IngestPipeline, ServiceMetrics]:
    metrics = ServiceMetrics(["s", "t"])
    learners = OnlineLearners({s: OnlineStream(s, CLASS) for s in ("s", "t")}, metrics, None)
    validator = ExampleValidator({s: integer_domain(CLASS.check_point) for s in ("s", "t")})
    dedup = Deduplicator({"s": HORIZON, "t": HORIZON}, max_ids=max_ids, clock=clock)
    return IngestPipeline(validator, learners, metrics, Progress(), dedup=dedup), metrics


def one(x: int, example_id: str | None, stream: str = "s") -> bytes:
    return json.dumps({"stream_id": stream, "x": x, "y": int(x >= 32), "id": example_id}).encode()


class Feed:
    """Offsets go on from one call to the next, as on a partition."""

    def __init__(self, pipeline: IngestPipeline):
        self.pipeline, self.offset = pipeline, 0

    def __call__(self, *values: bytes, offset: int | None = None) -> list[tuple[int, int]]:
        """The (offset, row) of every example learned, in order."""
        start = self.offset if offset is None else offset
        records = [RawRecord("examples", 0, start + i, b"s", v) for i, v in enumerate(values)]
        self.offset = max(self.offset, start + len(values))
        learned = []
        for _, value in self.pipeline.process(records).predictions:
            batch = PredictionBatch.model_validate_json(value)
            learned += list(zip(batch.source_offsets, batch.source_items, strict=True))
        return learned


def test_repeats_of_an_id_within_the_horizon_are_learned_once():
    """Each copy of an example was learned (and windowed) again, though ids are for de-duplication."""
    clock = Clock()
    pipeline, metrics = make_pipeline(clock)
    feed = Feed(pipeline)
    batch = json.dumps({"stream_id": "s", "xs": [3, 40, 3], "ys": [0, 1, 0], "ids": ["a", "b", None]})
    learned = feed(one(3, "a"), one(3, "a"), batch.encode(), one(5, None), one(5, None), one(3, "a", "t"))
    # offset 1 repeats "a"; the batch's rows 0 ("a" again) is a repeat, rows 1 and 2 are not;
    # examples without an id are never repeats; another stream's "a" is its own
    assert learned == [(0, 0), (2, 1), (2, 2), (3, 0), (4, 0), (5, 0)]
    text = metrics.registry.get_sample_value("privstream_examples_repeated_total", {"stream": "s"})
    assert text == 2
    clock.now += HORIZON / 2
    assert feed(one(3, "b")) == []  # still within the horizon of its last sighting
    clock.now += HORIZON + 1
    assert feed(one(3, "b"), one(3, "b")) == [(7, 0)]  # past it: learned again, once


def test_a_message_read_again_is_not_a_repeat_of_itself():
    """After a rebalance Kafka delivers a batch again: each example gets the fate it had."""
    clock = Clock()
    feed = Feed(make_pipeline(clock)[0])
    values = [one(1, "a"), one(2, "b"), one(1, "a"), one(3, "c")]
    first = feed(*values)
    assert first == [(0, 0), (1, 0), (3, 0)]
    assert feed(*values, offset=0) == first
    assert feed(*values[2:], offset=2) == [(3, 0)]


def test_a_full_memory_forgets_the_least_recently_seen_and_counts_it():
    clock = Clock()
    pipeline, metrics = make_pipeline(clock, max_ids=3)
    feed = Feed(pipeline)
    feed(one(1, "a"), one(1, "b"), one(1, "c"), one(1, "d"))  # "a" forgotten early
    assert feed(one(1, "a"), one(1, "c")) == [(4, 0)]
    assert metrics.registry.get_sample_value("privstream_example_ids_forgotten_total", {"stream": "s"}) == 2


ids = st.sampled_from(["a", "b", "c", None])
moments = st.floats(0, 300)


@settings(max_examples=300, deadline=None)
@given(stream=st.lists(st.tuples(ids, moments), min_size=1, max_size=25), extra=st.tuples(ids, moments))
def test_one_example_more_changes_the_fate_of_at_most_one_other(stream, extra):
    """The rule looks at the last sighting of an id whatever its fate: adding an example can only
    make the next one with its id a repeat, never reach further."""
    stream.sort(key=lambda e: e[1])  # (id, arrival time on the worker's clock)
    where = sum(1 for _, t in stream if t <= extra[1])
    more = [*stream[:where], extra, *stream[where:]]

    def kept(examples: list[tuple[str | None, float]]) -> list[bool]:
        clock = Clock()
        dedup = Deduplicator({"s": HORIZON}, clock=clock)
        fate = []
        for offset, (example_id, moment) in enumerate(examples):
            clock.now = moment
            fate.append(example_id is None or not dedup.is_repeat("s", example_id, 0, offset, 0))
        return fate

    a, b = kept(stream), kept(more)
    del b[where]
    changed = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    assert len(changed) <= 1
    if changed:  # the first example after it with its id
        (i,) = changed
        assert extra[0] is not None and stream[i][0] == extra[0] and i >= where
        assert all(stream[j][0] != extra[0] for j in range(where, i))
