"""The release tree (issue 17): levels, node ids and ranges, per-level ε, lifetime certificates,
a node's release equal to the offline learner's, and the parallel-composition audit."""

from __future__ import annotations

import asyncio
import json
import zlib

import numpy as np
import pytest
from pydantic import ValidationError

from privstream.agents.releases import ReleaseAgent
from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import audit
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded
from privstream.stream_app.settings import ReleaseConfig, StreamConfig
from tests.agents.twins import T0, Step, TwinRun, assert_twins, example, twins

#: Until the lifetime ledger (E-DESIGN §3, branch ledger-tree) is merged, the ledger composes every
#: release sequentially against one total: a sound but draining bound. These tests give it room.
LEGACY = (1000.0, 0.0)


def tree_stream(levels: int = 2, kind: str = "count", **release: object) -> StreamConfig:
    window = {"kind": "count", "size": 50} if kind == "count" else {"kind": "time", "seconds": 60.0}
    config = {"learner": "generic", "levels": levels, "epsilon_budget": 3.0, "window": window, **release}
    if kind == "time":
        config["expected_size"] = 20
    return StreamConfig(name="s", hypothesis_class="thresholds:1024", release=config)


def test_the_lifetime_budget_is_split_evenly_over_the_levels_and_checked():
    config = ReleaseConfig(levels=2, epsilon_budget=3.0)
    assert config.learner_epsilons == [1.0, 1.0, 1.0] and config.lifetime_cost == (3.0, 0.0)
    with_sanitizer = ReleaseConfig(levels=1, epsilon_budget=2.0, sanitizer="mwem")
    assert with_sanitizer.learner_epsilons == with_sanitizer.sanitizer_epsilons == [0.5, 0.5]
    assert ReleaseConfig(levels=1, level_epsilon=[0.5, 1.5], epsilon_budget=2.0).lifetime_cost == (2.0, 0.0)
    with pytest.raises(ValidationError, match=r"ε=3 per example over the 3 levels.*epsilon_budget 2"):
        ReleaseConfig(levels=2, epsilon=1.0, epsilon_budget=2.0)
    with pytest.raises(ValidationError, match="level_epsilon needs 3 positive values"):
        ReleaseConfig(levels=2, level_epsilon=[1.0], epsilon_budget=5.0)


async def test_count_windows_release_every_node_of_every_level_in_a_fixed_order():
    run = TwinRun(tree_stream(levels=2), budget=LEGACY)
    xs = np.random.default_rng(1).integers(0, 1024, 200)
    observed = await run.run([Step(T0, [example(int(x)) for x in xs])])
    certificates = [m["release"]["certificate"] for m in observed.messages]
    ids = [c["window"]["window_id"] for c in certificates]
    assert ids == ["gen0-c50-L0-0", "gen0-c50-L0-1", "gen0-c50-L1-0", "gen0-c50-L0-2", "gen0-c50-L0-3",
                   "gen0-c50-L1-1", "gen0-c50-L2-0"]
    top = certificates[-1]
    assert top["level"] == 2 and (top["window"]["first_window"], top["window"]["last_window"]) == (0, 3)
    assert (top["window"]["start"], top["window"]["end"], top["sample_size"]) == (0, 200, 200)
    assert {c["epsilon"] for c in certificates} == {1.0}
    lifetime = top["lifetime"]
    assert lifetime["epsilon"] == 3.0 <= lifetime["epsilon_budget"] and top["composition"] == "tree"
    assert "parallel composition over the disjoint nodes of a level" in lifetime["rule"]
    assert [e["window_id"] for e in observed.ledger] == ids  # entries in the same, fixed order


