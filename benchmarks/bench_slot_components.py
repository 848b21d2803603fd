"""A node's slot, component by component, at the input cap: the service's own measurements for a
``thresholds:65536`` stream (generic learner, 6 s time windows, ``expected_size`` 1,000,
``max_node_examples`` 2,000), level 0. ``load`` (build the node in the state store and read it
back), ``ship`` (the input to the learner process and back), ``prepare`` (random order and cap),
``default`` and ``fit`` (worst over the public runtime inputs), ``respawn`` (a learner process's
start-up, which the warm spare takes off the slot) and the derived slot. Prints JSON.

    .venv/bin/python benchmarks/bench_slot_components.py
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable

from privstream.agents.fits import prepared_input
from privstream.agents.releases import Product, ReleasePolicy, slot_workload
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.publication import derive_slots
from privstream.stream_app.slot_path import load_seconds, public_rows, ship_seconds


def seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # a failing fit still takes its time
        call()
    return time.perf_counter() - started


def main() -> None:
    policy = ReleasePolicy(
        "s",
        parse_class_spec("thresholds:65536"),
        (Product("hypotheses", make_learner("generic"), 1.0),),
        window_kind="time",
        window_seconds=6.0,
        expected_size=1000,
        max_node_examples=2000,
    )
    xs, ys = public_rows(policy, 0)
    ((default, fits),) = slot_workload(policy, 0)
    processes = LearnerProcesses(["s"]).start()
    try:
        derived = derive_slots({"s": policy}, processes, timer_seconds=0.6)["s"]
        components = {
            "load": load_seconds(policy, 0),
            "ship": ship_seconds(processes, policy, 0),
            "prepare": seconds(lambda: prepared_input(xs, ys, seeded(0), policy.max_node_examples)),
            "default": seconds(default),
            "fit": max(seconds(fit) for fit in fits),
            "respawn": processes.startup_seconds("s"),
        }
    finally:
        processes.shutdown()
    print(
        json.dumps(
            {
                "class": "thresholds:65536",
                "max_node_examples": 2000,
                "seconds": {k: round(v or 0.0, 4) for k, v in components.items()},
                "derived_slot_level0": derived.level_slots[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
