"""Learners in a child process: every learner and sanitizer runs there exactly as in a thread
(same seeded randomness, same output), a dead child is replaced, and the release agent works on it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from functools import partial

import numpy as np
import pytest

from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import LEARNERS, make_learner
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, make_vector_learner
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers import SANITIZERS, make_sanitizer
from privstream.stream_app.learner_process import LearnerProcess
from tests.integration.conftest import process_gone, wait_until

CLASS = parse_class_spec("thresholds:64")


@pytest.fixture(scope="module")
def pool():
    with LearnerProcess() as executor:
        yield executor


def labelled(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.random.default_rng(seed).integers(0, 64, n)
    return xs, (xs >= 20).astype(np.uint8)


def output_of(result) -> dict:
    """What a release publishes of a result (hypothesis, model or synthetic distribution)."""
    for name in ("hypothesis", "model", "distribution"):
        if hasattr(result, name):
            return getattr(result, name).to_dict()
    raise AssertionError(f"no output on {result!r}")


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_each_private_learner_gives_the_same_release_in_the_child(pool, name):
    xs, ys = labelled(2000, seed=1)
    fit = partial(make_learner(name).fit, CLASS, xs, ys, epsilon=1.0, delta=1e-6, rng=seeded(7))
    assert output_of(pool.submit(fit).result(timeout=120)) == output_of(fit())


@pytest.mark.parametrize("name", sorted(SANITIZERS))
def test_each_sanitizer_gives_the_same_release_in_the_child(pool, name):
    xs, _ = labelled(3000, seed=2)
    fit = partial(make_sanitizer(name).fit, CLASS, xs, None, epsilon=1.0, delta=1e-6, rng=seeded(8))
    assert output_of(pool.submit(fit).result(timeout=120)) == output_of(fit())


@pytest.mark.parametrize("name", sorted(VECTOR_LEARNERS))
def test_each_vector_learner_gives_the_same_release_in_the_child(pool, name):
    rng = np.random.default_rng(3)
    points = rng.uniform(0, 1, (2000, 2))
    labels = (points[:, 0] > 0.5).astype(np.uint8)
    bounds = np.array([[0.0, 1.0], [0.0, 1.0]])
    fit = partial(
        make_vector_learner(name).fit, points, labels, epsilon=1.0, delta=1e-6, bounds=bounds, rng=seeded(9)
    )
    assert output_of(pool.submit(fit).result(timeout=120)) == output_of(fit())


def test_a_killed_child_fails_its_release_and_is_replaced():
    with LearnerProcess() as pool:
        assert pool.child_pids() == []  # nothing is spawned before the first release
        running = pool.submit(time.sleep, 30)
        deadline = time.monotonic() + 60
        while not pool.child_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = pool.child_pids()
        os.kill(child, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            running.result(timeout=60)
        assert pool.submit(sum, [2, 3]).result(timeout=60) == 5  # a new child
        assert pool.child_pids() and child not in pool.child_pids()


WORKER = """
import time
from privstream.stream_app.learner_process import LearnerProcess
pool = LearnerProcess()
pool.submit(time.sleep, 120)
while not pool.child_pids():
    time.sleep(0.05)
print(pool.child_pids()[0], flush=True)
time.sleep(120)
"""


def test_the_child_dies_with_a_killed_worker():
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    try:
        child = int(worker.stdout.readline())
        assert not process_gone(child)
    finally:
        worker.kill()
        worker.wait()
    wait_until(lambda: process_gone(child), 10, what="the learner child gone after its worker's SIGKILL")
