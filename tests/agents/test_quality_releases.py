"""The private quality estimate of each hypothesis release in the service: its accounting (the
lifetime bound, the configuration the ledger keeps) and its path (scored on the next window,
charged there, published with that window's release)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from privstream_client.release import Release, ReleaseSelector
from pydantic import ValidationError

from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.stream_app.release_policies import lifetime_bound
from privstream.stream_app.settings import ReleaseConfig, StreamConfig
from privstream.stream_app.store.privacy_config import differences, only_lowers, privacy_configuration
from tests.agents.twins import T0, Step, TwinRun, assert_twins, example, twins


def release(**overrides: object) -> ReleaseConfig:
    return ReleaseConfig(**{"epsilon": 0.5, "epsilon_budget": 2.0, "top_level": 1, **overrides})


def test_each_level_can_score_a_window_once_so_the_lifetime_cost_counts_top_level_plus_one():
    config = release(quality_epsilon=0.2)
    assert config.quality_epsilons == [0.2, 0.2]
    assert config.lifetime_cost == pytest.approx((0.5 + 0.5 + 0.2 + 0.2, 0.0))
    assert release().lifetime_cost == pytest.approx((1.0, 0.0))  # off by default: nothing added


def test_the_default_learner_share_leaves_room_for_the_estimates():
    config = ReleaseConfig(epsilon_budget=1.2, top_level=1, quality_epsilon=0.1)
    assert config.learner_epsilons == pytest.approx([0.5, 0.5])
    assert config.lifetime_cost[0] == pytest.approx(1.2)


def test_estimates_past_the_budget_are_refused_naming_them():
    with pytest.raises(ValidationError, match=r"quality estimates \[0.6, 0.6\].*epsilon_budget 2"):
        release(quality_epsilon=0.6)


def test_the_user_level_is_refused_in_one_line():
    with pytest.raises(ValidationError, match="quality_epsilon applies only to privacy_unit 'example'"):
        ReleaseConfig(
            epsilon=0.5,
            epsilon_budget=2.0,
            privacy_unit="user",
            user_contribution_bound=2,
            expected_size=10,
            window={"kind": "time", "seconds": 60},
            quality_epsilon=0.1,
        )


def test_the_certificate_lifetime_bound_states_the_estimates():
    bound = lifetime_bound(release(quality_epsilon=0.2))
    assert bound.epsilon == pytest.approx(1.4) and bound.quality_epsilon == 0.2
    assert "2 x 0.2" in bound.rule and "next window" in bound.rule
    assert lifetime_bound(release()).quality_epsilon is None


def test_the_ledger_keeps_the_estimates_epsilon_and_lets_it_be_lowered_only():
    stream = StreamConfig(name="s", hypothesis_class="thresholds:64", release=release(quality_epsilon=0.2))
    config = privacy_configuration(stream)
    assert config["quality_epsilon"] == 0.2
    plain = privacy_configuration(StreamConfig(name="s", hypothesis_class="thresholds:64", release=release()))
    assert "quality_epsilon" not in plain  # a ledger kept before the option compares equal
    assert only_lowers(config, {**config, "quality_epsilon": 0.1})
    assert not only_lowers(config, {**config, "quality_epsilon": 0.3})
    assert differences(plain, config) == {"quality_epsilon": (None, 0.2)}
    assert not only_lowers(plain, config)  # turning estimates on needs an acceptance


# --- the service path ----------------------------------------------------------------------------

SIZE = 10


def count_stream(quality_epsilon: float | None = 20.0, top_level: int = 1) -> StreamConfig:
    release = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "top_level": top_level,
        "quality_epsilon": quality_epsilon,
        "window": {"kind": "count", "size": SIZE},
    }
    return StreamConfig(name="s", hypothesis_class="thresholds:1024", release=release)


def windows_of(points: list[list[int]]) -> list[Step]:
    return [Step(T0 + 5 + 60 * i, [example(x) for x in xs]) for i, xs in enumerate(points)] + [
        Step(T0 + 60 * len(points) + 5)
    ]


# windows 0..3; window 2's points near the threshold 600, where a release learnt elsewhere errs
POINTS = [
    [50 * i for i in range(SIZE)],
    [100 + 90 * i for i in range(SIZE)],
    [560 + 9 * i for i in range(SIZE)],
    [20 + 100 * i for i in range(SIZE)],
]


async def test_each_release_is_scored_on_the_next_window_charged_there_and_carried_by_its_release():
    run = TwinRun(count_stream())
    observed = await run.run(windows_of(POINTS))
    hypotheses = [
        (m, dp) for m, dp in zip(observed.messages, observed.dp, strict=True) if m["topic"] == "hypotheses"
    ]
    by_id = {m["release"]["certificate"]["ledger_entry_id"]: dp["hypothesis"] for m, dp in hypotheses}
    windows = [m["release"]["certificate"]["window"]["window_id"] for m, _ in hypotheses]
    assert windows == [
        "gen0-c10-L0-0",
        "gen0-c10-L0-1",
        "gen0-c10-L1-0",
        "gen0-c10-L0-2",
        "gen0-c10-L0-3",
        "gen0-c10-L1-1",
    ]
    carried = {
        m["release"]["certificate"]["window"]["window_id"]: list(
            zip(m["release"].get("evaluations", []), dp["evaluations"], strict=True)
        )
        for m, dp in hypotheses
    }
    scored = {w: [e["release"].split("/")[1] for e, _ in carried[w]] for w in carried}
    assert scored == {
        "gen0-c10-L0-0": [],  # nothing ended before the stream's first window
        "gen0-c10-L0-1": ["gen0-c10-L0-0"],
        "gen0-c10-L1-0": [],  # only level-0 releases carry estimates
        "gen0-c10-L0-2": ["gen0-c10-L0-1", "gen0-c10-L1-0"],  # window 1 ends both nodes
        "gen0-c10-L0-3": ["gen0-c10-L0-2"],
        "gen0-c10-L1-1": [],
    }
    for index, window in enumerate(["gen0-c10-L0-1", "gen0-c10-L0-2", "gen0-c10-L0-3"], start=1):
        labels = [int(x >= 600) for x in POINTS[index]]
        for evaluation, estimate in carried[window]:
            h = hypothesis_from_dict(by_id[evaluation["release"]])
            mistakes = sum(int(h.predict(x)) != y for x, y in zip(POINTS[index], labels, strict=True))
            # ε = 20: the discrete Laplace noise is 0 but with probability about 4e-9
            assert estimate["noisy_errors"] == mistakes
            assert (
                estimate["error"] == mistakes / SIZE
                and estimate["low"] <= estimate["error"] <= estimate["high"]
            )
            assert evaluation["size"] == SIZE and evaluation["neighbouring_relation"] == "replace-one"
            assert evaluation["window_id"] == window and evaluation["epsilon"] == 20.0
    quality = [e for e in observed.ledger if e["mechanism"].startswith("quality:")]
    assert [(e["window_id"], e["mechanism"], e["epsilon"], e["published"]) for e in quality] == [
        ("gen0-c10-L0-1", "quality:generic:L0", 20.0, True),
        ("gen0-c10-L0-2", "quality:generic:L0", 20.0, True),
        ("gen0-c10-L0-2", "quality:generic:L1", 20.0, True),
        ("gen0-c10-L0-3", "quality:generic:L0", 20.0, True),
    ]
    budget = observed.pages["budget"]
    # window 2's examples: level 0 and 1 (1 each) and two estimates (20 each); the bound, (1 + 1) + 2 x 20
    assert budget["lifetime_epsilon_spent"] == pytest.approx(42.0)
    assert budget["lifetime_epsilon_committed"] == pytest.approx(42.0) and budget["quality_epsilon"] == 20.0
    assert all(len(r) for r in observed.pages["releases/s"])  # the estimates' entries list no release


async def test_without_quality_epsilon_nothing_is_scored_or_charged():
    observed = await TwinRun(count_stream(quality_epsilon=None)).run(windows_of(POINTS))
    assert all("evaluations" not in m["release"] for m in observed.messages)  # the bytes as before
    assert not [e for e in observed.ledger if e["mechanism"].startswith("quality:")]


def time_stream() -> StreamConfig:
    release = {
        "learner": "generic",
        "epsilon": 1.0,
        "epsilon_budget": 100.0,
        "expected_size": 20,
        "quality_epsilon": 0.5,
        "window": {"kind": "time", "seconds": 60.0, "allowed_lateness_seconds": 10.0},
    }
    return StreamConfig(name="s", hypothesis_class="thresholds:1024", release=release)


def minutes(extra: list[dict] | None = None) -> list[Step]:
    base = {0: [example(100 + i, at=T0 + 5 + i) for i in range(5)], 2: [example(700, at=T0 + 125)]}
    steps = []
    for i in range(5):
        messages = base.get(i, []) + (extra if i == 1 and extra else [])
        steps.append(Step(T0 + 60 * i + 5, messages))
    return steps


async def test_twins_differing_in_one_scored_example_agree_but_for_the_estimates():
    """Window 1 scores window 0's release; one twin has a mistaken example more there (n private)."""
    a, b = await twins(time_stream(), minutes(), minutes([example(650, at=T0 + 65, y=0)]))
    assert_twins(a, b)
    carried = [m["release"].get("evaluations", []) for m in a.messages]
    assert [len(e) for e in carried] == [0, 1, 1]
    assert carried[1][0]["neighbouring_relation"] == "add-remove-one" and carried[1][0]["size"] is None
    assert a.dp[1]["evaluations"][0]["noisy_size"] is not None  # the size is released noisily