async def test_a_node_releases_what_the_offline_learner_releases_on_its_examples_at_its_epsilon():
    xs = np.random.default_rng(2).integers(0, 1024, 100)
    run = TwinRun(tree_stream(levels=1, level_epsilon=[0.5, 2.0], epsilon_budget=2.5), rng_seed=9,
                  budget=LEGACY)
    await run.run([Step(T0, [example(int(x)) for x in xs])])
    node = [dp for m, dp in zip(run.observed.messages, run.observed.dp, strict=True)
            if m["release"]["certificate"]["level"] == 1]
    hclass = parse_class_spec("thresholds:1024")
    offline = make_learner("generic").fit(hclass, xs, (xs >= 600).astype(np.uint8), epsilon=2.0,
                                          rng=seeded(zlib.crc32(b"9/gen0-c50-L1-0/learner:generic")))
    assert node[0]["hypothesis"] == offline.hypothesis.to_dict()


async def test_time_windows_tree_twins_one_example_in_an_otherwise_empty_window():
    stream = tree_stream(levels=2, kind="time")
    steps = [Step(T0 + 60 * i + 5, [example(100 + i, at=T0 + 60 * i + 1)] if i != 1 else [])
             for i in range(9)]
    other = [Step(s.at, [*s.messages, *([example(650, at=T0 + 61)] if i == 1 else [])])
             for i, s in enumerate(steps)]
    a, b = await twins(stream, steps, other, budget=LEGACY)
    assert_twins(a, b)
    levels = [m["release"]["certificate"]["level"] for m in a.messages]
    assert levels == [0, 0, 1, 0, 0, 1, 2, 0, 0, 1, 0, 0, 1, 2]  # windows 0..7 closed by T0 + 485 s


# --- the parallel-composition audit ----------------------------------------------------------------

LEVEL_EPSILON = [1.5, 1.5]
AUDITED = StreamConfig(name="s", hypothesis_class="thresholds:4", release={
    "learner": "generic", "levels": 1, "level_epsilon": LEVEL_EPSILON, "epsilon_budget": sum(LEVEL_EPSILON),
    "expected_size": 2, "window": {"kind": "time", "seconds": 60.0}})
#: d1 has one example more than d0, in window 0; window 1 holds the same example in both.
BASE = [Step(T0 + 5, [example(1, at=T0 + 1, stream="s")]), Step(T0 + 65, [example(3, at=T0 + 61)])]
PAIR = ([*BASE, Step(T0 + 125)],
        [Step(T0 + 5, [example(1, at=T0 + 1), example(3, at=T0 + 2)]), BASE[1], Step(T0 + 125)])


def tree_path(agent_class):
    def build(rng):
        def run(steps):
            twin = TwinRun(AUDITED, rng_seed=rng.getrandbits(62), budget=LEGACY)
            twin.agent.__class__ = agent_class
            observed = asyncio.run(twin.run(steps))
            return json.dumps([[m["release"]["certificate"]["window"]["window_id"], dp["hypothesis"]]
                               for m, dp in zip(observed.messages, observed.dp, strict=True)], sort_keys=True)
        return run
    return build


def test_parallel_composition_audit_every_release_of_every_level():
    """Every release of both levels observed; the lower bound stays at or below the lifetime ε.

    Not done: the broken variant (an example counted in two windows of one level). Measured with
    1,500 runs per stream it gives a lower bound of 0.55 (estimate 2.0) against the certificate's
    3.0: the generic learner's exponential mechanism attains about half its ε on these pairs, so
    doubling an example's weight stays under the bound; catching it needs a tighter mechanism
    (noisy counts) in the audited path."""
    lifetime = sum(LEVEL_EPSILON)
    result = audit(tree_path(ReleaseAgent)(seeded(3)), PAIR, PrivacyGuarantee(lifetime, 0.0), samples=800,
                   confidence=0.999, name="release tree")
    print(f"lifetime epsilon lower bound {result.epsilon_lower_bound:.3f} (certificate {lifetime}), "
          f"estimate {result.epsilon_estimate:.3f}")
    assert result.passed and result.epsilon_lower_bound <= lifetime


