"""The SDK's choice of releases by level (issue 17): ``subscribe(level="best" | j | "all")``.

The releases are built with the schemas as the release agent fills them (E-DESIGN.md §6): the
certificate carries the node's ``level``, its window range (``window.first_window``/``last_window``)
and the ``lifetime`` bound; they are published in the release agent's order (after window w closes,
every node it completes, level 0 first).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from privstream import __version__
from privstream.learning.hypothesis_classes import threshold_hypothesis
from privstream.schemas import Certificate, HypothesisRelease, LifetimeBound, WindowInfo
from privstream.stream_app import sdk
from privstream.stream_app.cli import main
from privstream.stream_app.cli.run import describe_release
from privstream.stream_app.sdk import Release, ReleaseSelector

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
                levels=LEVELS,
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


class FakeConsumer:
    """Stands in for aiokafka's consumer: the records of the hypotheses topic, then the end."""

    records: ClassVar[list[tuple[bytes, bytes]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stopped = False

    def __aiter__(self) -> FakeConsumer:
        self._it = iter(self.records)
        return self

    async def __anext__(self) -> SimpleNamespace:
        try:
            key, value = next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None
        return SimpleNamespace(key=key, value=value)

    async def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, bytes]]:
    async def start_client(consumer: Any, settings: Any) -> None:
        return None

    monkeypatch.setattr(sdk, "AIOKafkaConsumer", FakeConsumer)
    monkeypatch.setattr(sdk, "start_client", start_client)
    monkeypatch.setenv("PRIVSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    records = [(b"s", release_json(*r)) for r in published_tree()]
    records.insert(3, (b"other", release_json(99, 2, 0, stream="other")))
    FakeConsumer.records = records
    return records


def test_subscribe_filters_the_topic_by_stream_and_level(topic: list[tuple[bytes, bytes]]) -> None:
    async def collect(level: Any) -> list[tuple[int, int | None]]:
        releases = sdk.subscribe("s", bootstrap="127.0.0.1:1", level=level)
        return [(r.level, r.last_window) async for r in releases]

    best = asyncio.run(collect("best"))
    assert best[-1] == (LEVELS, WINDOWS - 1) and (2, 3) in best and (0, 4) not in best
    assert asyncio.run(collect(1)) == [(1, 1), (1, 3), (1, 5), (1, 7)]
    assert len(asyncio.run(collect("all"))) == len(published_tree())


def test_cli_subscribe_takes_a_level_and_prints_it(topic: list[tuple[bytes, bytes]], capsys) -> None:
    assert main(["subscribe", "s", "--level", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == WINDOWS >> 2
    assert all("(level 2)" in line and "lifetime ε 1 of 1 per example" in line for line in lines)
    assert main(["subscribe", "s"]) == 0  # default: best
    best = capsys.readouterr().out.splitlines()
    assert "(level 2)" in best[-1] and len(best) < len(published_tree())
    line = describe_release(Release.from_json(release_json(5, None, 0)))
    assert "(level 0)" in line and "n=4" in line and "lifetime" not in line
