"""The ingest loop: a batch's offsets are committed only once its outputs are acknowledged, in the
order the batches were polled, while the next batch is already processed; a revocation (or a stop)
first settles the batch in flight.

Stand-ins for the consumer, the producer and the pipeline; the producer acknowledges a record only
when the test says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition

from privstream.agents.pipeline import BatchOutput, RawRecord
from privstream.stream_app.kafka.ingest import IngestService, _Rebalance
from privstream.stream_app.kafka.log_marks import ExamplesLogReplacedError
from privstream.stream_app.settings import Settings

TP = TopicPartition("examples", 0)


class Consumer:
    def __init__(self, batches: list[list[int]]):
        self.batches = [[RawRecord("examples", 0, o, b"k", b"{}") for o in offsets] for offsets in batches]
        self.commits: list[int] = []

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[RawRecord]]:
        await asyncio.sleep(0)
        if not self.batches:
            await asyncio.sleep(0.01)
            return {}
        return {TP: self.batches.pop(0)}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(offsets[TP])

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def highwater(self, tp: TopicPartition) -> int | None:
        return None


class Producer:
    """Sends are acknowledged when ``ack(value)`` is called."""

    def __init__(self) -> None:
        self.pending: dict[bytes, asyncio.Future[Any]] = {}

    async def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None) -> Any:
        future = self.pending[value] = asyncio.get_running_loop().create_future()
        return future

    def ack(self, value: bytes) -> None:
        self.pending[value].set_result(None)


class Pipeline:
    def __init__(self) -> None:
        self.processed: list[int] = []  # the last offset of each batch, in order

    def process(self, records: Any) -> BatchOutput:
        last = list(records)[-1].offset
        self.processed.append(last)
        return BatchOutput(predictions=[(b"s", b"batch-%d" % last)])

    def process_parts(self, records: Any, examples: int | None = None) -> Any:
        yield self.process(records)  # the service's ingest takes a chunk's output in parts


def service(batches: list[list[int]]) -> tuple[IngestService, Consumer, Producer, Pipeline]:
    settings = Settings(kafka_bootstrap="127.0.0.1:9", _env_file=None)  # type: ignore[call-arg]
    pipeline = Pipeline()
    ingest = IngestService(settings, pipeline, on_assigned=lambda parts: None)  # type: ignore[arg-type]
    consumer, producer = Consumer(batches), Producer()
    ingest.consumer, ingest.producer = consumer, producer  # type: ignore[assignment]
    return ingest, consumer, producer, pipeline


async def until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition never held")


async def test_offsets_are_committed_after_the_outputs_in_order_while_the_next_batch_is_processed():
    ingest, consumer, producer, pipeline = service([[0, 1], [2, 3], [4]])
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        # The second batch is processed while the first one's prediction waits for Kafka...
        await until(lambda: pipeline.processed == [1, 3])
        assert consumer.commits == [] and ingest.batch_started is not None
        # ...and nothing is committed before its own outputs are acknowledged, in order.
        producer.ack(b"batch-3")
        await asyncio.sleep(0.02)
        assert consumer.commits == []
        producer.ack(b"batch-1")
        await until(lambda: consumer.commits == [2, 4])
        await until(lambda: pipeline.processed == [1, 3, 4])
        assert consumer.commits == [2, 4]  # the third batch is not acknowledged yet
        producer.ack(b"batch-4")
        await until(lambda: consumer.commits == [2, 4, 5])
        assert ingest.batch_started is None and ingest.handled_offsets == {TP: 5}
    finally:
        loop.cancel()


async def test_a_revocation_waits_until_the_batch_in_flight_is_committed():
    ingest, consumer, producer, pipeline = service([[7, 8]])
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await until(lambda: pipeline.processed == [8])
        revoking = asyncio.ensure_future(_Rebalance(ingest).on_partitions_revoked([TP]))
        await asyncio.sleep(0.02)
        assert not revoking.done()  # its partitions are not given away with a batch uncommitted
        producer.ack(b"batch-8")
        await asyncio.wait_for(revoking, 1)
        assert consumer.commits == [9]
    finally:
        loop.cancel()


class ProbedConsumer(Consumer):
    """Its metadata request (``topics()``) answers when the test says so; ``stop()`` closes the
    connections, failing a request still in flight (aiokafka logs that as an ERROR)."""

    def __init__(self) -> None:
        super().__init__([])
        self.answer = asyncio.Event()
        self.in_flight = 0
        self.requests = 0
        self.failed_by_stop = 0

    async def topics(self) -> set[str]:
        self.requests += 1
        self.in_flight += 1
        try:
            await self.answer.wait()
        finally:
            self.in_flight -= 1
        return {"examples"}

    async def stop(self) -> None:
        self.failed_by_stop += self.in_flight


class StoppingProducer(Producer):
    async def stop(self) -> None:
        pass


async def test_the_stop_waits_for_a_kafka_probe_in_flight_before_closing_the_clients():
    ingest, _, _, _ = service([])
    consumer = ingest.consumer = ProbedConsumer()  # type: ignore[assignment]
    ingest.producer = StoppingProducer()  # type: ignore[assignment]
    probe = asyncio.ensure_future(ingest.probe_kafka())
    await until(lambda: consumer.in_flight == 1)
    stopping = asyncio.ensure_future(ingest.on_stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()  # the probe's request is still in flight: the clients stay open
    consumer.answer.set()
    await asyncio.wait_for(asyncio.gather(probe, stopping), 5)
    assert consumer.failed_by_stop == 0
    await ingest.probe_kafka()  # a probe after the stop sends nothing
    assert consumer.requests == 1


class Gate:
    """A pause that holds the poll in hand before its chunk number ``at`` until opened."""

    def __init__(self, at: int):
        self.at, self.calls = at, 0
        self.holding, self.opened = asyncio.Event(), asyncio.Event()

    async def __call__(self, read_bytes: int = 0) -> None:
        self.calls += 1
        if self.calls == self.at:
            self.holding.set()
            await self.opened.wait()


class Recording(Pipeline):
    def __init__(self) -> None:
        super().__init__()
        self.offsets: list[int] = []  # every record processed, in order

    def process(self, records: Any) -> BatchOutput:
        records = list(records)
        self.offsets += [r.offset for r in records]
        return super().process(records)


async def test_a_poll_is_processed_in_chunks_and_committed_once_whole():
    """1,200 records: three chunks, each after the pause; one commit, past the poll's last offset,
    once every chunk's outputs are acknowledged."""
    ingest, consumer, producer, _ = service([list(range(1200))])
    ingest.pipeline = pipeline = Recording()  # type: ignore[assignment]
    gate = ingest.pause = Gate(at=2)
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await asyncio.wait_for(gate.holding.wait(), 1)
        assert pipeline.offsets == list(range(500))  # the first chunk only: the pause holds the rest
        gate.opened.set()
        await until(lambda: pipeline.processed == [499, 999, 1199])
        producer.ack(b"batch-499")
        producer.ack(b"batch-999")
        await asyncio.sleep(0.02)
        assert consumer.commits == []  # the poll's last chunk is not acknowledged yet
        producer.ack(b"batch-1199")
        await until(lambda: consumer.commits == [1200])
        assert pipeline.offsets == list(range(1200))
    finally:
        loop.cancel()


