"""Twin runs with time: when releases appear must not depend on the data.

Each test runs the release path twice on neighbouring inputs (``twins.py``) on a simulated clock,
with a learner whose run time depends on the data (slow in proportion to n, or slow on some labels)
or whose process dies on the data, and compares everything public, times included: the order of
the publications, each record's timestamp, when it arrived on the topic, and when each public page
first showed each version of itself. They must be identical; only the DP outputs may differ.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from privstream.learning.private_learners import make_learner
from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import T0, DiesOn, SlowInN, Step, TwinRun, assert_twins, example, twins

SLOT = 5.0  # publish_delay_seconds of the streams below
MS_PER_EXAMPLE = 0.001  # the slow learner: 1 ms of run time per example of its input


def time_stream(name: str = "s", seconds: float = 60.0, **release: Any) -> StreamConfig:
    config = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "expected_size": 20,
        "window": {
            "kind": "time",
            "seconds": seconds,
            "allowed_lateness_seconds": 10.0,
            "publish_delay_seconds": SLOT,
        },
        **release,
    }
    return StreamConfig(name=name, hypothesis_class="thresholds:1024", release=config)


def batch(n: int, at: float, stream: str = "s", x: int = 700) -> list[dict[str, Any]]:
    """n examples of the point ``x`` dated ``at``, in batch messages of at most 1000 rows."""
    stamp = datetime.fromtimestamp(at, UTC).isoformat()
    return [
        {"stream_id": stream, "xs": [x] * k, "ys": [int(x >= 600)] * k, "event_times": [stamp] * k}
        for k in [min(1000, n - i) for i in range(0, n, 1000)]
    ]


def every_second(until: float, messages: dict[float, list[dict[str, Any]]] | None = None) -> list[Step]:
    """A step each second from T0 (the service's timer period), with messages at given times."""
    messages = messages or {}
    return [Step(T0 + t, messages.get(t, [])) for t in range(int(until) + 1)]


def deadlines(observed) -> list[float]:
    return [
        datetime.fromisoformat(m["release"]["certificate"]["publication"]["scheduled_at"]).timestamp()
        for m in observed.messages
    ]


def slow() -> SlowInN:
    return SlowInN(make_learner("generic"), MS_PER_EXAMPLE)


async def test_releases_go_out_at_their_deadline_stamped_with_it_whatever_the_fit_took():
    """Window 0 holds nothing, 2,000 examples (a 2 s fit: inside the slot) or 10,000 (a 10 s fit:
    past the slot, so its default goes out at the deadline)."""
    stream = time_stream()
    empty = every_second(200, {5: [example(100, at=T0 + 1)]})
    for n in (10_000, 2000):
        full = every_second(200, {5: [example(100, at=T0 + 1), *batch(n, T0 + 2)]})
        a, b = await twins(stream, empty, full, learner=slow())
        # window 0 closes at its end plus the lateness, and goes out one slot later
        assert b.messages[0]["published_at"] == T0 + 60 + 10 + SLOT
        assert_twins(a, b)
        assert len(a.messages) == 3  # windows 0-2 closed by T0 + 190
        for observed in (a, b):
            assert [m["timestamp"] for m in observed.messages] == deadlines(observed)  # stamped with it
            assert [m["published_at"] for m in observed.messages] == deadlines(observed)  # sent then


async def test_count_windows_too_a_learner_slow_on_some_labels_moves_nothing():
    """Count windows (n public): the neighbour changes one example's label, which makes the learner
    spend 3 s more; the window closes at the same moment, so the deadline is the same."""

    class SlowOnOnes(SlowInN):
        def fit(self, hclass, xs, ys, **kwargs):
            assert self.clock is not None
            self.clock.spend(3.0 * int(ys.sum() > 50))
            return self.inner.fit(hclass, xs, ys, **kwargs)

    stream = StreamConfig(
        name="s",
        hypothesis_class="thresholds:1024",
        release={
            "learner": "generic",
            "epsilon": 1.0,
            "epsilon_budget": 100.0,
            "window": {"kind": "count", "size": 100, "publish_delay_seconds": SLOT},
        },
    )
    base = [example(100 + i, y=int(i < 50)) for i in range(100)]
    neighbour = [*base[:-1], example(199, y=1)]  # one more 1-label: 51 of them
    a, b = await twins(
        stream,
        [Step(T0 + 1, base), Step(T0 + 2, base), Step(T0 + 30)],
        [Step(T0 + 1, neighbour), Step(T0 + 2, base), Step(T0 + 30)],
        learner=SlowOnOnes(make_learner("generic"), 0.0),
    )
    assert_twins(a, b)
    # taken in at T0 + 1 and T0 + 2: the second window's slot starts when the first one's ends
    assert deadlines(a) == [T0 + 1 + SLOT, T0 + 1 + 2 * SLOT]
    assert [m["timestamp"] for m in b.messages] == deadlines(b)


async def test_public_pages_count_a_release_from_its_scheduled_time_only():
    """A slot of 8 s, long enough for the 2 s fit: /budget, /streams and the releases page show the
    release at its deadline in both twins, not when its charge or its fit completed."""
    stream = time_stream(
        window={
            "kind": "time",
            "seconds": 60.0,
            "allowed_lateness_seconds": 10.0,
            "publish_delay_seconds": 8.0,
        }
    )
    empty = every_second(100, {5: [example(100, at=T0 + 1)]})
    full = every_second(100, {5: [example(100, at=T0 + 1), *batch(2000, T0 + 2)]})
    a, b = await twins(stream, empty, full, learner=slow())
    for observed in (b, a):
        counted = [t for t, page in observed.first_shown("budget/s") if page["releases"] >= 1]
        spent = [t for t, page in observed.first_shown("budget/s") if page["lifetime_epsilon_spent"] > 0]
        listed = [t for t, page in observed.first_shown("releases/s") if page]
        assert counted[0] == spent[0] == listed[0] == T0 + 70 + 8  # window 0's deadline
    assert_twins(a, b)  # the pages over time included
    assert deadlines(b)[0] == T0 + 70 + 8


async def test_a_slow_fit_moves_neither_its_streams_later_releases_nor_another_streams():
    """Stream a's window 0 takes 20 s to fit in one twin (past its 5 s slot: its default goes out at
    the deadline and its process is stopped); a's next windows (10 s long) and stream b, on its own
    learner, publish exactly as when the window is empty."""
    streams = [time_stream("a", seconds=10.0), time_stream("b", seconds=10.0)]
    quiet = {1: [example(100, at=T0 + 1, stream="a"), example(100, at=T0 + 1, stream="b")]}
    busy = {1: [*quiet[1], *batch(20_000, T0 + 2, stream="a")]}
    a, b = await twins(
        streams, every_second(60, quiet), every_second(60, busy), learners={"a": slow(), "b": slow()}
    )
    assert_twins(a, b)
    for observed in (a, b):
        times = {stream: [] for stream in ("a", "b")}
        for message, deadline in zip(observed.messages, deadlines(observed), strict=True):
            assert message["published_at"] == message["timestamp"] == deadline
            times[message["key"]].append(deadline)
        # every 10 s window closes 10 s after its end, and goes out one slot later, in each stream
        assert times["a"] == times["b"] == [T0 + 10 * (w + 1) + 10 + SLOT for w in range(len(times["a"]))]


async def test_public_ledger_ids_depend_on_the_stream_node_and_product_only():
    """Stream b's published ids are the same whether stream a's window is empty or huge, and whether
    stream a exists at all: a function of (stream, node, product), not of a global counter."""
    streams = [time_stream("a", top_level=1), time_stream("b", top_level=1)]
    common = {5: [example(100, at=T0 + 1, stream="b")], 65: [example(700, at=T0 + 61, stream="b")]}
    heavy = {**common, 5: [*common[5], *batch(5000, T0 + 2, stream="a")]}
    a, b = await twins(
        streams, every_second(200, common), every_second(200, heavy), learners={"a": slow(), "b": slow()}
    )
    alone = await TwinRun(streams[1], learner=slow()).run(every_second(200, common))

    def ids(observed, stream: str) -> list[str]:
        return [
            m["release"]["certificate"]["ledger_entry_id"] for m in observed.messages if m["key"] == stream
        ]

    assert ids(a, "b") == ids(b, "b") == ids(alone, "b")
    assert_twins(a, b)
    windows = [m["release"]["certificate"]["window"]["window_id"] for m in alone.messages]
    assert ids(alone, "b") == [f"b/{w}/learner:generic" for w in windows]


async def test_a_learner_whose_process_dies_on_the_data_releases_the_default_charged_the_same():
    """Window 0 holds the poison point in one twin: the learner's process dies there. Its default
    (the fit on zero examples, n being private) goes out at the deadline, charged like any release;
    it equals the other twin's release of the same window, empty."""
    stream = time_stream()
    a, b = await twins(
        stream,
        every_second(200),
        every_second(200, {5: [example(777, at=T0 + 1)]}),
        learner=DiesOn(make_learner("generic"), poison=777),
    )
    assert_twins(a, b)
    assert len(b.messages) == 3 and b.pages["budget"]["releases"] == 3
    assert b.dp[0] == a.dp[0]  # window 0: the default, the learner on zero examples
    assert b.failures == a.failures == 0  # a dead process is not the release's failure


@pytest.mark.parametrize("restart_at", [T0 + 72, T0 + 80])
async def test_after_a_crash_a_reservation_past_its_deadline_is_completed_with_its_default(restart_at):
    """The worker dies while window 0's fit runs (reserved, deadline T0 + 75). Restarted before the
    deadline, a new worker fits it again from the stored seed; after it, the reservation's fate is
    a function of time only: its default, published at once and stamped with the deadline."""
    stream = time_stream()
    data = {5: [example(700, at=T0 + 1), example(800, at=T0 + 2), example(900, at=T0 + 3)]}
    first = TwinRun(stream, learner=SlowInN(make_learner("generic"), 10.0))  # 30 s: still running
    await first.run(every_second(71, data), to_the_end=False)  # the worker dies at T0 + 71
    [reservation] = first.ledger.incomplete("s")
    assert reservation.scheduled_at == T0 + 75 and first.observed.messages == []

    restarted = TwinRun(stream, ledger=first.ledger, store=first.store)  # a fast learner this time
    restarted.clock.now = restart_at
    restarted.agent.on_partitions_assigned({0})
    await restarted.run([Step(restart_at), Step(T0 + 90)])
    [message, *_] = restarted.observed.messages
    assert message["timestamp"] == T0 + 75
    assert (
        message["release"]["certificate"]["ledger_entry_id"]
        == reservation.public_id
        == "s/t60-L0-29453760/learner:generic"
    )
    fitted = await TwinRun(stream).run(every_second(80, data))  # no crash: the learner's output
    default = await TwinRun(stream).run(every_second(80))  # window 0 empty: the default
    assert fitted.dp[0] != default.dp[0]
    assert restarted.observed.dp[0] == (default.dp[0] if restart_at > T0 + 75 else fitted.dp[0])
