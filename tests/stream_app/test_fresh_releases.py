"""Fresh releases only: a subscriber yields a release only if it is its deployment's and newer than
the release it holds of that level, also across its restarts (``--state-file``).

Before: the signature covered the ledger id and the node, but nothing checked them: ``subscribe
--latest --level best`` yielded a verbatim replay of window 0 published after window 1, and with a
key shared by two deployments, B's release was yielded by A's subscriber, whose "best" then refused
A's own next release (a freeze).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import privstream_client.subscription as subscription_module
import pytest
from privstream_client.freshness import Freshness, StateFile

from privstream import __version__
from privstream.learning.hypothesis_classes import threshold_hypothesis
from privstream.schemas import Certificate, HypothesisRelease, LifetimeBound, Publication, WindowInfo
from privstream.stream_app import sdk
from privstream.stream_app.cli import main
from privstream.stream_app.sdk import Release, ReleaseSelector
from privstream.stream_app.signing import KeySet, Signer

A, B = "a0a0a0a0a0a0a0a0", "b1b1b1b1b1b1b1b1"  # two deployments' ledger ids
SHARED = Signer.generate()  # the key both deployments sign with (staging mounting production's)
T0 = 1_800_000_000.0


def release(
    window: int, *, level: int = 0, ledger: str = A, family: str = "ab12-c4", at: float = 0.0
) -> bytes:
    """Node (level, window >> level) of a count stream as the worker publishes it: ledger id,
    node range and publication time all in the signed bytes."""
    index = window >> level
    first, last = index << level, ((index + 1) << level) - 1
    lifetime = LifetimeBound(
        epsilon=1.0,
        delta=0.0,
        epsilon_budget=1.0,
        delta_budget=0.0,
        top_level=2,
        level_epsilon=[1 / 3] * 3,
        rule="parallel ...",
    )
    certificate = Certificate(
        mechanism="exponential-mechanism",
        epsilon=1 / 3,
        delta=0.0,
        neighbouring_relation="replace-one",
        privacy="information-theoretic",
        proper=True,
        accuracy_guarantee_holds=False,
        randomness="seeded",
        library_version=__version__,
        ledger_entry_id=f"s/{family}-L{level}-{index}/learner:generic",
        ledger_id=ledger,
        ledger_epoch=1,
        sample_size=4 << level,
        window=WindowInfo(
            window_id=f"{family}-L{level}-{index}",
            kind="count",
            start=4 * first,
            end=4 * (last + 1),
            first_window=first,
            last_window=last,
        ),
        level=level,
        composition="tree",
        lifetime=lifetime,
        publication=Publication(
            scheduled_at=datetime.fromtimestamp(T0 + (at or 10 * (last + 1) + level), UTC),
            publish_delay_seconds=1.0,
            rule="...",
        ),
    )
    body = HypothesisRelease(
        stream_id="s",
        hypothesis_class="thresholds:64",
        hypothesis=threshold_hypothesis(64, 10 + window + 7 * level).to_dict(),
        certificate=certificate,
    )
    return body.model_dump_json().encode()


class Topic:
    """The hypotheses topic's one partition: ``past`` is on it when a subscriber starts, ``later``
    is published once the subscriber has started reading."""

    past: ClassVar[list[bytes]] = []
    later: ClassVar[list[bytes]] = []
    records: ClassVar[list[SimpleNamespace]] = []

    @classmethod
    def publish(cls, value: bytes, signer: Signer = SHARED) -> None:
        cls.records.append(
            SimpleNamespace(
                key=b"s",
                value=value,
                headers=signer.headers(value),
                timestamp=0,
                topic="hypotheses",
                partition=0,
                offset=len(cls.records),
            )
        )


class FakeConsumer:
    """aiokafka's consumer over :class:`Topic`, honouring ``auto_offset_reset`` and ``seek``."""

    def __init__(self, *args: Any, auto_offset_reset: str = "latest", **kwargs: Any) -> None:
        self.reset, self.at, self.tp = auto_offset_reset, 0, None

    async def topics(self) -> set[str]:
        return {"hypotheses"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def assign(self, partitions: list[Any]) -> None:
        self.tp = partitions[0]
        self.at = 0 if self.reset == "earliest" else len(Topic.records)

    def assignment(self) -> set[Any]:
        return {self.tp} if self.tp is not None else set()

    def seek(self, tp: Any, offset: int) -> None:
        self.at = offset

    async def beginning_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return dict.fromkeys(partitions, 0)

    async def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return dict.fromkeys(partitions, len(Topic.records))

    async def position(self, tp: Any) -> int:
        return self.at

    async def getmany(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, list]:
        while Topic.later:  # published after the subscriber started
            Topic.publish(Topic.later.pop(0))
        batch = Topic.records[self.at : self.at + 5]
        self.at += len(batch)
        if not batch:
            await asyncio.sleep(0.01)
        return {self.tp: batch} if batch else {}

    async def stop(self) -> None:
        return None


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[Topic]:
    async def start_client(consumer: Any, settings: Any) -> None:
        return None

    monkeypatch.setattr(subscription_module, "AIOKafkaConsumer", FakeConsumer)
    monkeypatch.setattr(sdk, "start_client", start_client)
    monkeypatch.setenv("PRIVSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.delenv("PRIVSTREAM_LEDGER_ID", raising=False)
    keys = tmp_path / "keys.json"
    keys.write_text(KeySet([SHARED.public_entry()]).to_json())
    monkeypatch.setenv("PRIVSTREAM_TRUSTED_KEYS_FILE", str(keys))
    Topic.records, Topic.later = [], []
    return Topic


def on_topic(*values: bytes) -> None:
    for value in values:
        Topic.publish(value)


def windows(out: str) -> list[tuple[int, int]]:
    """(level, last window) of each release ``subscribe --json`` printed."""
    got = [Release.from_json(line.encode()) for line in out.splitlines()]
    return [(r.level, r.last_window) for r in got]


def test_a_verbatim_replay_of_an_older_window_is_not_yielded_by_latest_best(topic, capsys) -> None:
    on_topic(release(0), release(1))
    # window 0 again, byte for byte (a re-publication: dropped, not counted), window 0 with other
    # bytes (a restored backup's: stale), then window 2
    Topic.later = [Topic.records[0].value, release(0, at=5), release(2)]
    assert main(["subscribe", "s", "--latest", "--level", "best", "--until-caught-up", "--json"]) == 0
    out = capsys.readouterr()
    assert windows(out.out) == [(0, 2)]
    assert "caught up: 1 releases; 1 records skipped (1 stale)" in out.err


def test_a_replay_re_signed_and_a_late_node_are_stale_for_every_level_choice(topic) -> None:
    on_topic(release(0), release(1), release(1, level=1), release(0, at=5), release(1, level=1, at=99))

    async def run(level: Any) -> tuple[list[Release], sdk.Subscription]:
        subscription = sdk.subscribe("s", level=level, until_caught_up=True)
        return [r async for r in subscription], subscription

    for level, yielded in (("all", 3), (0, 2), (1, 1), ("best", 3)):
        got, subscription = asyncio.run(run(level))
        # the restored-backup case too: node (1, 1) again with other bytes and a later time
        assert len(got) == yielded and subscription.skipped == {"stale": 2}, level


def test_another_deployments_release_under_a_shared_key_is_refused_and_does_not_freeze(topic, capsys) -> None:
    on_topic(release(0), release(1), release(7, level=2, ledger=B), release(2))
    assert main(["subscribe", "s", "--until-caught-up", "--json"]) == 0
    out = capsys.readouterr()
    assert windows(out.out) == [(0, 0), (0, 1), (0, 2)]  # A's next release after B's: still taken
    assert "(1 foreign_deployment)" in out.err
    # pinned, the deployment is A's even when B's release comes first
    Topic.records = []
    on_topic(release(5, ledger=B), release(0), release(1))
    assert main(["subscribe", "s", "--until-caught-up", "--json", "--ledger-id", A]) == 0
    assert windows(capsys.readouterr().out) == [(0, 0), (0, 1)]


def test_the_state_file_keeps_what_is_held_across_restarts(topic, tmp_path, capsys, caplog) -> None:
    state = tmp_path / "sub" / "state.json"
    on_topic(release(0), release(1))
    assert main(["subscribe", "s", "--until-caught-up", "--json", "--state-file", str(state)]) == 0
    assert windows(capsys.readouterr().out) == [(0, 0), (0, 1)]
    kept = json.loads(state.read_text())["subscriptions"]["hypotheses/s"]
    assert kept["ledger_id"] == A and kept["held"]["0"]["last_window"] == 1 and kept["positions"] == {"0": 2}
    # restarted: it goes on where it left off (nothing read twice, nothing counted)
    Topic.later = [release(2)]
    assert main(["subscribe", "s", "--until-caught-up", "--json", "--state-file", str(state)]) == 0
    out = capsys.readouterr()
    assert windows(out.out) == [(0, 2)] and "caught up: 1 releases; 0 records skipped" in out.err
    # the topic re-created with a replay of window 1 on it: the state file knows window 2 is held
    Topic.records = []
    on_topic(release(1), release(3, ledger=B))
    Topic.later = [release(3)]
    assert main(["subscribe", "s", "--until-caught-up", "--json", "--state-file", str(state)]) == 0
    out = capsys.readouterr()
    assert windows(out.out) == [(0, 3)]
    assert "(1 foreign_deployment, 1 stale)" in out.err and "re-created" in caplog.text


def test_a_bad_state_file_is_one_line_and_exit_2(topic, tmp_path, capsys) -> None:
    state = tmp_path / "state.json"
    state.write_text("{not json")
    assert main(["subscribe", "s", "--until-caught-up", "--state-file", str(state)]) == 2
    assert "cannot read the subscriber state file" in capsys.readouterr().err
    on_topic(release(0))
    state.unlink()
    assert main(["subscribe", "s", "--until-caught-up", "--state-file", str(state)]) == 0
    assert main(["subscribe", "s", "--until-caught-up", "--state-file", str(state), "--ledger-id", B]) == 2
    err = capsys.readouterr().err
    assert f"holds releases of ledger {A}, not of the pinned ledger {B}" in err and "Traceback" not in err


def test_a_new_window_family_is_ordered_by_its_signed_publication_time() -> None:
    """A state store made anew counts its windows from 0 again, in a new family: its first window
    is newer (published later), a replay of the old family's older window is not."""
    selector = ReleaseSelector("all")
    old = [Release.from_json(release(w)) for w in (4, 5)]
    assert [selector.judge(r) for r in old] == [None, None]
    assert selector.judge(Release.from_json(release(0, family="cd34-c4", at=500))) is None
    assert selector.judge(Release.from_json(release(1, family="ab12-c4", at=40))) == "stale"
    assert selector.judge(Release.from_json(release(1, family="cd34-c4", at=510))) is None
    assert selector.judge(old[0]) == "duplicate"  # the same bytes: a re-publication
    assert selector.judge(Release.from_json(release(6))) == "stale"  # the old family, published before


def test_state_file_writes_are_atomic(tmp_path, monkeypatch) -> None:
    state = StateFile(tmp_path / "state.json", "hypotheses", "s")
    fresh = Freshness(A)
    fresh.judge(Release.from_json(release(3)))
    state.save(fresh, {0: 4})
    before = state.path.read_bytes()

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", crash)
    fresh.judge(Release.from_json(release(4)))
    with pytest.raises(OSError, match="disk full"):
        state.save(fresh, {0: 5})
    assert state.path.read_bytes() == before and list(tmp_path.iterdir()) == [state.path]
    restored = Freshness()
    assert state.load(restored) == {0: 4} and restored.held[0].last_window == 3 and restored.ledger_id == A


def keys_served(monkeypatch: pytest.MonkeyPatch, document: dict[str, Any]) -> None:
    """``/keys`` serving ``document`` (and no pinned keys: the subscriber fetches them)."""
    import contextlib
    import io

    monkeypatch.delenv("PRIVSTREAM_TRUSTED_KEYS_FILE")
    body = json.dumps(document).encode()
    served = lambda url, timeout=10.0: contextlib.closing(io.BytesIO(body))  # noqa: E731
    monkeypatch.setattr(subscription_module.urllib.request, "urlopen", served)


def test_a_subscriber_without_a_ledger_id_takes_the_deployment_from_keys_not_the_first_release(
    topic, monkeypatch, capsys
) -> None:
    from privstream_client.signing import DeploymentStatement

    # the first release on the topic is B's (signed by the shared key): before, it was trusted
    # on first use, and A's own releases were then refused as foreign
    on_topic(release(5, ledger=B), release(0), release(1))
    document = {
        **KeySet([SHARED.public_entry()]).to_dict(),
        "deployment": DeploymentStatement.sign(SHARED, A).to_dict(),
    }
    keys_served(monkeypatch, document)
    assert main(["subscribe", "s", "--until-caught-up", "--json"]) == 0
    out = capsys.readouterr()
    assert windows(out.out) == [(0, 0), (0, 1)]
    assert "(1 foreign_deployment)" in out.err


def test_a_deployment_statement_no_trusted_key_signed_decides_nothing(topic, monkeypatch) -> None:
    from privstream_client.signing import DeploymentStatement

    forged = DeploymentStatement.sign(Signer.generate(), B).to_dict()  # another key: not trusted
    document = {**KeySet([SHARED.public_entry()]).to_dict(), "deployment": forged}
    keys_served(monkeypatch, document)
    on_topic(release(0), release(1))

    async def run() -> sdk.Subscription:
        subscription = sdk.subscribe("s", until_caught_up=True)
        assert len([r async for r in subscription]) == 2
        return subscription

    subscription = asyncio.run(run())
    assert subscription.skipped == {} and subscription.stats()["ledger_id"] == A  # from the first release