async def test_a_revocation_between_two_chunks_waits_until_the_whole_poll_is_committed():
    """The consumer's coordinator revokes while the poll in hand waits between its chunks (a
    deadline near): the revocation returns only once every chunk is processed and the poll's offsets
    are committed, so the partition's next owner reads on from there (nothing lost, nothing read
    twice), and no record of the poll is processed after the partition was given away."""
    ingest, consumer, producer, _ = service([list(range(1200)), [1200]])
    ingest.pipeline = pipeline = Recording()  # type: ignore[assignment]
    gate = ingest.pause = Gate(at=2)
    loop = asyncio.ensure_future(IngestService._consume(ingest))
    try:
        await asyncio.wait_for(gate.holding.wait(), 1)
        revoking = asyncio.ensure_future(_Rebalance(ingest).on_partitions_revoked([TP]))
        await asyncio.sleep(0.02)
        assert not revoking.done()  # half the poll processed: its partition is not given away
        gate.opened.set()
        await until(lambda: pipeline.processed[:3] == [499, 999, 1199])
        assert not revoking.done()  # processed, not yet acknowledged and committed
        for value in (b"batch-499", b"batch-999", b"batch-1199"):
            producer.ack(value)
        await asyncio.wait_for(revoking, 1)
        assert consumer.commits == [1200]
        assert pipeline.offsets[:1200] == list(range(1200))
    finally:
        loop.cancel()


class PausingConsumer(Consumer):
    """Records which partitions are paused (aiokafka fetches nothing of those)."""

    def __init__(self) -> None:
        super().__init__([])
        self.paused: set[TopicPartition] = set()

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused.difference_update(partitions)


async def test_a_new_assignment_is_read_only_once_its_logs_are_judged():
    # aiokafka fetches a new assignment while the listener runs: records handled before the
    # checks seek the partition were read twice (5,000 examples of a poll learned again).
    ingest, _, _, _ = service([])
    consumer = ingest.consumer = PausingConsumer()  # type: ignore[assignment]
    paused_while: list[set[TopicPartition]] = []

    async def on_assigned(partitions: set[int]) -> None:
        await asyncio.sleep(0)
        paused_while.append(set(consumer.paused))

    async def check_logs(assigned: list[TopicPartition]) -> None:
        await asyncio.sleep(0)
        paused_while.append(set(consumer.paused))

    ingest.on_assigned, ingest.check_logs = on_assigned, check_logs  # type: ignore[method-assign]
    await _Rebalance(ingest).on_partitions_assigned([TP])
    assert paused_while == [{TP}, {TP}] and consumer.paused == set()


async def test_a_refused_log_stays_paused_for_the_loop_to_stop_the_worker():
    ingest, _, _, _ = service([])
    consumer = ingest.consumer = PausingConsumer()  # type: ignore[assignment]

    async def check_logs(assigned: list[TopicPartition]) -> None:
        raise ExamplesLogReplacedError("examples partition 0 was replaced")

    ingest.check_logs = check_logs  # type: ignore[method-assign]
    await _Rebalance(ingest).on_partitions_assigned([TP])
    assert consumer.paused == {TP} and ingest.refused is not None
