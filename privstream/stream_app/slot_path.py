"""What a node's slot spends outside the learner's fit, measured on public inputs at start-up.

Between a node's close and its deadline the service builds the node in the state store and reads
it back as the learner's input (``load``), and sends that input to the stream's learner process
(``ship``); the learner process then prepares it (a random order and the cap, inside the fit call)
and runs the default and the fit (:func:`privstream.agents.fits.slot_seconds`). The first two are
measured here, in the worker, on public rows as many as the level's largest input
(:func:`privstream.agents.releases.largest_input`) taken in through the stream's own ingest rule
(so a capped time window keeps its cap, as in service): they are functions of that public size,
the configuration and the machine. So is ``score``, a window's quality estimates
(:mod:`privstream.agents.releases.quality`): with ``quality_epsilon`` set, a level-0 node's slot
starts with scoring up to ``top_level + 1`` earlier releases on its rows, in the worker.

>>> from privstream.agents.releases import ReleasePolicy
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> policy = ReleasePolicy("s", parse_class_spec("thresholds:64"), (), window_size=50)
>>> 0 <= load_seconds(policy, 0) < 60
True
>>> score_seconds(policy, 0)  # no quality_epsilon: nothing is scored
0.0
"""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from privstream.agents.interfaces import WindowData
from privstream.agents.releases import ReleasePolicy, largest_input, learner_privacy
from privstream.agents.releases.nodes import build_node, ingest_rule
from privstream.agents.releases.quality import hypotheses_product, predictions
from privstream.agents.releases.workload import learner_call, stand_in
from privstream.agents.windows import count_family, node_examples
from privstream.learning.errors import InvariantError
from privstream.learning.planning import runtime_inputs
from privstream.learning.quality import estimate_error
from privstream.learning.randomness import seeded
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.store.sqlite_state import SqliteStateStore

__all__ = ["load_seconds", "public_rows", "score_seconds", "ship_seconds"]


def public_rows(policy: ReleasePolicy, level: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The level's largest input of public examples (the planner's realizable input)."""
    space = policy.hypothesis_class if policy.feature_bounds is None else policy.feature_bounds
    if space is None:
        raise InvariantError(f"stream {policy.stream_id}: neither a hypothesis class nor feature bounds")
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


def score_seconds(policy: ReleasePolicy, level: int, seed: int = 0) -> float:
    """A node's quality estimates, as its level's slot may have to compute them before its
    defaults: only a level-0 node's window scores, at most ``top_level + 1`` releases (the nodes
    ending just before it), each on the window's rows, as many as the level's largest input. Each
    estimate is timed as the scorer computes it, in the worker: the scored release's predictions on
    the rows and the noisy error count. The scored hypothesis is the default release's, made here
    from the product's stand-in input (public, like every release scored)."""
    product = hypotheses_product(policy)
    if policy.quality_epsilon is None or product is None or level != 0:
        return 0.0
    xs, ys = public_rows(policy, level, seed)
    sample = WindowData(xs[:0], ys[:0], np.zeros(0, object), np.zeros(0, np.int64))
    epsilon, delta = learner_privacy(policy, *product.cost(level))
    call = learner_call(policy, product, epsilon, delta, level, seeded(seed))
    release = call(*stand_in(policy, sample, level))
    body = json.dumps({"hypothesis": release.published_fields()["hypothesis"]}).encode()
    size_public = policy.window_kind == "count" and policy.privacy_unit == "example"
    quality = policy.quality_epsilon
    started = time.perf_counter()
    for _ in range(policy.top_level + 1):
        estimate_error(predictions(body, xs), ys, epsilon=quality, size_public=size_public, rng=seeded(seed))
    return time.perf_counter() - started
