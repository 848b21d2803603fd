"""What closing a time window costs between its close and its deadline, by the window's private
size: ingest n examples of an integer class (``thresholds:65536``, example level, capped at
``max_node_examples`` 2,000) into a SQLite state store through the release agent's ingest rule,
then time the node's build in the store (:func:`~privstream.agents.releases.nodes.build_node`),
the learner's input (:func:`~privstream.agents.windows.node_examples` and
:func:`~privstream.agents.fits.prepared_input`), for n = 2,000 and n = 300,000. Prints JSON; the
ratio of the two closes is the figure (same run, same machine).

    .venv/bin/python benchmarks/bench_close_cost.py [--sizes 2000,300000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from privstream.agents.fits import prepared_input
from privstream.agents.releases.nodes import build_node, ingest_rule
from privstream.agents.releases.policy import ReleasePolicy
from privstream.agents.windows import node_examples
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.randomness import seeded
from privstream.stream_app.store.sqlite_state import SqliteStateStore

CAP, DOMAIN, BATCH = 2000, 65536, 500


def close_cost(n: int, directory: Path) -> dict[str, float]:
    policy = ReleasePolicy(
        "s",
        parse_class_spec(f"thresholds:{DOMAIN}"),
        (),
        window_kind="time",
        window_seconds=6.0,
        expected_size=1000,
        max_node_examples=CAP,
    )
    store = SqliteStateStore(directory / f"state-{n}-{time.monotonic_ns()}.sqlite")  # never a replay
    rng = np.random.default_rng(n)
    xs = rng.integers(0, DOMAIN, n)
    keep, priorities = ingest_rule(policy)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        chunk = xs[start : start + BATCH]
        rows = [(start + i, int(x), int(x >= DOMAIN // 2), None, 0) for i, x in enumerate(chunk)]
        store.append_many(
            "s", 0, rows, keep_first=keep, priorities=priorities(len(rows)) if priorities else None
        )
    ingest = time.perf_counter() - started
    started = time.perf_counter()
    node = build_node(store, policy, policy.family, 0, 0)
    built = time.perf_counter()
    data = node_examples(node)
    loaded = time.perf_counter()
    learner_xs, _ = prepared_input(data.xs, data.ys, seeded(0), CAP)
    prepared = time.perf_counter()
    store.close()
    return {
        "n": n,
        "ingest_seconds": round(ingest, 4),
        "ingest_examples_per_second": round(n / ingest),
        "build_seconds": round(built - started, 4),
        "load_seconds": round(loaded - built, 4),
        "prepare_seconds": round(prepared - loaded, 4),
        "close_seconds": round(prepared - started, 4),
        "learner_rows": len(learner_xs),
        "node_rows": len(node.xs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,300000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [close_cost(n, Path(tmp)) for n in sizes]
    print(
        json.dumps(
            {
                "class": f"thresholds:{DOMAIN}",
                "max_node_examples": CAP,
                "runs": runs,
                "close_ratio_largest_to_smallest": round(
                    runs[-1]["close_seconds"] / runs[0]["close_seconds"], 2
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