async def test_a_node_left_unreleased_by_a_crash_is_released_after_restart_once():
    """The worker died after window 1 closed and before node L1-0 was released."""
    from privstream.agents.releases import ReleaseAgent
    from privstream.agents.windows import count_window_id
    from tests.agents.test_releases import Published, RecordingMetrics, examples, feed, make_agent, policy

    class DiesBeforeNodes(ReleaseAgent):
        def _schedule_window(self, policy, state, index):
            self._schedule(state, count_window_id(self.store.generation, index, policy.window_size),
                           self._release_node(policy, 0, index))

    first = make_agent({"s": policy(levels=1)}, publish=Published())
    first.__class__ = DiesBeforeNodes
    await feed(first, examples(200))
    assert [c.level for c in first.ledger.entries("s")] == [0, 0]
    publish = Published()
    restarted = make_agent({"s": policy(levels=1)}, ledger=first.ledger, store=first.store, publish=publish,
                           metrics=RecordingMetrics())
    restarted.on_partitions_assigned({0})
    await restarted.drain()
    assert [c.level for c in restarted.ledger.entries("s")] == [0, 0, 1]
    assert [r.certificate.level for r in publish.releases()] == [1]
    restarted.on_partitions_assigned({0})  # again: nothing twice
    await restarted.drain()
    assert len(restarted.ledger.entries("s")) == 3 and len(publish.messages) == 1


async def test_nodes_are_stored_compactly_and_dropped_once_their_parent_is_built_and_they_are_released():
    """Issue 17.2: a window's rows become node (0, w) when it closes; a node is merged from its
    children, which go once it is built; a top node goes once released. Nothing else is kept."""
    from privstream.agents.interfaces import NodeBounds, NodeData
    from privstream.agents.windows import count_family
    from tests.agents.test_releases import examples, feed, make_agent, policy

    agent = make_agent({"s": policy(levels=2)}, budget=LEGACY)
    family = count_family(agent.store.generation, 100)
    batch = examples(400)
    await feed(agent, batch[:300])
    # L0-0 and L0-1 were released and L1-0 built from them: gone; L1-0 waits for L2-0, L0-2 for L1-1
    assert agent.store.nodes("s", family) == [(0, 2), (1, 0)]
    xs = np.array([e.x for e, _, _ in batch])
    ys = (xs >= 600).astype(np.uint8)
    node = NodeData.from_rows(xs[:200], ys[:200], None, NodeBounds())
    assert agent.store.load_node("s", family, 1, 0) == node
    assert len(agent.store.load_node("s", family, 1, 0).xs) <= 2 * len(np.unique(xs[:200]))  # a histogram
    assert len(agent.store.count_window("s", 0, 300).xs) == 0  # the raw rows went when the windows closed
    await feed(agent, batch[300:])
    assert agent.store.nodes("s", family) == []  # the top node was released: nothing is kept
    assert [c.level for c in agent.ledger.entries("s")] == [0, 0, 1, 0, 0, 1, 2]


async def test_a_window_closed_into_its_node_before_a_crash_is_released_from_the_node_after_restart():
    """The worker died after the window's rows became node (0, 0) and before its release."""
    from privstream.agents.interfaces import NodeBounds
    from privstream.agents.windows import count_family
    from tests.agents.test_releases import Published, examples, make_agent, policy

    crashed = make_agent({"s": policy()}, publish=Published())
    batch = examples(100)
    for example_, partition, offset in batch:
        crashed.store.append("s", partition, offset, example_.x, example_.y, None, None)
    family = count_family(crashed.store.generation, 100)
    crashed.store.close_window("s", family, 0, NodeBounds(), seqs=(0, 100))
    assert len(crashed.store.count_window("s", 0, 100).xs) == 0
    crashed.on_partitions_assigned({0})
    await crashed.drain()
    [released] = crashed._publish.releases()
    xs = np.array([e.x for e, _, _ in batch])
    seed = zlib.crc32(f"{family}-L0-0/learner:generic".encode())
    ys = (xs >= 600).astype(np.uint8)
    offline = make_learner("generic").fit(parse_class_spec("thresholds:1024"), xs, ys, epsilon=1.0,
                                          rng=seeded(seed))
    assert released.hypothesis == offline.hypothesis.to_dict() and released.certificate.sample_size == 100
    assert crashed.store.nodes("s", family) == []
