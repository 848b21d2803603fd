"""Ledger benchmark: charges per second of the SQLite and PostgreSQL ledgers, side by side.

    .venv/bin/python benchmarks/bench_ledger.py [--seconds 3] [--repeat 3]

Same as ``privstream bench ledger --json`` (see privstream/stream_app/bench/ledger_rate.py; a
throwaway PostgreSQL server is started), repeated, with each run's JSON printed and the median
PostgreSQL/SQLite ratios at the end; also written to benchmarks/results/bench_ledger.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from privstream.stream_app.bench.ledger_rate import run_ledger_benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        result = run_ledger_benchmark(["sqlite", "postgresql"], seconds=args.seconds)
        print(json.dumps(result), flush=True)
        runs.append(result)
    ratios = {
        workload: {
            n: statistics.median(r["postgresql_over_sqlite"][workload][n] for r in runs) for n in rates
        }
        for workload, rates in runs[0]["postgresql_over_sqlite"].items()
    }
    summary = {"median_postgresql_over_sqlite": ratios, "runs": runs}
    print(json.dumps({"median_postgresql_over_sqlite": ratios}))
    out = Path(__file__).parent / "results" / "bench_ledger.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
