"""The release agent offline: windows, ledger, budget, crash recovery, failures, user level, time."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pytest

from privstream.agents.releases import Product, ReleaseAgent, ReleasePolicy
from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded
from privstream.schemas import Example, HypothesisRelease
from privstream.stream_app.sdk import Release
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from tests.agents.twins import T0, FakeClock, SimulatedFits, inline, move_clock

CLASS = parse_class_spec("thresholds:1024")
TARGET = 600


class RecordingMetrics:
    def __init__(self):
        self.events = Counter()
        self.window_sizes = []

    def released(self, stream_id, epsilon_spent, epsilon_remaining):
        self.events["released"] += 1

    def refused(self, stream_id, epsilon_spent, epsilon_remaining):
        self.events["refused"] += 1

    def learner_failed(self, stream_id):
        self.events["failed"] += 1

    def learner_ran(self, learner, seconds, window_size):
        self.window_sizes.append(window_size)

    def late_example(self, stream_id):
        self.events["late"] += 1

    def deadline_missed(self, stream_id, seconds_late):
        self.events["deadline_missed"] += 1

    def default_released(self, stream_id, reason):
        self.events[f"default_{reason}"] += 1

    def released_level(self, stream_id, level):
        self.events[f"level{level}"] += 1

    def users_excluded(self, stream_id, count):
        self.events["excluded"] += count

    def guarantee_refused(self, stream_id):
        self.events["guarantee_refused"] += 1


class Published:
    def __init__(self, fail_times: int = 0):
        self.messages: list[tuple[str, bytes]] = []
        self.sanitized: list[tuple[str, bytes]] = []
        self.stamps: list[int | None] = []  # each record's timestamp (None: the send time)
        self.fail_times = fail_times

    async def __call__(self, topic: str, stream_id: str, release: bytes, *, timestamp_ms=None) -> None:
        if self.fail_times:
            self.fail_times -= 1
            raise ConnectionError("broker unavailable")
        (self.messages if topic == "hypotheses" else self.sanitized).append((stream_id, release))
        self.stamps.append(timestamp_ms)

    def releases(self):
        return [HypothesisRelease.model_validate_json(b) for _, b in self.messages]


class RecordingLearner:
    """A learner that records the points of every input it is given (sorted), then fits."""

    def __init__(self, inner):
        self.inner, self.name, self.inputs = inner, inner.name, []

    def fit(self, hclass, xs, ys, **kwargs):
        self.inputs.append(sorted(int(x) for x in xs))
        return self.inner.fit(hclass, xs, ys, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def policy(learner=None, sanitizer=None, **overrides):
    products = [Product("hypotheses", learner or make_learner("generic"), 1.0)]
    if sanitizer is not None:
        products.append(Product("sanitized", sanitizer, 0.5))
    values = dict(stream_id="s", hypothesis_class=CLASS, products=tuple(products), window_size=100)
    values.update(overrides)
    return ReleasePolicy(**values)


def make_agent(
    policies,
    *,
    budget=(10.0, 0.0),
    ledger=None,
    store=None,
    publish=None,
    metrics=None,
    runner=None,
    rng_factory=None,
    clock=None,
    simulated=False,
):
    """A release agent on in-memory stores; ``simulated``: everything inline on the event loop and
    fits on the fake ``clock`` (tests/agents/twins.py), for tests that move time through deadlines."""
    ledger = ledger or SqliteLedger.open(":memory:", budgets={p: budget for p in policies})
    store = store or SqliteStateStore(":memory:")
    options = {"runner": SimulatedFits(clock), "offload": inline} if simulated else {"runner": runner}
    agent = ReleaseAgent(
        policies,
        store,
        ledger,
        publish or Published(),
        metrics or RecordingMetrics(),
        library_version="test",
        rng_factory=rng_factory or (lambda window_id: seeded(zlib.crc32(window_id.encode()))),
        **options,
        **({"clock": clock} if clock is not None else {}),
    )
    return agent


def examples(n, start=0, seed=0, user=None):
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, 1024, n)
    return [
        (
            Example(stream_id="s", x=int(x), y=int(x >= TARGET), user_id=user(i) if user else None),
            0,
            start + i,
        )
        for i, x in enumerate(xs)
    ]


async def feed(agent, batch, chunk=37):
    """Hand the examples to the agent in chunks, as the ingest pipeline does after each poll."""
    observe(agent, batch, chunk)
    await agent.drain()


def observe(agent, batch, chunk=37):
    """:func:`feed` without waiting for the releases."""
    for start in range(0, len(batch), chunk):
        part = batch[start : start + chunk]
        agent.observe_batch(
            "s",
            part[0][1],
            [o for _, _, o in part],
            [e.x for e, _, _ in part],
            [e.y for e, _, _ in part],
            [e.user_id for e, _, _ in part],
            [e.event_time for e, _, _ in part],
            [None] * len(part),
        )


async def test_learners_in_the_child_process_release_what_a_thread_releases():
    """The service runs learners in a process per stream; with the same seeds it must publish the
    same hypotheses and synthetic distributions as in a thread."""
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.stream_app.learner_process import LearnerProcesses

    published = []
    children = LearnerProcesses(["s"])
    try:
        for runner in (None, children):
            publish = Published()
            # Seeds from the window's place, not its store's random generation: both runs alike.
            agent = make_agent(
                {"s": policy(sanitizer=make_sanitizer("mwem"))},
                publish=publish,
                runner=runner,
                rng_factory=lambda window_id: seeded(zlib.crc32(window_id.split("-", 1)[1].encode())),
            )
            await feed(agent, examples(250))
            published.append(
                (
                    [r.hypothesis for r in publish.releases()],
                    [json.loads(b)["distribution"] for _, b in publish.sanitized],
                )
            )
    finally:
        children.shutdown()
    assert len(published[0][0]) == 2 and len(published[0][1]) == 2
    assert published[0] == published[1]


async def test_count_windows_release_once_each_with_a_valid_certificate():
    publish, metrics = Published(), RecordingMetrics()
    agent = make_agent({"s": policy()}, publish=publish, metrics=metrics)
    await feed(agent, examples(1050))
    releases = publish.releases()
    assert len(releases) == 10  # 1050 examples: ten full windows of 100, the rest still open
    assert metrics.window_sizes == [100] * 10
    entries = [r.certificate.ledger_entry_id for r in releases]
    assert len(set(entries)) == 10
    for i, release in enumerate(releases):
        c = release.certificate
        assert (c.epsilon, c.delta, c.sample_size) == (1.0, 0.0, 100)
        assert c.neighbouring_relation == "replace-one" and c.privacy_unit == "example"
        assert c.window.kind == "count" and (c.window.start, c.window.end) == (100 * i, 100 * (i + 1))
        # lifetime per example: every example is in one window, so each window leaves 10 - 1
        assert c.epsilon_budget_remaining == pytest.approx(9.0)
        assert c.proper is True and c.randomness == "seeded"
        # The SDK (the client's decoder) reproduces the hypothesis the learner released.
        sdk = Release.from_json(publish.messages[i][1])
        xs = np.arange(1024)
        assert np.array_equal(sdk.predict(xs), hypothesis_from_dict(sdk.hypothesis_dict).predict(xs))
        assert sdk.predict(0) in (0, 1)
    assert agent.ledger.spent("s").epsilon == pytest.approx(1.0)  # per example, for ever
    assert all(c.published_at is not None for c in agent.ledger.entries("s"))


async def test_replayed_examples_do_not_make_new_windows():
    publish = Published()
    agent = make_agent({"s": policy()}, publish=publish)
    batch = examples(300)
    await feed(agent, batch)
    await feed(agent, batch)  # at-least-once: the same Kafka positions again
    assert len(publish.messages) == 3
    assert agent.store.next_seq("s") == 300


async def test_a_lifetime_budget_below_a_release_refuses_every_window_and_records_it():
    """The safety net (a lowered budget): the ledger refuses per window, durably."""
    publish, metrics = Published(), RecordingMetrics()
    agent = make_agent({"s": policy()}, budget=(0.5, 0.0), publish=publish, metrics=metrics)
    await feed(agent, examples(800))
    assert len(publish.messages) == 0
    assert metrics.events["refused"] == 8
    assert agent.ledger.refusals("s") == 8
    assert agent.ledger.spent("s").epsilon == 0.0
    assert agent.stream_status("s")["exhausted"] is True


async def test_a_lifetime_budget_lets_count_windows_release_for_ever():
    """The budget is per example for ever; disjoint windows compose in parallel."""
    publish = Published()
    agent = make_agent({"s": policy()}, budget=(1.0, 0.0), publish=publish)
    await feed(agent, examples(3000))
    assert len(publish.messages) == 30 and agent.ledger.refusals("s") == 0
    assert agent.ledger.spent("s").epsilon == pytest.approx(1.0)
    # Refused windows are dropped from the store: memory stays bounded.
    assert len(agent.store.count_window("s", 0, 800).xs) == 0


async def test_crash_between_charge_and_publish_republishes_the_same_bytes_once():
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    store = SqliteStateStore(":memory:")
    failing = Published(fail_times=1)  # the publication after the charge fails (a crash there)
    agent = make_agent({"s": policy()}, ledger=ledger, store=store, publish=failing)
    await feed(agent, examples(100))
    assert failing.messages == []
    assert len(ledger.unpublished("s")) == 1
    stored = ledger.unpublished("s")[0].release

    restarted = Published()  # a new worker on the same ledger and store
    agent2 = make_agent({"s": policy()}, ledger=ledger, store=store, publish=restarted)
    await feed(agent2, examples(1, start=100))  # first sight of the stream: recovery runs
    assert [m for _, m in restarted.messages] == [stored]
    assert ledger.unpublished("s") == []
    assert len(ledger.entries("s")) == 1
    assert ledger.spent("s").epsilon == pytest.approx(1.0)


async def test_window_closed_before_a_crash_is_released_after_restart():
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    store = SqliteStateStore(":memory:")
    for example, partition, offset in examples(100):  # stored, but the worker died before releasing
        store.append("s", partition, offset, example.x, example.y, None, None)
    publish = Published()
    agent = make_agent({"s": policy()}, ledger=ledger, store=store, publish=publish)
    await feed(agent, examples(1, start=100))
    assert len(publish.messages) == 1
    assert publish.releases()[0].certificate.sample_size == 100


async def test_a_learner_failure_releases_the_fallback_charged_like_any_window():
    """The window whose learner raised is released all the same, from a data-independent
    stand-in of the public size; its certificate has the same fields and values but the DP outputs."""

    class Flaky:
        name = "flaky"

        def __init__(self):
            self.calls = 0
            self.inner = make_learner("generic")

        def fit(self, hclass, xs, ys, **kwargs):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("learner bug")
            return self.inner.fit(hclass, xs, ys, **kwargs)

    publish, metrics = Published(), RecordingMetrics()
    agent = make_agent({"s": policy(learner=Flaky())}, publish=publish, metrics=metrics)
    await feed(agent, examples(200))
    assert metrics.events["failed"] == 1  # operators see the failure
    first, second = publish.releases()
    charged = [(c.window_id.rsplit("-", 1)[1], c.epsilon) for c in agent.ledger.entries("s")]
    assert charged == [("0", 1.0), ("1", 1.0)]  # charged like any window
    strip = {"dp_outputs", "ledger_entry_id", "window", "epsilon_budget_remaining"}
    assert first.certificate.model_dump(exclude=strip) == second.certificate.model_dump(exclude=strip)
    assert first.certificate.sample_size == 100


async def test_user_level_bounds_contributions_and_scales_epsilon():
    publish, metrics = Published(), RecordingMetrics()
    clock = FakeClock(T0)
    p = policy(
        privacy_unit="user",
        user_contribution_bound=2,
        window_kind="time",
        window_seconds=60.0,
        expected_size=20,
    )
    agent = make_agent({"s": p}, publish=publish, metrics=metrics, clock=clock)
    # 100 examples from 10 users (10 each), all in the first window: at most 2 per user are learned.
    await feed(agent, timed(examples(100, user=lambda i: f"u{i % 10}"), T0))
    clock.now = T0 + 60
    await agent.tick()
    await agent.drain()
    assert metrics.window_sizes == [20]
    c = publish.releases()[0].certificate
    assert c.privacy_unit == "user" and c.user_contribution_bound == 2
    assert c.epsilon == 1.0 and c.parameters["algorithm_epsilon"] == pytest.approx(0.5)
    # The certificate states how users pay: at ingest, for every node covering the window, kept or not
    rule = c.parameters["user_charge_rule"]
    assert "at ingest" in rule and "every node of the release tree covering the window" in rule
    assert "whether or not the node keeps" in rule and "over-charged, which is safe" in rule
    assert {agent.ledger.user_spent(f"u{i}").epsilon for i in range(10)} == {1.0}  # one node each


def timed(batch, start, step=0.1):
    """The examples with event times ``start, start + step, ...`` (Unix seconds)."""
    return [
        (e.model_copy(update={"event_time": datetime.fromtimestamp(start + i * step, UTC)}), part, off)
        for i, (e, part, off) in enumerate(batch)
    ]


async def test_time_windows_close_on_the_clock_empty_ones_too_and_hide_n():
    publish, metrics = Published(), RecordingMetrics()
    clock = FakeClock(T0)
    p = policy(window_kind="time", window_seconds=60.0, allowed_lateness_seconds=10.0, expected_size=50)
    agent = make_agent({"s": p}, publish=publish, metrics=metrics, clock=clock)
    await feed(agent, timed(examples(90), T0, step=0.5))  # 0..44.5 s: all in window 0
    clock.now = T0 + 69.9  # window 0 is [0, 60) and closes at 60 + 10 s on the clock
    await agent.tick()
    await agent.drain()
    assert publish.messages == []  # no example is needed to close it, and none can close it early
    clock.now = T0 + 70
    await agent.tick()
    await agent.drain()
    assert len(publish.messages) == 1
    c = publish.releases()[0].certificate
    assert c.neighbouring_relation == "add-remove-one"
    assert c.sample_size is None and c.accuracy_guarantee_holds is None
    assert c.window.kind == "time"
    # A late example for the released window is not learned privately.
    await feed(agent, timed(examples(1, start=500), T0 + 5))
    assert metrics.events["late"] == 1
    # Three minutes later, with no example at all: windows 1, 2 and 3 are released (empty).
    clock.now = T0 + 250
    await agent.tick()
    await agent.drain()
    windows = [r.certificate.window.window_id for r in publish.releases()]
    assert windows == [f"t60-L0-{int(T0 // 60) + i}" for i in range(4)]
    assert metrics.window_sizes == [90, 0, 0, 0]


async def test_a_release_is_published_at_its_deadline_stamped_with_it_not_when_its_learner_finishes():
    publish, metrics = Published(), RecordingMetrics()
    clock = FakeClock(T0, simulated=True)
    p = policy(window_kind="time", window_seconds=60.0, expected_size=50, publish_delay_seconds=30.0)
    agent = make_agent({"s": p}, publish=publish, metrics=metrics, clock=clock, simulated=True)
    observe(agent, timed(examples(10), T0))
    await move_clock(clock, T0 + 61)
    await agent.tick()
    await move_clock(clock, T0 + 89.9)
    # charged (reserved, with its deadline), but neither completed nor published before the deadline
    assert agent.ledger.reservation("s", "t60-L0-29453760", "learner:generic").scheduled_at == T0 + 90
    assert publish.messages == [] and agent.ledger.entries("s") == []
    assert await agent.replay_outbox() == 0  # the outbox does not publish it early either
    await move_clock(clock, T0 + 90)
    assert len(publish.messages) == 1 and agent.ledger.entries("s")[0].published
    assert publish.stamps == [(T0 + 90) * 1000]  # the record's timestamp is the deadline
    certificate = publish.releases()[0].certificate
    assert certificate.publication.scheduled_at.timestamp() == T0 + 90
    assert certificate.publication.publish_delay_seconds == 30.0


async def test_where_n_is_private_the_algorithms_get_expected_size_and_the_certificate_their_outputs():
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.schemas import SanitizedRelease

    publish = Published()
    clock = FakeClock(T0)
    p = policy(
        sanitizer=make_sanitizer("mwem", rounds=3), window_kind="time", window_seconds=60.0, expected_size=50
    )
    agent = make_agent({"s": p}, publish=publish, clock=clock)
    await feed(agent, timed(examples(90), T0, step=0.5))
    clock.now = T0 + 60
    await agent.tick()
    await agent.drain()
    (hypothesis,) = publish.releases()
    (sanitized,) = [SanitizedRelease.model_validate_json(b) for _, b in publish.sanitized]
    assert hypothesis.certificate.privacy == sanitized.certificate.privacy == "information-theoretic"
    cert = sanitized.certificate
    assert cert.parameters["expected_size"] == 50 and "noisy_size" in cert.dp_outputs  # n private: a noisy ν
    assert len(cert.dp_outputs["transcript"]) == 3 and "transcript" not in cert.parameters
    assert cert.theorem_sample_size_log10 is not None and cert.sample_size is None


async def test_a_sanitizer_is_released_beside_the_hypothesis_and_charged_separately():
    from privstream.learning.sanitizers import make_sanitizer
    from privstream.schemas import SanitizedRelease
    from privstream.stream_app.sdk import SanitizedView

    publish = Published()
    agent = make_agent({"s": policy(sanitizer=make_sanitizer("mwem"))}, publish=publish)
    batch = examples(200)
    await feed(agent, batch)
    assert len(publish.messages) == 2 and len(publish.sanitized) == 2
    sanitized = [SanitizedRelease.model_validate_json(b) for _, b in publish.sanitized]
    assert {s.certificate.epsilon for s in sanitized} == {0.5}
    assert all(s.certificate.proper is False for s in sanitized)
    # Two windows, two products each: 1.0 + 0.5 per example (each is in one window), four entries.
    assert agent.ledger.spent("s").epsilon == pytest.approx(1.5)
    assert sorted(c.mechanism for c in agent.ledger.entries("s")) == [
        "learner:generic",
        "learner:generic",
        "sanitizer:mwem",
        "sanitizer:mwem",
    ]
    view = SanitizedView.from_json(publish.sanitized[0][1])
    from privstream.learning.hypotheses import hypothesis_from_runs

    answer = view.answer(hypothesis_from_runs(1024, 0, [512]))  # the fraction of x >= 512
    assert 0.0 <= answer <= 1.0


async def test_partition_assignment_releases_windows_left_by_a_crashed_owner():
    """No new message needed: the windows closed before the crash are released on assignment."""
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    store = SqliteStateStore(":memory:")
    for example, partition, offset in examples(250):  # offsets committed, windows never released
        store.append("s", partition, offset, example.x, example.y, None, None)
    publish = Published()
    agent = make_agent({"s": policy()}, ledger=ledger, store=store, publish=publish)
    agent.on_partitions_assigned({1})  # not the stream's partition: nothing to do
    await agent.drain()
    assert publish.messages == []
    agent.on_partitions_assigned({0, 1})
    await agent.drain()
    assert len(publish.messages) == 2  # two complete windows of 100; 50 examples stay buffered
    assert len(ledger.entries("s")) == 2 and ledger.spent("s").epsilon == pytest.approx(1.0)


async def test_a_stream_of_feature_vectors_releases_a_private_model():
    from privstream.learning.private_learners.vector_base import make_vector_learner

    publish = Published()
    vector_policy = ReleasePolicy(
        stream_id="s",
        hypothesis_class=None,
        window_size=400,
        products=(Product("hypotheses", make_vector_learner("bayes-consistent"), 1.0, vector=True),),
        feature_bounds=np.array([[0.0, 1.0], [0.0, 1.0]]),
    )
    agent = make_agent({"s": vector_policy}, publish=publish)
    rng = np.random.default_rng(5)
    points = rng.random((400, 2))
    labels = (points[:, 0] > 0.5).astype(int)
    agent.observe_batch(
        "s", 0, list(range(400)), points.tolist(), labels.tolist(), [None] * 400, [None] * 400, [None] * 400
    )
    await agent.drain()
    assert len(publish.messages) == 1
    release = Release.from_json(publish.messages[0][1])
    c = release.certificate
    assert (c.epsilon, c.sample_size, c.neighbouring_relation) == (1.0, 400, "replace-one")
    predictions = release.predict(points)
    assert predictions.shape == (400,) and set(np.unique(predictions)) <= {0, 1}
    assert release.predict([0.9, 0.1]) in (0, 1)
    assert agent.ledger.spent("s").epsilon == pytest.approx(1.0)


async def test_the_individual_filter_charges_present_users_until_their_budget_then_excludes_them():
    """The individual filter at ingest: a user's first row in a window charges them for every node
    covering it, there and then, until one more window would pass their budget; then their rows are
    left out of the window. Absent users pay nothing; a user in two streams pays from one budget;
    the reservations at the close name no users."""
    from privstream.agents.ledger_port import PrivacyCost

    clock = FakeClock(T0)
    common = dict(
        privacy_unit="user",
        user_contribution_bound=1,
        window_kind="time",
        window_seconds=60.0,
        expected_size=5,
        top_level=1,
        user_budget=PrivacyCost(3.0, 0.0),
    )
    policies = {"s": policy(**common), "t": policy(**common, stream_id="t")}
    metrics = RecordingMetrics()
    agent = make_agent(policies, budget=(3.0, 0.0), metrics=metrics, clock=clock)
    spent_at_ingest = []
    for w in range(4):  # "u" sends to both streams in every window; "v" only to "s", in window 0
        senders = {"s": ["u"] + (["v"] if w == 0 else []), "t": ["u"]}
        for stream_id, users in senders.items():
            agent.observe_batch(
                stream_id,
                0,
                [100 * w + i + (50 if stream_id == "t" else 0) for i in range(len(users))],
                [700] * len(users),
                [1] * len(users),
                users,
                [datetime.fromtimestamp(T0 + 60 * w + 1, UTC)] * len(users),
                [None] * len(users),
            )
            spent_at_ingest.append(agent.ledger.user_spent("u").epsilon)
        clock.now = T0 + 60 * (w + 1)
        await agent.tick()
        await agent.drain()
    # ε = 1 per node and product, two nodes cover a window (levels 0 and 1). At its first row "u"
    # pays both nodes of "s" covering the first window at once, before any close; "t" would cost 2
    # more (excluded); the second window of "s" costs its level-0 node only (its parent is paid);
    # then every window would pass 3.
    assert spent_at_ingest == pytest.approx([2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0])
    assert agent.ledger.user_spent("u").epsilon == pytest.approx(3.0)
    # "v" pays for both nodes covering window 0, whether or not they keep v's row
    assert agent.ledger.user_spent("v").epsilon == pytest.approx(2.0)
    assert agent.ledger.user_spent("nobody").epsilon == 0.0
    from privstream.agents.windows import time_window_index

    first = time_window_index(T0 + 1, 60.0)  # the first window (even: a level-1 node covers it and the next)
    assert first % 2 == 0
    assert set(agent.ledger.admitted("s", 1, first // 2)) == {"u", "v"}
    assert agent.ledger.admitted("t", 0, first) == {} and agent.ledger.admitted("s", 0, first + 2) == {}
    # t's windows 0 and 1, s's 2 and 3, t's 2 and 3: operators only, how many were left out
    assert metrics.events["excluded"] == 6
    assert metrics.events["refused"] == 0  # releases go on, without the exhausted user
    for stream_id in policies:
        charges = agent.ledger.entries(stream_id)
        assert len(charges) == 6  # 4 windows and 2 level-1 nodes, each released
        assert {c.included_users for c in charges} == {None}  # the reservations name no users


async def test_a_reservation_that_named_its_users_feeds_the_learner_their_rows_only():
    """A user-level reservation made before users were charged at ingest (it names the users it
    charged) and recomputed after a restart: the node's rows of users it did not charge (stored
    then, before admission) never reach the learner."""
    from privstream.agents.ledger_port import NodeRange
    from privstream.agents.windows import node_id, time_window_index

    clock = FakeClock(T0)
    learner = RecordingLearner(make_learner("generic"))
    p = policy(
        learner=learner,
        privacy_unit="user",
        user_contribution_bound=2,
        window_kind="time",
        window_seconds=60.0,
        expected_size=5,
    )
    agent = make_agent({"s": p}, clock=clock)
    window = time_window_index(T0 + 1, 60.0)
    key = p.products[0].key
    agent.ledger.reserve(
        "s", node_id(p.family, 0, window), key, 1.0, 0.0, NodeRange.of(0, window), users=["a"]
    )
    # rows stored as before admission at ingest: b's too, though the reservation charged only a
    agent.store.append_time_rows("s", 0, [(0, 100, 0, "a", window), (1, 900, 1, "b", window)])
    clock.now = T0 + 60
    await agent.tick()
    await agent.drain()
    assert [rows for rows in learner.inputs if rows] == [[100]]
    assert agent.ledger.user_spent("b").epsilon == 0.0


async def test_a_vector_node_keeps_its_first_max_node_examples_and_states_the_cap_and_its_rule():
    """Count windows keep the level's ε; time windows (n private) halve it, always."""
    from privstream.agents.windows import count_family
    from privstream.learning.private_learners.vector_base import make_vector_learner

    def vector_policy(**overrides):
        return ReleasePolicy(
            stream_id="s",
            hypothesis_class=None,
            window_size=400,
            max_node_examples=150,
            top_level=1,
            products=(Product("hypotheses", make_vector_learner("bayes-consistent"), 1.0, vector=True),),
            feature_bounds=np.array([[0.0, 1.0], [0.0, 1.0]]),
            **overrides,
        )

    rng = np.random.default_rng(5)
    points = rng.random((800, 2))
    labels = (points[:, 0] > 0.5).astype(int)
    publish = Published()
    agent = make_agent({"s": vector_policy()}, publish=publish)
    agent.observe_batch(
        "s",
        0,
        list(range(400)),
        points[:400].tolist(),
        labels[:400].tolist(),
        [None] * 400,
        [None] * 400,
        [None] * 400,
    )
    await agent.drain()
    node = agent.store.load_node("s", count_family(agent.store.generation, 400), 0, 0)
    assert np.array_equal(node.xs, points[:150])  # the first 150 by arrival
    agent.observe_batch(
        "s",
        0,
        list(range(400, 800)),
        points[400:].tolist(),
        labels[400:].tolist(),
        [None] * 400,
        [None] * 400,
        [None] * 400,
    )
    await agent.drain()
    certificates = [r.certificate for r in publish.releases()]
    assert [c.level for c in certificates] == [0, 0, 1]
    for c in certificates:
        assert c.sample_size == 150 and c.parameters["max_node_examples"] == 150
        assert c.parameters["algorithm_epsilon"] == c.epsilon == 1.0  # replace-one: the whole ε
        assert "replace-one" in c.parameters["cap_rule"]

    clock = FakeClock(T0)
    publish = Published()
    timed_agent = make_agent(
        {"s": vector_policy(window_kind="time", window_seconds=60.0, expected_size=10)},
        publish=publish,
        clock=clock,
    )
    times = [datetime.fromtimestamp(T0 + i, UTC) for i in range(20)]
    timed_agent.observe_batch(
        "s", 0, list(range(20)), points[:20].tolist(), labels[:20].tolist(), [None] * 20, times, [None] * 20
    )
    clock.now = T0 + 200
    await timed_agent.tick()
    await timed_agent.drain()
    certificates = [r.certificate for r in publish.releases()]
    assert certificates and all(c.epsilon == 1.0 for c in certificates)
    for c in certificates:  # the cap can bind whatever the expected size: half the ε, always
        assert c.parameters["algorithm_epsilon"] == 0.5
        assert "half the level's epsilon" in c.parameters["cap_rule"]


