"""What a fit killed at its deadline costs the stream's next slot: the time from the kill to the
next call's answer, with and without the warm spare learner process, and a child's start-up
(spawn, imports, first answer). Prints JSON; compare the two within one run.

    .venv/bin/python benchmarks/bench_respawn.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from functools import partial

from privstream.agents.timing import FitTimedOut
from privstream.stream_app.learner_process import LearnerProcesses


def next_call_after_a_kill(spare: bool) -> tuple[float, float | None]:
    processes = LearnerProcesses(["s"])
    processes.process("s").spare = spare
    processes.start()
    try:
        asyncio.run(processes.run("s", partial(sum, [1]), deadline=None))
        time.sleep(3.0)  # a slot's worth of time: the spare (if any) has imported the learners
        with contextlib.suppress(FitTimedOut):
            asyncio.run(processes.run("s", partial(time.sleep, 60), deadline=time.time() + 0.2))
        started = time.perf_counter()
        asyncio.run(processes.run("s", partial(sum, [2]), deadline=None))
        return time.perf_counter() - started, processes.startup_seconds("s")
    finally:
        processes.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for spare in (False, True):
        runs = [next_call_after_a_kill(spare) for _ in range(args.runs)]
        results["warm_spare" if spare else "respawn"] = {
            "next_call_after_kill_seconds": [round(r[0], 4) for r in runs],
            "median": round(statistics.median(r[0] for r in runs), 4),
            "child_startup_seconds": [round(r[1] or 0.0, 4) for r in runs],
        }
    results["ratio_spare_to_respawn"] = round(
        results["warm_spare"]["median"] / results["respawn"]["median"], 3
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
