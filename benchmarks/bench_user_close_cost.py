"""What closing a user-level time window costs between its close and its deadline, by how many
users it holds: ingest U users of 3 rows each (``thresholds:65536``, ``user_contribution_bound``
2, ``max_node_examples`` 2,000) into a SQLite state store, then time what the close does today
before the default: the node's build in the store (each user's first k rows,
:func:`~privstream.agents.releases.nodes.build_node`), the individual filter's reservation in a
SQLite ledger on disk, and the learner's capped input, two ways in the same run: *at close*, the
individual filter at the reservation (every user present charged, :meth:`SqlLedger.reserve` with
``users``, then the filter and the per-user bound over the node's rows), and *admitted*, the
release path when users were charged at ingest (a reservation naming no users, no filter). Beside
them, what the same users cost ingest when each is admitted at their first row
(:meth:`SqlLedger.admit`, in another ledger, one call per 500-row part as ingest stores them, four
levels). For U = 2,000 users (3 times the cap's rows) and U = 100,000. Prints JSON, with ratios
(same run, same machine): the build still grows with the users present, a private number, while
the slot is measured on the cap.

    .venv/bin/python benchmarks/bench_user_close_cost.py [--users 2000,100000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from privstream.agents.fits import prepared_input
from privstream.agents.interfaces import WindowData
from privstream.agents.ledger_port import NodeRange
from privstream.agents.releases.nodes import build_node
from privstream.agents.releases.policy import ReleasePolicy
from privstream.agents.windows import bound_contributions, node_examples
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore

CAP, DOMAIN, ROWS_PER_USER, BOUND, BATCH, LEVELS = 2000, 65536, 3, 2, 500, 4


def close_cost(users: int, directory: Path) -> dict[str, float]:
    policy = ReleasePolicy(
        "s",
        parse_class_spec(f"thresholds:{DOMAIN}"),
        (),
        window_kind="time",
        window_seconds=6.0,
        expected_size=1000,
        max_node_examples=CAP,
        privacy_unit="user",
        user_contribution_bound=BOUND,
    )
    tag = f"{users}-{time.monotonic_ns()}"
    store = SqliteStateStore(directory / f"state-{tag}.sqlite3")
    ledger = SqliteLedger.open(
        directory / f"ledger-{tag}.sqlite3", budgets={"s": (100.0, 0.0)}, create_if_missing=True
    )
    n = users * ROWS_PER_USER
    xs = np.random.default_rng(users).integers(0, DOMAIN, n)
    for start in range(0, n, BATCH):
        chunk = xs[start : start + BATCH].tolist()
        rows = [
            (start + i, x, int(x >= DOMAIN // 2), f"u{(start + i) % users}", 0) for i, x in enumerate(chunk)
        ]
        store.append_many("s", 0, rows)
    started = time.perf_counter()
    node = build_node(store, policy, policy.family, 0, 0)
    data = node_examples(node)
    built = time.perf_counter()
    present = sorted({str(u) for u in data.users.tolist()})
    reservation = ledger.reserve(
        "s", "w0", "learner:generic", 0.5, 0.0, NodeRange(0, 0, 0), users=present, user_budget=(100.0, 0.0)
    )
    reserved = time.perf_counter()
    included = reservation.included_users or frozenset()
    keep = np.array([str(u) in included for u in data.users.tolist()], bool)
    bounded = bound_contributions(WindowData(*(column[keep] for column in data)), BOUND)
    filtered = time.perf_counter()
    learner_xs, _ = prepared_input(bounded.xs, bounded.ys, None, CAP)
    prepared = time.perf_counter()
    # the release path with users admitted at ingest: a reservation naming no users, no filter
    ledger.reserve("s", "w0-admitted", "learner:generic", 0.5, 0.0, NodeRange(0, 0, 0))
    reserved_alone = time.perf_counter()
    prepared_input(data.xs, data.ys, None, CAP)
    prepared_alone = time.perf_counter()
    store.close()
    ledger.close()
    admissions = SqliteLedger.open(
        directory / f"admissions-{tag}.sqlite3", budgets={"s": (100.0, 0.0)}, create_if_missing=True
    )
    admit_started = time.perf_counter()
    for start in range(0, n, BATCH):
        part = list(dict.fromkeys(f"u{seq % users}" for seq in range(start, min(n, start + BATCH))))
        admissions.admit("s", 0, [(0.5, 0.0)] * LEVELS, part, user_budget=(100.0, 0.0))
    admitted = time.perf_counter()
    admissions.close()
    return {
        "users": users,
        "rows": n,
        "build_seconds": round(built - started, 4),
        "reserve_seconds": round(reserved - built, 4),
        "filter_seconds": round(filtered - reserved, 4),
        "prepare_seconds": round(prepared - filtered, 4),
        "close_seconds": round(prepared - started, 4),
        "admitted_reserve_seconds": round(reserved_alone - prepared, 4),
        "admitted_close_seconds": round(built - started + prepared_alone - prepared, 4),
        "learner_rows": len(learner_xs),
        "ingest_admit_seconds": round(admitted - admit_started, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="2000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.users.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [close_cost(u, Path(tmp)) for u in sizes]
    print(
        json.dumps(
            {
                "class": f"thresholds:{DOMAIN}",
                "max_node_examples": CAP,
                "user_contribution_bound": BOUND,
                "rows_per_user": ROWS_PER_USER,
                "runs": runs,
                "close_ratio_largest_to_smallest": round(
                    runs[-1]["close_seconds"] / runs[0]["close_seconds"], 2
                ),
                "admitted_close_ratio_largest_to_smallest": round(
                    runs[-1]["admitted_close_seconds"] / runs[0]["admitted_close_seconds"], 2
                ),
                "admitted_to_at_close_ratio": [
                    round(r["admitted_close_seconds"] / r["close_seconds"], 3) for r in runs
                ],
                "ingest_admit_ratio_largest_to_smallest": round(
                    runs[-1]["ingest_admit_seconds"] / runs[0]["ingest_admit_seconds"], 2
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