async def test_a_capped_vector_time_window_stores_only_its_first_rows_as_they_arrive():
    """The cap at ingest: a time window's private size never reaches the store or its close."""
    from privstream.agents.windows import time_family
    from privstream.learning.private_learners.vector_base import make_vector_learner

    policy = ReleasePolicy(
        stream_id="s",
        hypothesis_class=None,
        max_node_examples=150,
        top_level=0,
        products=(Product("hypotheses", make_vector_learner("bayes-consistent"), 1.0, vector=True),),
        feature_bounds=np.array([[0.0, 1.0], [0.0, 1.0]]),
        window_kind="time",
        window_seconds=60.0,
        expected_size=100,
    )
    points = np.random.default_rng(6).random((400, 2))
    clock = FakeClock(T0)
    agent = make_agent({"s": policy}, publish=Published(), clock=clock)
    times = [datetime.fromtimestamp(T0 + i / 10, UTC) for i in range(400)]
    for start in range(0, 400, 37):  # batches of several polls
        end = min(start + 37, 400)
        agent.observe_batch(
            "s",
            0,
            list(range(start, end)),
            points[start:end].tolist(),
            [1] * (end - start),
            [None] * (end - start),
            times[start:end],
            [None] * (end - start),
        )
    (window,) = agent.store.pending_time_windows("s")
    assert np.array_equal(agent.store.time_window("s", window).xs, points[:150])  # 250 never stored
    clock.now = T0 + 200
    await agent.tick()
    await agent.drain()
    node = agent.store.load_node("s", time_family(policy.window_seconds), 0, window)
    assert node is None or np.array_equal(node.xs, points[:150])
    assert agent.store.time_window("s", window).xs.tolist() == []


