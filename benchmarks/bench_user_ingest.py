"""What the individual filter at ingest costs a user-level stream's ingest: rows of U users (3
each, ``thresholds:65536``, four levels, one time window) handed to
:meth:`ReleaseAgent.observe_batch` in 500-row parts, as the ingest pipeline does, with SQLite
state store and ledger files, twice in the same run: with each user admitted at their first row
(:mod:`privstream.agents.releases.admission`, the service's path) and with admission bypassed
(every row stored, what ingest did when users were charged at the close). Validation and the
online learner are not in either figure. Prints JSON with the ratio.

    .venv/bin/python benchmarks/bench_user_ingest.py [--users 2000,33334]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from privstream.agents.ledger_port import PrivacyCost
from privstream.agents.releases import ReleaseAgent
from privstream.agents.releases.policy import Product, ReleasePolicy
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore

DOMAIN, ROWS_PER_USER, PART, START = 65536, 3, 500, 1_767_225_600.0


async def _never(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("nothing is published while the window is open")


def ingest_seconds(users: int, admit: bool, directory: Path) -> float:
    policy = ReleasePolicy(
        "s",
        parse_class_spec(f"thresholds:{DOMAIN}"),
        (Product("hypotheses", make_learner("generic"), 0.5),),
        window_kind="time",
        window_seconds=3600.0,
        expected_size=1000,
        max_node_examples=2000,
        privacy_unit="user",
        user_contribution_bound=2,
        top_level=3,
        user_budget=PrivacyCost(100.0, 0.0),
        schedule_start=START,
    )
    tag = f"{users}-{admit}-{time.monotonic_ns()}"
    store = SqliteStateStore(directory / f"state-{tag}.sqlite3")
    ledger = SqliteLedger.open(
        directory / f"ledger-{tag}.sqlite3", budgets={"s": (100.0, 0.0)}, create_if_missing=True
    )
    metrics = ServiceMetrics(["s"], release_streams={"s": (0.0, ["x"])})
    agent = ReleaseAgent(
        {"s": policy}, store, ledger, _never, metrics, library_version="bench", clock=lambda: START + 10
    )
    if not admit:
        agent.admission.admit = lambda policy, rows, **kwargs: (list(rows), 0)  # type: ignore[method-assign]
    n = users * ROWS_PER_USER
    xs = np.random.default_rng(users).integers(0, DOMAIN, n).tolist()
    at = datetime.fromtimestamp(START + 5, UTC)
    started = time.perf_counter()
    for first in range(0, n, PART):
        part = range(first, min(n, first + PART))
        agent.observe_batch(
            "s",
            0,
            list(part),
            [xs[i] for i in part],
            [int(xs[i] >= DOMAIN // 2) for i in part],
            [f"u{i % users}" for i in part],
            [at] * len(part),
            [None] * len(part),
        )
    seconds = time.perf_counter() - started
    store.close()
    ledger.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="2000,33334")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for users in (int(s) for s in args.users.split(",")):
            admitted = ingest_seconds(users, True, Path(tmp))
            bypassed = ingest_seconds(users, False, Path(tmp))
            rows = users * ROWS_PER_USER
            runs.append(
                {
                    "users": users,
                    "rows": rows,
                    "admitted_seconds": round(admitted, 4),
                    "bypassed_seconds": round(bypassed, 4),
                    "admitted_to_bypassed_ratio": round(admitted / bypassed, 2),
                    "added_microseconds_per_row": round((admitted - bypassed) / rows * 1e6, 1),
                }
            )
    print(json.dumps({"class": f"thresholds:{DOMAIN}", "levels": 4, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
