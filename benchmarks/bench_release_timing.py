"""When do releases appear, and does that depend on the data? The release agent on the wall clock.

    .venv/bin/python benchmarks/bench_release_timing.py [--examples 100000] [--json]

The release agent runs in this process as the service runs it (learners in child processes, an
in-memory ledger and state store, time windows closed by a timer every 0.1 s); the publisher
records when each release was sent and the timestamp its record would carry. Each figure is
measured on two neighbouring inputs, a window with no example and one with ``--examples``
examples for a learner that is slow in n (``halfspaces`` on feature vectors, ``expected_size``
equal to the big window), so a difference between the two is what an observer learns:

* ``publication``: seconds from a release's schedule (its window's close plus the slot) to its
  send, and its record's timestamp against the schedule, for a window of 0 and of n examples;
* ``budget_page``: seconds from the window's close until ``/streams/{id}/budget`` counts the
  release, with a slot long enough for the fit (8 s);
* ``cross_stream``: stream b (always empty) shares the worker with stream a (0 or n examples):
  b's release against its schedule, and a's next (empty) window's;
* ``ids``: the ledger entry ids stream b's releases are published under, with a's window 0 or n;
* ``dying_learner``: a learner whose process dies on window 0's data: the windows released and
  the releases ``/budget`` counts.

It runs against whichever ``privstream`` is importable (``PYTHONPATH=<checkout>`` measures another
version of the code), adapting to the release agent's interface. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import inspect
import json
import os
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from privstream.agents.releases import ReleaseAgent
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.release_policies import release_policy
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.stream_app.web import public

SECONDS = 8.0  # time windows
EXPECTED_SIZE = 5000  # halfspaces: its net (and its run time per example) follows this public size
NEW_API = "runner" in inspect.signature(ReleaseAgent.__init__).parameters


class DiesOnFarCorner:
    """The halfspaces learner, except that its process dies (as killed for its memory) when its
    input holds the point (1, 1)."""

    def __init__(self) -> None:
        from privstream.learning.private_learners.vector_base import make_vector_learner

        self.inner = make_vector_learner("halfspaces")
        self.name = self.inner.name

    def fit(self, xs: Any, ys: Any, **kwargs: Any) -> Any:
        if len(xs) and bool(((xs[:, 0] == 1.0) & (xs[:, 1] == 1.0)).any()):
            os._exit(137)
        return self.inner.fit(xs, ys, **kwargs)


def stream(name: str, examples: int, slot: float, levels: int = 0) -> StreamConfig:
    return StreamConfig(
        name=name,
        features=2,
        feature_bounds=[[0.0, 1.0], [0.0, 1.0]],
        release={
            "learner": "halfspaces",
            "epsilon_budget": 100.0,
            "epsilon": 1.0,
            "top_level": levels,
            "expected_size": EXPECTED_SIZE,
            "max_node_examples": max(examples, 20),
            "window": {"kind": "time", "seconds": SECONDS, "publish_delay_seconds": slot},
        },
    )


class Run:
    """One release agent on the wall clock, its learners in child processes."""

    def __init__(self, configs: list[StreamConfig], learner: Any = None):
        self.configs = {c.name: c for c in configs}
        policies = {}
        for c in configs:
            policy = release_policy(c, None)
            if learner is not None:
                product = dataclasses.replace(policy.products[0], algorithm=learner)
                policy = dataclasses.replace(policy, products=(product,))
            policies[c.name] = policy
        assert all(c.release for c in configs)
        self.ledger = SqliteLedger.open(":memory:", budgets={c.name: (100.0, 0.0) for c in configs})
        metrics = ServiceMetrics(
            list(self.configs), release_streams={n: (100.0, ["x"]) for n in self.configs}
        )
        self.sent: list[dict[str, Any]] = []
        if NEW_API:
            from privstream.stream_app.learner_process import LearnerProcesses

            self.processes: Any = LearnerProcesses(list(self.configs)).start()
            options = {"runner": self.processes}
        else:
            from privstream.stream_app.learner_process import LearnerProcess

            self.processes = LearnerProcess().start()
            options = {"executor": self.processes}
        self.first = int(time.time() // SECONDS)  # the schedule's first window: the one holding its start
        self.agent = ReleaseAgent(
            policies,
            SqliteStateStore(":memory:"),
            self.ledger,
            self.publish,
            metrics,
            library_version="bench",
            **options,
        )

    async def publish(
        self, topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None
    ) -> None:
        now = time.time()
        certificate = json.loads(release)["certificate"]
        self.sent.append(
            {
                "stream": stream_id,
                "window": certificate["window"]["last_window"],
                "ledger_entry_id": certificate["ledger_entry_id"],
                "sent": now,
                "timestamp": now if timestamp_ms is None else timestamp_ms / 1000,
            }
        )

    async def feed(self, stream_id: str, n: int, at: float, corner: bool = False) -> None:
        """n examples dated ``at``, 1000 at a time (a poll's worth, as the service's ingest loop)."""
        points = np.random.default_rng(1).random((n, 2))
        if corner and n:
            points[0] = (1.0, 1.0)
        moment = datetime.fromtimestamp(at, UTC)
        for start in range(0, n, 1000):
            await asyncio.sleep(0)
            part = points[start : start + 1000]
            self.agent.observe_batch(
                stream_id,
                0,
                list(range(start, start + len(part))),
                part.tolist(),
                (part[:, 1] >= part[:, 0]).astype(int).tolist(),
                [None] * len(part),
                [moment] * len(part),
                [None] * len(part),
            )

    def budget(self, stream_id: str) -> int:
        now = {"now": time.time()} if "now" in inspect.signature(public.budget).parameters else {}
        figures = public.budget(self.configs[stream_id], self.ledger, **now)
        return int(figures["releases"]) if figures else 0

    async def until(self, moment: float, watch: str | None = None, releases: int = 1) -> float | None:
        """Tick every 0.1 s until ``moment``; with ``watch``, the first time /budget counts that
        many releases."""
        counted = None
        while time.time() < moment:
            await self.agent.tick()
            if watch is not None and counted is None and self.budget(watch) >= releases:
                counted = time.time()
            await asyncio.sleep(0.01 if watch else 0.1)
        return counted

    def close(self) -> None:
        self.processes.shutdown(wait=False)


def window_start() -> float:
    """The start of a window at least half a window ahead (the data is fed before it closes)."""
    now = time.time()
    return (np.floor(now / SECONDS) + 2) * SECONDS


def schedule(window: int, slot: float) -> float:
    return (window + 1) * SECONDS + slot


async def publication(examples: int, slot: float) -> dict[str, Any]:
    out = {}
    for n in (0, examples):
        run = Run([stream("s", examples, slot)])
        try:
            start = window_start()
            await run.until(start - SECONDS + 0.5)
            await run.feed("s", n, start + 1)
            window = int(start // SECONDS)
            await run.until(schedule(window, slot) + 15)
            sent = next(m for m in run.sent if m["window"] == window)
            out[str(n)] = {
                "sent_after_schedule": round(sent["sent"] - schedule(window, slot), 3),
                "timestamp_after_schedule": round(sent["timestamp"] - schedule(window, slot), 3),
            }
        finally:
            run.close()
    return out


async def budget_page(examples: int) -> dict[str, Any]:
    out = {}
    for n in (0, examples):
        run = Run([stream("s", examples, 8.0)])
        try:
            start = window_start()
            await run.until(start - SECONDS + 0.5)
            await run.feed("s", n, start + 1)
            close = start + SECONDS
            counted = await run.until(close + 12, watch="s", releases=int(start // SECONDS) - run.first + 1)
            out[str(n)] = {"counted_after_close": None if counted is None else round(counted - close, 3)}
        finally:
            run.close()
    return out


async def cross_stream(examples: int, slot: float) -> dict[str, Any]:
    out = {}
    for n in (0, examples):
        # levels 0 and 1: a's window 1 closes its level-1 node too, whose fit reads a's window 0
        run = Run([stream("a", examples, slot, levels=1), stream("b", examples, slot, levels=1)])
        try:
            start = window_start()
            await run.until(start - SECONDS + 0.5)
            await run.feed("a", n, start + 1)
            window = int(start // SECONDS)
            await run.until(schedule(window + 1, slot) + 15)
            b = next(m for m in run.sent if m["stream"] == "b" and m["window"] == window)
            a_next = next(m for m in run.sent if m["stream"] == "a" and m["window"] == window + 1)
            out[str(n)] = {
                "b_sent_after_schedule": round(b["sent"] - schedule(window, slot), 3),
                "a_next_window_sent_after_schedule": round(a_next["sent"] - schedule(window + 1, slot), 3),
                "b_ids": [m["ledger_entry_id"] for m in run.sent if m["stream"] == "b"],
            }
        finally:
            run.close()
    return out


async def dying_learner(slot: float) -> dict[str, Any]:
    out = {}
    for poisoned in (False, True):
        run = Run([stream("s", 20, slot)], learner=DiesOnFarCorner())
        try:
            start = window_start()
            await run.until(start - SECONDS + 0.5)
            await run.feed("s", 5, start + 1, corner=poisoned)
            window = int(start // SECONDS)
            await run.until(schedule(window + 2, slot) + 5)
            out["poisoned" if poisoned else "clean"] = {
                "windows_released": sorted({m["window"] - window for m in run.sent if m["window"] >= window}),
                "budget_releases": run.budget("s"),
            }
        finally:
            run.close()
    return out


def relative(ids: list[str]) -> list[str]:
    """Published ids comparable across runs made at different times: a public id's window index
    relative to the run's first (``b/t8-L0-224479351/learner:x`` -> ``b/t8-L0-+0/learner:x``); a
    ledger counter's id as it is."""
    if not ids or "/" not in ids[0]:
        return ids
    first = int(ids[0].split("/")[1].rsplit("-", 1)[1])
    out = []
    for entry in ids:
        stream, node, product = entry.split("/")
        family, index = node.rsplit("-", 1)
        level = int(family.rsplit("-L", 1)[1])
        out.append(f"{stream}/{family}-+{int(index) - (first >> level)}/{product}")
    return out


async def main(examples: int) -> dict[str, Any]:
    slot = 1.0
    result: dict[str, Any] = {
        "code": "deadlines" if NEW_API else "before deadlines",
        "examples": examples,
        "window_seconds": SECONDS,
        "slot_seconds": slot,
        "publication": await publication(examples, slot),
        "budget_page": await budget_page(examples),
        "cross_stream": await cross_stream(examples, slot),
    }
    b_ids = [relative(result["cross_stream"][k].pop("b_ids")) for k in ("0", str(examples))]
    result["ids"] = {
        "b_ids_with_a_empty": b_ids[0],
        "b_ids_with_a_full": b_ids[1],
        "equal": b_ids[0] == b_ids[1],
    }
    result["dying_learner"] = await dying_learner(slot)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--json", action="store_true", help="one JSON line (default: indented)")
    args = parser.parse_args()
    figures = asyncio.run(main(args.examples))
    print(json.dumps(figures) if args.json else json.dumps(figures, indent=2))
