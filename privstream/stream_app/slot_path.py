"""What a node's slot spends outside the learner's fit, measured on public inputs at start-up.

Between a node's close and its deadline the service builds the node in the state store and reads
it back as the learner's input (``load``), and sends that input to the stream's learner process
(``ship``); the learner process then prepares it (a random order and the cap, inside the fit call)
and runs the default and the fit (:func:`privstream.agents.fits.slot_seconds`). The first two are
measured here, in the worker, on public rows as many as the level's largest input
(:func:`privstream.agents.releases.largest_input`) taken in through the stream's own ingest rule
(so a capped time window keeps its cap, as in service): they are functions of that public size,
the configuration and the machine.

>>> from privstream.agents.releases import ReleasePolicy
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> policy = ReleasePolicy("s", parse_class_spec("thresholds:64"), (), window_size=50)
>>> 0 <= load_seconds(policy, 0) < 60
True
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from privstream.agents.releases import ReleasePolicy, largest_input
from privstream.agents.releases.nodes import build_node, ingest_rule
from privstream.agents.windows import count_family, node_examples
from privstream.learning.planning import runtime_inputs
from privstream.learning.randomness import seeded
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.store.sqlite_state import SqliteStateStore

__all__ = ["load_seconds", "public_rows", "ship_seconds"]


def public_rows(policy: ReleasePolicy, level: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The level's largest input of public examples (the planner's realizable input)."""
    space = policy.hypothesis_class if policy.feature_bounds is None else policy.feature_bounds
    assert space is not None
    _, xs, ys = runtime_inputs(space, largest_input(policy, level), seed)[0]
    return xs, ys


def load_seconds(policy: ReleasePolicy, level: int, seed: int = 0) -> float:
    """Building a node of the level's largest input from its stored rows and reading it back as
    the learner's input, in a state store in memory (every row a user of its own at the user level:
    the most per-user work)."""
    xs, ys = public_rows(policy, level, seed)
    n = len(ys)
    store = SqliteStateStore(":memory:")
    try:
        timed = policy.window_kind == "time"
        if not timed:  # one count window of exactly the input's size
            policy = dataclasses.replace(policy, window_size=max(n, 1))
        users = [f"u{i}" for i in range(n)] if policy.privacy_unit == "user" else [None] * n
        points = xs.tolist()
        rows = [(i, points[i], int(ys[i]), users[i], 0 if timed else None) for i in range(n)]
        keep, priorities = ingest_rule(policy, seeded(seed)) if timed else (None, None)
        drawn = priorities(n) if priorities is not None else None
        store.append_many(policy.stream_id, 0, rows, keep_first=keep, priorities=drawn)
        family = policy.family if timed else count_family(store.generation, policy.window_size)
        started = time.perf_counter()
        node_examples(build_node(store, policy, family, 0, 0))
        return time.perf_counter() - started
    finally:
        store.close()


def ship_seconds(processes: LearnerProcesses, policy: ReleasePolicy, level: int, seed: int = 0) -> float:
    """Sending the level's largest input to the stream's learner process and back (a round trip of
    the arrays a fit call carries)."""
    xs, ys = public_rows(policy, level, seed)
    started = time.perf_counter()
    processes.process(policy.stream_id).submit(len, (xs, ys)).result()
    return time.perf_counter() - started