class Reads:
    """The generic learner, recording how many examples each fit read."""

    def __init__(self):
        self.inner = make_learner("generic")
        self.name = self.inner.name
        self.sizes: list[int] = []

    def fit(self, hclass, xs, ys, **kwargs):
        self.sizes.append(len(xs))
        return self.inner.fit(hclass, xs, ys, **kwargs)


async def test_every_stream_caps_what_its_learner_reads_at_a_public_size_stated_in_the_certificate():
    """An integer class's histogram node too: its learner reads a random subset of at most
    ``max_node_examples`` (levels 1 and 2 hold 200 and 400 examples, the cap is 150); count windows
    keep the level's ε and state the capped n; where n is private the learner runs at ε/2, always."""
    learner = Reads()
    publish = Published()
    agent = make_agent(
        {"s": policy(learner, top_level=2, max_node_examples=150)}, publish=publish, budget=(30.0, 0.0)
    )
    await feed(agent, examples(400))
    assert learner.sizes == [100, 100, 150, 100, 100, 150, 150]
    certificates = [r.certificate for r in publish.releases()]
    assert [c.sample_size for c in certificates] == [100, 100, 150, 100, 100, 150, 150]
    assert {c.parameters["max_node_examples"] for c in certificates} == {150}
    assert "uniformly random subset" in certificates[0].parameters["cap_rule"]
    assert {c.parameters["algorithm_epsilon"] for c in certificates} == {1.0}

    learner, publish, clock = Reads(), Published(), FakeClock(T0)
    capped_time = policy(
        learner, window_kind="time", window_seconds=60.0, expected_size=50, max_node_examples=150
    )
    agent = make_agent({"s": capped_time}, publish=publish, clock=clock)
    await feed(agent, timed(examples(10), T0))
    clock.now = T0 + 61
    await agent.tick()
    await agent.drain()
    (release,) = publish.releases()
    assert release.certificate.parameters["algorithm_epsilon"] == 0.5  # an addition can displace one
    assert "half the level's epsilon" in release.certificate.parameters["cap_rule"]