# --- the subscriber's level="most-accurate" ----------------------------------------------------------


def evaluated(body: bytes, scores: list[tuple[str, int, float]]) -> bytes:
    """A release's bytes carrying estimates ``(scored release id, its level, error)``."""
    data = json.loads(body)
    data["evaluations"] = [
        {
            "release": scored,
            "level": level,
            "window_id": data["certificate"]["window"]["window_id"],
            "ledger_entry_id": f"q/{scored}",
            "epsilon": 0.5,
            "neighbouring_relation": "replace-one",
            "confidence": 0.95,
            "size": 4,
            "estimate": {"error": error, "low": 0.0, "high": 1.0, "noisy_errors": 0, "noisy_size": None},
            "rule": "...",
        }
        for scored, level, error in scores
    ]
    return json.dumps(data).encode()


def test_most_accurate_takes_the_level_of_lowest_estimated_error_and_follows_it():
    from tests.stream_app.test_sdk_levels import release_json

    # (entry, level, index) as published on a 2-level stream; window w's release scores w - 1's
    # and, where w is even, node (1, w/2 - 1)
    w0, w1, n10 = release_json(1, 0, 0), release_json(2, 0, 1), release_json(3, 1, 0)
    w2 = evaluated(release_json(4, 0, 2), [("2", 0, 0.30), ("3", 1, 0.10)])
    w3 = evaluated(release_json(5, 0, 3), [("4", 0, 0.20)])
    n11 = release_json(6, 1, 1)
    w4 = evaluated(release_json(7, 0, 4), [("5", 0, 0.05), ("6", 1, 0.25)])
    selector = ReleaseSelector("most-accurate")
    got = [selector.choose(Release.from_json(b), b) for b in [w0, w1, n10, w2, w2, w3, n11, w4]]
    ids = [None if r is None else r.ledger_entry_id for r in got]
    # before any estimate: as "best"; then node (1, 0) (0.10 < 0.30); still it after window 3's
    # release (0.10 < 0.20); then window 3's release (0.05 < 0.25, level 1's newest is now worse)
    assert ids == ["1", "2", "3", None, None, None, None, "5"]
    assert Release.from_json(w4).evaluations[0].error == 0.05
    assert ReleaseSelector("best").choose(Release.from_json(w4), w4) is not None  # others unchanged


def test_most_accurate_on_the_service_s_own_releases_yields_the_scored_one_of_lowest_error():
    """The agent's releases of a 2-level count stream, read back by the client as published."""
    run = TwinRun(count_stream(quality_epsilon=1.0))
    published: list[bytes] = []
    inner = run._publish

    async def publish(topic: str, stream_id: str, release: bytes, **kwargs: Any) -> None:
        published.append(release)
        await inner(topic, stream_id, release, **kwargs)

    run.agent.publisher.publish = publish
    asyncio.run(run.run(windows_of(POINTS)))
    selector = ReleaseSelector("most-accurate")
    standing: dict[int, tuple[str, float]] = {}
    for body in published:
        release = Release.from_json(body)
        for e in release.evaluations:
            standing[e.level] = (e.release, e.error)  # the newest scored release per level
        chosen = selector.choose(release, body)
        if standing and chosen is not None:
            best = min(standing.items(), key=lambda item: (item[1][1], -item[0]))[1][0]
            assert chosen.ledger_entry_id == best
    assert standing and len(standing) == 2  # both levels were scored
