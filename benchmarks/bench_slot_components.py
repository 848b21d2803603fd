"""A node's slot, part by part, at the input cap: the service's own measurement
(:func:`privstream.stream_app.publication.measure_slot`, what the worker runs at start-up and
``privstream plan`` reports) for a ``thresholds:65536`` stream (generic learner, 6 s time windows,
``expected_size`` 1,000, ``max_node_examples`` 2,000), level 0: ``load`` (build the node in the
state store and read it back), ``ship`` (the input to the learner process and back),
``default``, ``prepare`` (random order and cap) and ``fit`` (worst over the public runtime
inputs), ``respawn`` (a learner process's start-up) and the slot the worker derives from them
(:func:`~privstream.stream_app.publication.derive_slots`, measured again in the same run). Prints
JSON.

    .venv/bin/python benchmarks/bench_slot_components.py
"""

from __future__ import annotations

import json

from privstream.agents.releases import Product, ReleasePolicy
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.publication import derive_slots, learner_startup, measure_slot

TIMER = 0.6  # the timer's period of 6 s time windows


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
    processes = LearnerProcesses(["s"]).start()
    try:
        measured = measure_slot(policy, processes, 0, learner_startup(processes, "s"))
        derived = derive_slots({"s": policy}, processes, timer_seconds=TIMER)["s"]
    finally:
        processes.shutdown()
    print(
        json.dumps(
            {
                "class": "thresholds:65536",
                "max_node_examples": 2000,
                **measured.to_dict(TIMER),
                "derived_slot_level0": derived.level_slots[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
