"""The longest stretch of ingest work between two of the event loop's turns, by how a poll's
``ExampleBatch`` messages are processed: whole (a chunk's records read, checked, learned and
stored at once, as before parts) or in parts of ``CHUNK_EXAMPLES`` rows
(:func:`privstream.agents.pipeline.chunked`, what the service's ingest loop runs). The deadline
guard (``DEADLINE_GUARD_SECONDS``, 0.25 s) is sound only while that stretch is shorter.

The pipeline is the service's: the validator, the online SOA of ``thresholds:1024`` and the
release agent of a capped time-window stream storing into a SQLite state store on disk. Each
poll is one message of n rows with event times (and, for comparison, 500 single-example
messages). Prints JSON: per poll the longest stretch and the total, whole and in parts, and
``longest_ratio`` (parts / whole), measured side by side in one run.

    .venv/bin/python benchmarks/bench_ingest_parts.py [--rows 20000,100000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privstream.agents.online import OnlineLearners, OnlineStream
from privstream.agents.pipeline import CHUNK_EXAMPLES, IngestPipeline, RawRecord, chunks
from privstream.agents.progress import Progress
from privstream.agents.releases import ReleaseAgent
from privstream.agents.validation import ExampleValidator, integer_domain
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.stream_app.metrics import ServiceMetrics
from privstream.stream_app.release_policies import release_policy
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore

CLASS = "thresholds:1024"
START = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def pipeline(directory: Path) -> IngestPipeline:
    config = StreamConfig(
        name="s",
        hypothesis_class=CLASS,
        release={
            "learner": "generic",
            "epsilon": 1.0,
            "epsilon_budget": 100.0,
            "expected_size": 1000,
            "max_node_examples": 2000,
            "window": {"kind": "time", "seconds": 60.0, "publish_delay_seconds": 5.0},
        },
    )
    hclass = parse_class_spec(CLASS)
    metrics = ServiceMetrics(["s"], release_streams={"s": (0.0, ["x"])})
    store = SqliteStateStore(directory / f"state-{time.monotonic_ns()}.sqlite3")

    async def publish(*_: Any, **__: Any) -> None:
        return None

    agent = ReleaseAgent(
        {"s": release_policy(config, hclass)},
        store,
        SqliteLedger.open(":memory:", budgets={"s": (100.0, 0.0)}),
        publish,
        metrics,
        library_version="bench",
        clock=lambda: START + 30,
    )
    validator = ExampleValidator({"s": integer_domain(hclass.check_point)}, clock=lambda: START + 30)
    learners = OnlineLearners({"s": OnlineStream("s", hclass)}, metrics, store)
    return IngestPipeline(validator, learners, metrics, Progress(), agent)


def poll(rows: int, batch: bool) -> list[RawRecord]:
    xs = [(i * 7919) % 1024 for i in range(rows)]
    times = [datetime.fromtimestamp(START + 1 + i / (10 * rows), UTC).isoformat() for i in range(rows)]
    ys = [int(x >= 600) for x in xs]
    if batch:
        message = {"stream_id": "s", "xs": xs, "ys": ys, "event_times": times}
        return [RawRecord("examples", 0, 0, None, json.dumps(message).encode())]
    return [
        RawRecord(
            "examples", 0, i, None, json.dumps({"stream_id": "s", "x": x, "y": y, "event_time": t}).encode()
        )
        for i, (x, y, t) in enumerate(zip(xs, ys, times, strict=True))
    ]


def stretches(records: list[RawRecord], examples: int | None, directory: Path) -> dict[str, float]:
    """The longest and the total time between two points where the ingest loop yields."""
    ingest = pipeline(directory)
    longest = total = 0.0
    for chunk in chunks(records):
        parts = ingest.process_parts(chunk, examples)
        while True:
            started = time.perf_counter()
            part = next(parts, None)
            spent = time.perf_counter() - started
            if part is None:
                break
            longest, total = max(longest, spent), total + spent
    return {"longest_seconds": round(longest, 4), "total_seconds": round(total, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="20000,100000", help="rows of the batch message of each poll")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        polls = [("500 single-example messages", poll(500, batch=False))]
        polls += [(f"one batch of {n} rows", poll(int(n), batch=True)) for n in args.rows.split(",")]
        for name, records in polls:
            whole = stretches(records, None, directory)
            parts = stretches(records, CHUNK_EXAMPLES, directory)
            results.append(
                {
                    "poll": name,
                    "bytes": sum(len(r.value or b"") for r in records),
                    "whole": whole,
                    "parts": parts,
                    "longest_ratio": round(parts["longest_seconds"] / whole["longest_seconds"], 3),
                }
            )
    print(json.dumps({"chunk_examples": CHUNK_EXAMPLES, "polls": results}, indent=2))


if __name__ == "__main__":
    main()
