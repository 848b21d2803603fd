"""Ingestion benchmark: the service next to the raw aiokafka consumer, in one run.

    .venv/bin/python benchmarks/bench_ingest.py [--examples 100000] [--repeat 3] [--invalid-ratio 1]

Same as ``privstream bench ingest --json`` (see privstream/stream_app/bench/ingest_rate.py), repeated, with
each run's JSON printed and the median ratios at the end; also written to
benchmarks/results/bench_ingest.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from privstream.stream_app.bench.ingest_rate import run_ingest_benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--invalid-ratio", type=float, default=0.0, help="as for privstream bench ingest")
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        result = run_ingest_benchmark(args.examples, invalid_ratio=args.invalid_ratio)
        print(json.dumps(result), flush=True)
        runs.append(result)
    keys = [
        "raw_rate",
        "service_rate",
        "ratio",
        "strict_ratio",
        "batch_rate",
        "batch_ratio",
        "p50_latency_seconds",
        "p99_latency_seconds",
    ]
    if args.invalid_ratio > 0:
        keys += [
            "mix_rate",
            "mix_ratio",
            "strict_mix_ratio",
            "mix_valid_rate",
            "flood_rate",
            "flood_ratio",
            "strict_flood_ratio",
        ]
    summary = {key: statistics.median(r[key] for r in runs) for key in keys}
    summary["runs"] = len(runs)
    print(json.dumps({"median": summary}))
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    (out / "bench_ingest.json").write_text(json.dumps({"runs": runs, "median": summary}, indent=2))


if __name__ == "__main__":
    main()
