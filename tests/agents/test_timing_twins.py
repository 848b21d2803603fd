"""Twin runs with time, at scale: between a node's close and its deadline the service does only
work whose cost is a function of public sizes, so a node of the cap's size and one of 150 times
the cap publish the same records at the same times (only the DP outputs differ).

The twins charge the store's decoding of rows to the run's clock (``store_seconds_per_row``), so
work that grows with a window's private size moves the run's times as it would on a machine.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import T0, TWIN_SLOT_SECONDS, Step, TwinRun, assert_twins, example

CAP = 20


def capped_time_stream(name: str = "s", partition_by: str = "stream", **release: object) -> StreamConfig:
    config = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "expected_size": 10,
        "max_node_examples": CAP,
        "window": {"kind": "time", "seconds": 60.0, "allowed_lateness_seconds": 10.0},
        **release,
    }
    return StreamConfig(
        name=name,
        hypothesis_class="thresholds:1024",
        partition_by=partition_by,  # type: ignore[arg-type]
        release=config,
    )


def window_of(n: int) -> list[Step]:
    """Window 1 holds ``n`` examples (arriving in one poll); the others one or none."""
    flood = [example(i % 1024, at=T0 + 61 + i / (10 * n)) for i in range(n)]
    return [
        Step(T0 + 5, [example(100, at=T0 + 5)]),
        Step(T0 + 65, flood),
        Step(T0 + 125, [example(700, at=T0 + 125)]),
        Step(T0 + 185),
    ]


async def run(stream: StreamConfig, steps: list[Step]) -> TwinRun:
    twin = TwinRun(stream, store_seconds_per_row=0.005)  # 3,000 rows: 15 s, three slots
    await twin.run(steps)
    return twin


async def test_a_time_window_of_150_times_the_cap_closes_like_one_of_the_cap():
    """Integer class, example level, n private: the window's rows are a bottom-k sample kept as
    they arrive, so closing it reads at most the cap's rows whatever its size."""
    small, large = (
        await run(capped_time_stream(), window_of(CAP)),
        await run(capped_time_stream(), window_of(150 * CAP)),
    )
    assert_twins(small.observed, large.observed)
    assert max(large.rows_read) <= CAP and max(small.rows_read) <= CAP
    assert max(large.rows_stored) <= CAP and max(small.rows_stored) <= CAP  # kept at ingest
    cap_rule = large.observed.messages[1]["release"]["certificate"]["parameters"]["cap_rule"]
    assert "lowest priority" in cap_rule and "half the level's epsilon" in cap_rule


async def test_scoring_a_time_window_of_150_times_the_cap_reads_the_cap_and_moves_no_time():
    """With quality estimates, window 1 scores window 0's release on its rows: a bottom-k sample of
    at most the cap whatever the window's size, read once for the estimate and the learner."""
    stream = capped_time_stream(quality_epsilon=0.5)
    small, large = await run(stream, window_of(CAP)), await run(stream, window_of(150 * CAP))
    assert_twins(small.observed, large.observed)
    assert max(large.rows_read) <= CAP and max(small.rows_read) <= CAP
    scored = large.observed.messages[1]["release"]["evaluations"]
    assert [e["release"].split("/")[1] for e in scored] == [
        large.observed.messages[0]["release"]["certificate"]["window"]["window_id"]
    ]


def count_stream(name: str, size: int = 10) -> StreamConfig:
    release = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "window": {"kind": "count", "size": size},
    }
    return StreamConfig(name=name, hypothesis_class="thresholds:1024", release=release)


async def test_a_count_window_closes_at_its_last_records_timestamp_not_after_the_polls_processing():
    """Stream a's count window closes in a poll that holds, ahead of its closing example, 2,000
    rows of stream b in one twin and none in the other (2 s of validation, learning and storage on
    the run's clock): a's signed scheduled_at, record timestamps and landings are the same."""
    streams = [count_stream("a"), capped_time_stream(name="b")]
    a_window = [example(100 + i, stream="a") for i in range(10)]
    flood = [example(i % 1024, at=T0 + 5, stream="b") for i in range(2000)]
    runs = []
    for poll in ([*flood, *a_window], a_window):
        twin = TwinRun(streams, ingest_seconds_per_example=0.001)
        runs.append(await twin.run([Step(T0 + 5, poll), Step(T0 + 65), Step(T0 + 125)]))
    assert_twins(*runs)
    (first,) = [m for m in runs[0].messages if m["key"] == "a"]
    deadline = first["release"]["certificate"]["publication"]["scheduled_at"]
    assert first["timestamp"] == datetime.fromisoformat(deadline).timestamp() == T0 + 5 + TWIN_SLOT_SECONDS


