"""What storing a time window's rows costs the ingest path: by the chunk (one stored value per
append and window, what the state store does) next to one table row per example (forced here by
treating the points as unchunkable), side by side in one run, on SQLite and PostgreSQL.

A capped time-window stream of 16-feature vectors: appends of ``--batch`` rows of one partition
(a poll), fenced against the window's close (``append_time_rows``), windows of ``--window-rows``
rows capped at ``--cap`` rows (the input cap: rows past it take their sequence numbers and are not
stored), each window closed into its node when the next one starts. Prints JSON: per backend and
layout the CPU and wall microseconds per row of the appends, those of the closes, and
``chunk_over_rows`` (the appends' wall time by the chunk over one row per example).

    .venv/bin/python benchmarks/bench_time_rows.py [--rows 200000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from privstream.agents.interfaces import NodeBounds
from privstream.stream_app.store import state_rows
from privstream.stream_app.store.state import SqlStateStore

FEATURES = 16


def measure(store: SqlStateStore, rows: int, batch: int, window_rows: int, cap: int) -> dict[str, float]:
    """Append ``rows`` rows in batches, closing each window when the next begins."""
    rng = np.random.default_rng(0)
    xs = rng.random((batch, FEATURES)).round(6).tolist()
    bounds = NodeBounds(max_node_examples=cap)
    append = [0.0, 0.0]
    close = [0.0, 0.0]
    open_window = 0
    for start in range(0, rows, batch):
        window = start // window_rows
        if window > open_window:
            c0, w0 = time.process_time(), time.perf_counter()
            store.close_window("s", "t60", open_window, bounds, time_window=open_window, vectors=FEATURES)
            close[0] += time.process_time() - c0
            close[1] += time.perf_counter() - w0
            open_window = window
        batch_rows = [(start + i, xs[i], i % 2, None, window) for i in range(batch)]
        c0, w0 = time.process_time(), time.perf_counter()
        store.append_time_rows("s", 0, batch_rows, keep_first=cap)
        append[0] += time.process_time() - c0
        append[1] += time.perf_counter() - w0
    per_row = 1e6 / rows
    return {
        "append_cpu_us_per_row": append[0] * per_row,
        "append_wall_us_per_row": append[1] * per_row,
        "close_wall_us_per_row": close[1] * per_row,
    }


def run(
    backends: dict[str, Callable[[], SqlStateStore]], rows: int, batch: int, window_rows: int, cap: int
) -> dict[str, Any]:
    result: dict[str, Any] = {"rows": rows, "batch": batch, "window_rows": window_rows, "cap": cap}
    chunkable = state_rows.fits_a_chunk
    for name, open_store in backends.items():
        figures: dict[str, dict[str, float]] = {}
        for layout in ("rows", "chunk", "rows", "chunk"):  # alternated, the second of each kept
            state_rows.fits_a_chunk = chunkable if layout == "chunk" else (lambda xs: False)  # type: ignore[assignment]
            store = open_store()
            try:
                figures[layout] = measure(store, rows, batch, window_rows, cap)
            finally:
                store.close()
                state_rows.fits_a_chunk = chunkable  # type: ignore[assignment]
        result[name] = {
            **figures,
            "chunk_over_rows": figures["chunk"]["append_wall_us_per_row"]
            / figures["rows"]["append_wall_us_per_row"],
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument(
        "--batch", type=int, default=2_500, help="rows per append (a poll's share of a partition)"
    )
    parser.add_argument("--window-rows", type=int, default=50_000, help="rows per time window")
    parser.add_argument("--cap", type=int, default=20_000, help="rows a window keeps (max_node_examples)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privstream-bench-")))
        from privstream.stream_app.store.sqlite_state import SqliteStateStore

        count = iter(range(1000))
        backends: dict[str, Callable[[], SqlStateStore]] = {
            "sqlite": lambda: SqliteStateStore(folder / f"state-{next(count)}.sqlite3")
        }
        if not args.no_postgres:
            from privstream.stream_app.store.pg_server import PostgresServer
            from privstream.stream_app.store.postgres_state import PostgresConfig, PostgresStateStore

            server = stack.enter_context(PostgresServer().start())

            def postgres() -> SqlStateStore:
                url = server.create_database(f"bench_{next(count)}")
                return PostgresStateStore(PostgresConfig(url, password=server.password))

            backends["postgresql"] = postgres
        print(json.dumps(run(backends, args.rows, args.batch, args.window_rows, args.cap)))


if __name__ == "__main__":
    main()