async def test_certificates_state_the_ledger_and_its_epoch_and_a_lowered_budget_stops_at_once():
    """Every certificate names the ledger that charged it and the ledger's epoch then. A budget
    lowered below what an example has spent refuses the next window at once, although that
    window's examples are fresh (before, releases went on after "exhausted")."""
    ledger = SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    epoch = ledger.claim().epoch
    publish, metrics = Published(), RecordingMetrics()
    agent = make_agent({"s": policy(top_level=1)}, publish=publish, metrics=metrics, ledger=ledger)
    await feed(agent, examples(200))  # windows 0 and 1, and their level-1 node
    certificates = [r.certificate for r in publish.releases()]
    assert [c.level for c in certificates] == [0, 0, 1]
    assert {(c.ledger_id, c.ledger_epoch) for c in certificates} == {(ledger.ledger_id, epoch)}
    assert ledger.spent("s").epsilon == 2.0  # 1 per level
    ledger.set_budget("s", 1.5, 0.0)  # below the spend, above a fresh window's cost
    await feed(agent, examples(200, start=200))
    assert len(publish.releases()) == 3 and ledger.refusals("s") >= 2


async def test_rows_stored_before_users_paid_at_ingest_are_charged_at_start_or_kept_out():
    """An upgrade from a version that charged users at the close: a's and b's rows are in an open
    window, uncharged; b's budget is spent. The start charges a for every node over the window
    (as if the rows arrived now) and keeps b's rows from every node: nobody is released unpaid."""
    from privstream.agents.ledger_port import PrivacyCost
    from privstream.agents.windows import time_window_index

    clock = FakeClock(T0)
    learner = RecordingLearner(make_learner("generic"))
    p = policy(
        learner=learner,
        privacy_unit="user",
        user_contribution_bound=2,
        window_kind="time",
        window_seconds=60.0,
        expected_size=5,
        top_level=1,
        user_budget=PrivacyCost(2.0, 0.0),
    )
    store, ledger = SqliteStateStore(":memory:"), SqliteLedger.open(":memory:", budgets={"s": (10.0, 0.0)})
    window = time_window_index(T0 + 1, 60.0)
    ledger.admit("s", window - 10, [PrivacyCost(2.0, 0.0)], ["b"], user_budget=PrivacyCost(2.0, 0.0))
    store.append_time_rows("s", 0, [(0, 100, 0, "a", window), (1, 900, 1, "b", window)])
    agent = make_agent({"s": p}, clock=clock, store=store, ledger=ledger)
    assert ledger.user_spent("a").epsilon == 2.0  # nodes (0, w) and (1, w // 2), at the start
    assert ledger.user_spent("b").epsilon == 2.0  # an earlier window's only
    clock.now = T0 + 60
    await agent.tick()
    await agent.drain()
    assert [rows for rows in learner.inputs if rows] == [[100]]