async def test_a_refusal_reaches_the_public_pages_at_its_deadline_not_when_the_previous_fit_ends():
    """Top level 1, a ledger budget that covers level 0 only: node (1, 0) is refused. Its
    reservation waits for window 1's fit, slow in n (4 s on 200 examples, within the slot, vs
    none on one): the budget page shows the refusal at the node's deadline in both twins."""
    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.learning.private_learners import make_learner
    from privstream.stream_app.release_policies import release_policy
    from tests.agents.twins import SlowInN

    window = {
        "kind": "time",
        "seconds": 60.0,
        "allowed_lateness_seconds": 10.0,
        "publish_delay_seconds": 10.0,
    }
    stream = capped_time_stream(top_level=1, max_node_examples=1000, window=window)
    level0 = release_policy(stream, parse_class_spec(stream.hypothesis_class)).products[0].cost(0)[0]

    def steps(n: int) -> list[Step]:
        return [
            Step(T0 + 5, [example(100, at=T0 + 5)]),
            Step(T0 + 65, [example(i % 1024, at=T0 + 61 + i / (10 * n)) for i in range(n)]),
            Step(T0 + 185),
        ]

    runs = []
    for n in (1, 200):
        twin = TwinRun(stream, budget=(level0, 0.0), learner=SlowInN(make_learner("generic"), 0.02))
        runs.append(await twin.run(steps(n)))
    assert_twins(*runs)
    shown = [(moment, page["refusals"]) for moment, page in runs[1].first_shown("budget/s")]
    refused_at = min(moment for moment, refusals in shown if refusals)
    deadlines = [
        datetime.fromisoformat(m["release"]["certificate"]["publication"]["scheduled_at"])
        for m in runs[1].messages
    ]
    assert refused_at > max(d.timestamp() for d in deadlines)  # after window 1's deadline, at its own


#: The ingest loop's cost per example on the run's clock in the flood twins: a chunk of a poll
#: (500 records) takes 0.2 s, within the deadline guard; a poll of 20,000 takes 8 s.
FLOOD_SECONDS_PER_EXAMPLE = 0.0004


