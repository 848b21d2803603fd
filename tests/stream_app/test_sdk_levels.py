"""The SDK's choice of releases by level: ``subscribe(level="best" | j | "all")``.

The releases are built with the schemas as the release agent fills them: the
certificate carries the node's ``level``, its window range (``window.first_window``/``last_window``)
and the ``lifetime`` bound; they are published in the release agent's order (after window w closes,
every node it completes, level 0 first).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, ClassVar

import privstream_client.subscription as subscription_module
import pytest

from privstream import __version__
from privstream.learning.hypothesis_classes import threshold_hypothesis
from privstream.schemas import Certificate, HypothesisRelease, LifetimeBound, WindowInfo
from privstream.stream_app import sdk
from privstream.stream_app.cli import main
from privstream.stream_app.cli.subscribe import describe_release
from privstream.stream_app.sdk import Release, ReleaseSelector
from privstream.stream_app.signing import KeySet, Signer

LEVELS = 2
WINDOWS = 8


def release_json(entry: int, level: int | None, index: int, *, stream: str = "s") -> bytes:
    """A release of node (level, index) of a 4-example-window count stream (no level: a pre-tree one)."""
    lvl = 0 if level is None else level
    first, last = index << lvl, ((index + 1) << lvl) - 1
    node = {} if level is None else {"first_window": first, "last_window": last}
    window = WindowInfo(
        window_id=f"ab12-c4-L{lvl}-{index}", kind="count", start=4 * first, end=4 * (last + 1), **node
    )
    tree: dict[str, Any] = (
        {}
        if level is None
        else {
            "level": level,
            "composition": "tree",
            "lifetime": LifetimeBound(
                epsilon=1.0,
                delta=0.0,
                epsilon_budget=1.0,
                delta_budget=0.0,
                top_level=LEVELS,
                level_epsilon=[1 / (LEVELS + 1)] * (LEVELS + 1),
                rule="parallel ...",
            ),
        }
    )
    certificate = Certificate(
        mechanism="exponential-mechanism",
        epsilon=1 / (LEVELS + 1),
        delta=0.0,
        neighbouring_relation="replace-one",
        privacy="information-theoretic",
        proper=True,
        accuracy_guarantee_holds=False,
        randomness="seeded",
        library_version=__version__,
        ledger_entry_id=str(entry),
        sample_size=4 << lvl,
        window=window,
        **tree,
    )
    return (
        HypothesisRelease(
            stream_id=stream,
            hypothesis_class="thresholds:64",
            hypothesis=threshold_hypothesis(64, 10 + entry).to_dict(),
            certificate=certificate,
        )
        .model_dump_json()
        .encode()
    )


def published_tree() -> list[tuple[int, int, int]]:
    """(entry, level, index) of every release of a tree of LEVELS levels over WINDOWS windows, in
    publication order."""
    order, entry = [], 0
    for w in range(WINDOWS):
        for j in range(LEVELS + 1):
            if (w + 1) % (1 << j) == 0:
                entry += 1
                order.append((entry, j, (w + 1 >> j) - 1))
    return order


def best_after(closed: int) -> tuple[int, int]:
    """The newest node of the highest completed level once ``closed`` windows are closed."""
    j = min(LEVELS, closed.bit_length() - 1)
    return j, (closed >> j) - 1


def select(level: Any, releases: list[bytes]) -> list[Release]:
    selector = ReleaseSelector(level)
    return [r for r in map(Release.from_json, releases) if selector.accept(r)]


def test_a_release_reads_its_level_and_window_range_from_the_certificate() -> None:
    release = Release.from_json(release_json(7, 2, 1))
    assert (release.level, release.last_window) == (2, 7)
    assert release.certificate.window.first_window == 4
    assert "level=2" in repr(release)
    old = Release.from_json(release_json(8, None, 3))  # published before the release tree
    assert (old.level, old.last_window) == (0, None)


def test_best_yields_each_moment_the_newest_release_of_the_highest_completed_level() -> None:
    got = [(r.level, r.last_window) for r in select("best", [release_json(*r) for r in published_tree()])]
    # (level, last window): window 1 closes -> (0, 0); window 2 -> (0, 1) then (1, 1) (published in
    # that order); windows 3 and 4 -> (1, 3) then (2, 3); from then on level 2 only: (2, 7)
    assert got == [(0, 0), (0, 1), (1, 1), (1, 3), (2, 3), (2, 7)]
    for closed in range(1, WINDOWS + 1):  # after each window, the last one yielded is the best then
        j, m = best_after(closed)
        published = {(lvl, ((i + 1) << lvl) - 1) for _, lvl, i in published_tree()[: entries_after(closed)]}
        assert [g for g in got if g in published][-1] == (j, ((m + 1) << j) - 1)


def entries_after(closed: int) -> int:
    """How many releases are published once ``closed`` windows are closed."""
    return sum(1 for w in range(closed) for j in range(LEVELS + 1) if (w + 1) % (1 << j) == 0)


def test_a_fixed_level_yields_every_release_of_that_level_and_nothing_else() -> None:
    tree = published_tree()
    for level in range(LEVELS + 1):
        got = select(level, [release_json(*r) for r in tree])
        assert [(r.level, r.last_window) for r in got] == [
            (level, ((m + 1) << level) - 1) for m in range(WINDOWS >> level)
        ]
    assert len(select("all", [release_json(*r) for r in tree])) == len(tree)


def test_republished_and_late_releases_are_not_yielded_again() -> None:
    first, second, top = release_json(1, 1, 0), release_json(2, 1, 1), release_json(3, 0, 5)
    got = select("best", [first, second, first, top, release_json(4, 1, 0)])  # an older level-1 node, late
    assert [r.ledger_entry_id for r in got] == ["1", "2"]
    assert [r.ledger_entry_id for r in select(1, [first, first, second])] == ["1", "2"]


def test_releases_without_levels_are_all_yielded_as_level_0() -> None:
    old = [release_json(i, None, i) for i in range(1, 4)]
    assert [r.ledger_entry_id for r in select("best", old)] == ["1", "2", "3"]
    assert [r.ledger_entry_id for r in select(0, old)] == ["1", "2", "3"]
    assert select(1, old) == []


@pytest.mark.parametrize("bad", [-1, "top", True, 1.5])
def test_an_invalid_level_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="level must be"):
        ReleaseSelector(bad)


SIGNER = Signer.generate()


def record(key: bytes, value: bytes, offset: int, *, signer: Signer | None = SIGNER) -> SimpleNamespace:
    """A record of the hypotheses topic as aiokafka gives it, signed as the worker signs."""
    headers = signer.headers(value) if signer is not None else []
    return SimpleNamespace(
        key=key, value=value, headers=headers, timestamp=0, topic="hypotheses", offset=offset
    )


class FakeConsumer:
    """Stands in for aiokafka's consumer: the records of one partition of the hypotheses topic."""

    records: ClassVar[list[SimpleNamespace]] = []
    topic_names: ClassVar[set[str]] = {"hypotheses"}
    created: ClassVar[list[FakeConsumer]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stopped = False
        self.read = 0
        self.assigned: list[Any] = []
        FakeConsumer.created.append(self)

    async def topics(self) -> set[str]:
        return set(self.topic_names)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def assignment(self) -> set[Any]:
        return set(self.assigned)

    async def getmany(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, list]:
        batch = self.records[self.read : self.read + 5]
        self.read += len(batch)
        if not batch:
            await asyncio.sleep(0.01)
        return {self.assigned[0]: batch} if batch else {}

    async def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return {tp: len(self.records) for tp in partitions}

    async def position(self, partition: Any) -> int:
        return self.read

    async def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch, tmp_path) -> list[SimpleNamespace]:
    async def start_client(consumer: Any, settings: Any) -> None:
        return None

    monkeypatch.setattr(subscription_module, "AIOKafkaConsumer", FakeConsumer)
    monkeypatch.setattr(sdk, "start_client", start_client)
    monkeypatch.setenv("PRIVSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    keys = tmp_path / "keys.json"
    keys.write_text(KeySet([SIGNER.public_entry()]).to_json())
    monkeypatch.setenv("PRIVSTREAM_TRUSTED_KEYS_FILE", str(keys))
    values = [(b"s", release_json(*r)) for r in published_tree()]
    values.insert(3, (b"other", release_json(99, 2, 0, stream="other")))
    FakeConsumer.records = [record(k, v, i) for i, (k, v) in enumerate(values)]
    FakeConsumer.topic_names = {"hypotheses"}
    return FakeConsumer.records


async def collect(level: Any = "best", **options: Any) -> tuple[list[Release], sdk.Subscription]:
    subscription = sdk.subscribe("s", bootstrap="127.0.0.1:1", level=level, until_caught_up=True, **options)
    return [r async for r in subscription], subscription


def test_subscribe_filters_the_topic_by_stream_and_level(topic: list[SimpleNamespace]) -> None:
    best, subscription = asyncio.run(collect("best"))
    got = [(r.level, r.last_window) for r in best]
    assert got[-1] == (LEVELS, WINDOWS - 1) and (2, 3) in got and (0, 4) not in got
    assert subscription.caught_up and sum(subscription.skipped.values()) == 0
    assert [(r.level, r.last_window) for r in asyncio.run(collect(1))[0]] == [(1, 1), (1, 3), (1, 5), (1, 7)]
    assert len(asyncio.run(collect("all"))[0]) == len(published_tree())


def test_cli_subscribe_takes_a_level_and_prints_it(topic: list[SimpleNamespace], capsys) -> None:
    assert main(["subscribe", "s", "--level", "2", "--until-caught-up"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == WINDOWS >> 2
    assert all("(level 2)" in line and "lifetime ε 1 of 1 per example" in line for line in lines)
    assert f"caught up: {WINDOWS >> 2} releases; 0 records skipped" in out.err
    assert main(["subscribe", "s", "--until-caught-up"]) == 0  # default: best
    best = capsys.readouterr().out.splitlines()
    assert "(level 2)" in best[-1] and len(best) < len(published_tree())
    line = describe_release(Release.from_json(release_json(5, None, 0)))
    assert "(level 0)" in line and "n=4" in line and "lifetime" not in line
    # the hypothesis in words (the threshold at 15 of release 5), not its JSON form
    assert ": predicts 1 for x ≥ 15 (ε=" in line and "kind" not in line
    assert all("predicts 1 for x ≥ " in line for line in lines + best)


GARBAGE = b"\x00not a release"


def forged(entry: int, level: int, index: int) -> bytes:
    """A well-formed release nobody's worker made: a constant hypothesis, high in the tree."""
    data = json.loads(release_json(entry, level, index))
    data["hypothesis"] = threshold_hypothesis(64, 0).to_dict()
    return json.dumps(data).encode()


def test_a_garbage_record_is_skipped_and_counted_and_the_iteration_goes_on(topic) -> None:
    """Before: one b"\\x00not a release" record ended the iteration with a ValidationError, and the
    CLI exited 2 on every restart (subscribers read from the beginning)."""
    topic.insert(2, record(b"s", GARBAGE, 99, signer=None))
    topic.insert(5, record(b"s", GARBAGE, 98))  # signed garbage (a stolen key): still no release
    tombstone = record(b"s", b"", 97)
    tombstone.value = None  # a record without a value, its empty bytes signed
    topic.insert(7, tombstone)
    releases, subscription = asyncio.run(collect("all"))
    assert len(releases) == len(published_tree())
    assert subscription.skipped == {"unsigned": 1, "not_a_release": 2}
    releases, subscription = asyncio.run(collect("all", verify=False))
    assert len(releases) == len(published_tree()) and subscription.skipped == {"not_a_release": 3}


def test_the_cli_survives_garbage_and_reports_what_it_skipped(topic, capsys) -> None:
    topic.insert(0, record(b"s", GARBAGE, 99, signer=None))
    assert main(["subscribe", "s", "--level", "all", "--until-caught-up"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == len(published_tree())
    assert "1 records skipped (1 unsigned)" in out.err


def test_a_forged_release_cannot_freeze_best_or_hide_a_real_entry(topic) -> None:
    """Before: a forged level-20 release froze level="best" on its constant hypothesis, and a forged
    release claiming a real entry id made level="all" drop the real one."""
    top = forged(1000, LEVELS, 50)  # a top-level node far in the future
    topic.insert(0, record(b"s", top, 97, signer=None))
    topic.insert(0, record(b"s", top, 96, signer=Signer.generate()))  # signed, by a key nobody trusts
    first_real_entry = forged(1, 0, 0)  # claims entry 1, comes before the real entry 1
    topic.insert(0, record(b"s", first_real_entry, 95, signer=None))
    best, subscription = asyncio.run(collect("best"))
    assert (best[-1].level, best[-1].last_window) == (LEVELS, WINDOWS - 1)
    assert all(r.hypothesis.to_dict() != threshold_hypothesis(64, 0).to_dict() for r in best)
    assert subscription.skipped == {"unsigned": 2, "unknown_key": 1}
    every, _ = asyncio.run(collect("all"))
    assert [r.ledger_entry_id for r in every] == [str(e) for e, _, _ in published_tree()]


def test_even_without_verification_a_forged_entry_id_does_not_hide_the_real_release(topic) -> None:
    topic.insert(0, record(b"s", forged(1, 0, 0), 95, signer=None))
    every, _ = asyncio.run(collect("all", verify=False))
    assert [r.ledger_entry_id for r in every].count("1") == 2  # both: they are different releases


def test_a_signed_release_with_an_impossible_certificate_is_skipped(topic) -> None:
    for i, change in enumerate(({"epsilon": 0.0}, {"epsilon": 1000.0}, {"mechanism": "none"})):
        data = json.loads(release_json(500 + i, 0, 0))
        data["certificate"].update(change)
        topic.insert(0, record(b"s", json.dumps(data).encode(), 90 - i))
    other = record(b"s", release_json(600, 0, 0, stream="other"), 80)  # keyed to s, about another
    topic.insert(0, other)
    releases, subscription = asyncio.run(collect("all"))
    assert len(releases) == len(published_tree())
    assert subscription.skipped == {"inconsistent_certificate": 3, "wrong_stream": 1}


def test_a_re_published_release_is_yielded_once(topic) -> None:
    topic.append(record(b"s", topic[0].value, 200))  # the outbox after a crash: same bytes, same signature
    releases, subscription = asyncio.run(collect("all"))
    assert len(releases) == len(published_tree()) and not subscription.skipped


def test_keys_are_taken_from_an_argument_and_a_wrong_key_yields_nothing(topic) -> None:
    releases, _ = asyncio.run(collect("all", trusted_keys=[SIGNER.public_entry().to_dict()["public_key"]]))
    assert len(releases) == len(published_tree())
    releases, subscription = asyncio.run(
        collect("all", trusted_keys=KeySet([Signer.generate().public_entry()]))
    )
    assert releases == [] and subscription.skipped == {"unknown_key": len(published_tree())}


def test_keys_are_fetched_from_the_public_listener_when_none_are_given(topic, monkeypatch) -> None:
    monkeypatch.delenv("PRIVSTREAM_TRUSTED_KEYS_FILE")
    fetched: list[str] = []

    def fetch(url: str, timeout: float = 10.0) -> bytes:
        fetched.append(url)
        return KeySet([SIGNER.public_entry()]).to_json().encode()

    monkeypatch.setattr(subscription_module, "fetch_key_document", fetch)
    releases, _ = asyncio.run(collect("all", keys_url="http://127.0.0.1:1/keys"))
    assert len(releases) == len(published_tree()) and fetched == ["http://127.0.0.1:1/keys"]


def test_a_missing_topic_is_named_with_the_prefix(topic, caplog) -> None:
    """Before: without the right prefix the subscriber waited for ever, saying nothing."""
    FakeConsumer.topic_names = {"prod.hypotheses"}
    releases, subscription = asyncio.run(collect("all"))
    assert releases == [] and subscription.caught_up
    assert "no topic 'hypotheses'" in caplog.text and "topic_prefix=''" in caplog.text
    FakeConsumer.topic_names = {"prod.hypotheses"}
    caplog.clear()
    releases, _ = asyncio.run(collect("all", topic_prefix="prod."))
    assert len(releases) == len(published_tree()) and "no topic" not in caplog.text