@pytest.mark.parametrize("window_0", [CAP, 0], ids=["cap-sized window", "empty window"])
async def test_a_flood_at_a_close_leaves_the_release_its_fit_and_its_landing(window_0: int):
    """Window 0 (``window_0`` examples, a learner taking 0.1 s per example: 2 s on the cap) closes
    at T0 + 70; 0.1 s later a poll of 20,000 examples of window 1 arrives in one twin and nothing in
    the other (8 s of ingest on the run's clock, past the window's deadline at T0 + 75). Ingest
    works in chunks and waits while a deadline is near, so window 0's fit is seen in time and its
    release lands at its deadline in both twins: the same records, timestamps, landings and output
    kind (no default)."""
    from privstream.learning.private_learners import make_learner
    from tests.agents.twins import SlowInN

    def steps(flood: int) -> list[Step]:
        window = [example(100 + i, at=T0 + 5 + i / 100) for i in range(window_0)]
        poll = [example(i % 1024, at=T0 + 61 + i / (10 * flood)) for i in range(flood)]
        return [Step(T0 + 5, window), Step(T0 + 70.1, poll), Step(T0 + 185)]

    runs = []
    for flood in (0, 20_000):
        twin = TwinRun(
            capped_time_stream(),
            learner=SlowInN(make_learner("generic"), 0.1),
            ingest_seconds_per_example=FLOOD_SECONDS_PER_EXAMPLE,
        )
        runs.append(await twin.run(steps(flood)))
    assert_twins(*runs)
    first = runs[1].messages[0]
    assert first["release"]["certificate"]["window"]["window_id"].endswith("-L0-" + str(int(T0 // 60)))
    assert first["published_at"] == first["timestamp"] == T0 + 70 + TWIN_SLOT_SECONDS
    assert runs[0].defaults == runs[1].defaults == {}


@pytest.mark.parametrize("messages", [1, 4], ids=["one batch message", "four batch messages"])
async def test_a_flood_of_batch_rows_at_a_close_leaves_the_release_its_fit_and_its_landing(messages: int):
    """As the flood above, but the 20,000 examples come as ExampleBatch messages (one message, or
    four), so the poll holds one record (or four) however many rows: ingest learns and stores a
    chunk's rows a bounded number at a time and waits between them while a deadline is near, so
    window 0 (the cap's size, a learner taking 0.1 s per example) releases its fit at its deadline
    in both twins, as without the flood."""
    from privstream.learning.private_learners import make_learner
    from tests.agents.twins import SlowInN

    def batches(n: int) -> list[dict[str, object]]:
        rows = [example(i % 1024, at=T0 + 61 + i / (10 * n)) for i in range(n)]
        size = -(-n // messages) if n else 0
        return [
            {
                "stream_id": "s",
                "xs": [r["x"] for r in rows[lo : lo + size]],
                "ys": [r["y"] for r in rows[lo : lo + size]],
                "event_times": [r["event_time"] for r in rows[lo : lo + size]],
            }
            for lo in range(0, n, size or 1)
        ]

    def steps(flood: int) -> list[Step]:
        window = [example(100 + i, at=T0 + 5 + i / 100) for i in range(CAP)]
        return [Step(T0 + 5, window), Step(T0 + 70.1, batches(flood)), Step(T0 + 185)]

    runs, offsets = [], []
    for flood in (0, 20_000):
        twin = TwinRun(
            capped_time_stream(),
            learner=SlowInN(make_learner("generic"), 0.1),
            ingest_seconds_per_example=FLOOD_SECONDS_PER_EXAMPLE,
        )
        runs.append(await twin.run(steps(flood)))
        offsets.append(twin.offset)
    assert_twins(*runs)
    first = runs[1].messages[0]
    assert first["published_at"] == first["timestamp"] == T0 + 70 + TWIN_SLOT_SECONDS
    assert runs[0].defaults == runs[1].defaults == {}
    assert offsets == [CAP, CAP + messages]  # the flood came as batch records, not single examples


async def test_reading_a_large_message_at_a_close_is_kept_clear_of_the_deadline():
    """The one unsplit part of ingest, reading a message's JSON, grows with the message: here one
    batch of 20,000 rows (0.9 MB) takes 6 s to read on the run's clock, arriving 0.1 s after window
    0's close. Ingest keeps three times its measured read time clear of deadlines before it starts
    reading, so window 0 releases its fit at its deadline in both twins (without that, the read ran
    past the deadline: +1.1 s)."""
    from privstream.learning.private_learners import make_learner
    from tests.agents.twins import SlowInN

    def steps(flood: int) -> list[Step]:
        window = [example(100 + i, at=T0 + 5 + i / 100) for i in range(CAP)]
        rows = [example(i % 1024, at=T0 + 61 + i / (10 * flood)) for i in range(flood)]
        message = {
            "stream_id": "s",
            "xs": [r["x"] for r in rows],
            "ys": [r["y"] for r in rows],
            "event_times": [r["event_time"] for r in rows],
        }
        return [Step(T0 + 5, window), Step(T0 + 70.1, [message] if flood else []), Step(T0 + 185)]

    runs = []
    for flood in (0, 20_000):
        twin = TwinRun(
            capped_time_stream(),
            learner=SlowInN(make_learner("generic"), 0.1),
            read_seconds_per_byte=6.0 / 880_000,
        )
        runs.append(await twin.run(steps(flood)))
    assert_twins(*runs)
    first = runs[1].messages[0]
    assert first["published_at"] == first["timestamp"] == T0 + 70 + TWIN_SLOT_SECONDS
    assert runs[0].defaults == runs[1].defaults == {}


PARTITIONS = 6


@pytest.mark.parametrize("partition_by", ["example", "user"])
async def test_a_partitioned_time_window_of_150_times_the_cap_closes_like_one_of_the_cap(partition_by: str):
    """A stream spread over 6 partitions (keyed by example id, or by user at the example level),
    window 1 holding the cap's size or 150 times it over every partition, and a second stream
    beside it with the same examples in both twins: the same records, record timestamps, landings
    and output kinds for both streams; the close reads at most the cap's rows."""
    streams = [capped_time_stream(partition_by=partition_by), capped_time_stream(name="b")]

    def window_of(n: int) -> list[Step]:
        window = [
            example(i % 1024, at=T0 + 61 + i / (10 * n), example_id=f"e{i}", user=f"u{i % 97}")
            for i in range(n)
        ]
        beside = [example(200 + i, at=T0 + 62 + i, stream="b") for i in range(10)]
        return [
            Step(T0 + 5, [example(100, at=T0 + 5, example_id="e-first", user="u0")]),
            Step(T0 + 65, [*window, *beside]),
            Step(T0 + 125, [example(700, at=T0 + 125, example_id="e-last", user="u1")]),
            Step(T0 + 185),
        ]

    runs = []
    for n in (CAP, 150 * CAP):
        twin = TwinRun(streams, store_seconds_per_row=0.005, partitions=PARTITIONS)
        await twin.run(window_of(n))
        runs.append(twin)
    small, large = runs
    assert_twins(small.observed, large.observed)
    assert max(large.rows_read) <= CAP and max(small.rows_read) <= CAP
    assert max(large.rows_stored) <= CAP and max(small.rows_stored) <= CAP  # kept at ingest
    assert small.observed.defaults == large.observed.defaults == {}
    # the examples reached every partition's shard, and both streams released every window
    assert len(set(large.partitions_seen)) == PARTITIONS
    keys = [m["key"] for m in large.observed.messages]
    assert keys.count("s") == keys.count("b") == 2  # windows 0 and 1
