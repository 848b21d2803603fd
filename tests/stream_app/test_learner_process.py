"""Learners in child processes: every learner and sanitizer runs there exactly as in a thread
(same seeded randomness, same output), a dead child is replaced, each stream has its own child, a
fit still running at its deadline is stopped, and the release agent works on them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from functools import partial

import numpy as np
import pytest

from privstream.agents.timing import FitProcessDied, FitTimedOut
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import LEARNERS, make_learner
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, make_vector_learner
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers import SANITIZERS, make_sanitizer
from privstream.stream_app.learner_process import LearnerProcess, LearnerProcesses
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


def test_an_exception_in_the_child_is_raised_with_its_traceback_and_the_child_goes_on(pool):
    pool.submit(int).result(timeout=60)
    (child,) = pool.child_pids()
    with pytest.raises(ValueError, match="invalid literal") as raised:
        pool.submit(int, "not a number").result(timeout=60)
    assert "ValueError" in str(raised.value.__cause__)  # the child's traceback
    assert pool.submit(sum, [4, 5]).result(timeout=60) == 9 and pool.child_pids() == [child]


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


# --- one process per stream, each fit until its deadline --------------------------------------------


def test_a_fit_still_running_at_its_deadline_is_stopped_and_the_next_one_gets_a_fresh_child():
    processes = LearnerProcesses(["s"]).start()
    try:
        assert asyncio.run(processes.run("s", partial(sum, [1, 2]), deadline=None)) == 3
        (child,) = processes.child_pids("s")
        with pytest.raises(FitTimedOut):
            asyncio.run(processes.run("s", partial(time.sleep, 120), deadline=time.time() + 0.5))
        wait_until(lambda: process_gone(child), 10, what="the child killed at the deadline")
        assert asyncio.run(processes.run("s", partial(sum, [3, 4]), deadline=time.time() + 60)) == 7
        assert child not in processes.child_pids("s")
    finally:
        processes.shutdown()


def test_a_fit_killed_at_its_deadline_is_replaced_by_the_warm_spare_and_a_new_spare_starts():
    """The stream's next slot pays no start-up: the child that takes over was spawned (and imported
    the learners) while the killed one worked; a new spare is spawned as it takes over."""
    processes = LearnerProcesses(["s"]).start()
    try:
        assert asyncio.run(processes.run("s", partial(sum, [1, 2]), deadline=None)) == 3
        wait_until(lambda: processes.spare_pids("s"), 60, what="a warm spare")
        (child,), (spare,) = processes.child_pids("s"), processes.spare_pids("s")
        assert processes.startup_seconds("s") is not None and processes.startup_seconds("s") > 0
        with pytest.raises(FitTimedOut):
            asyncio.run(processes.run("s", partial(time.sleep, 120), deadline=time.time() + 0.5))
        assert asyncio.run(processes.run("s", partial(sum, [3, 4]), deadline=time.time() + 60)) == 7
        assert processes.child_pids("s") == [spare]  # the spare took over
        wait_until(lambda: processes.spare_pids("s"), 60, what="a new spare")
        assert {child, spare}.isdisjoint(processes.spare_pids("s"))
    finally:
        processes.shutdown()
    wait_until(lambda: process_gone(spare), 10, what="the spare gone at shutdown")


def test_a_child_dying_on_the_data_raises_fit_process_died_and_is_replaced():
    processes = LearnerProcesses(["s"])
    try:
        with pytest.raises(FitProcessDied):
            asyncio.run(processes.run("s", partial(os._exit, 9), deadline=time.time() + 60))
        assert asyncio.run(processes.run("s", partial(sum, [5]), deadline=None)) == 5
    finally:
        processes.shutdown()


def test_each_stream_fits_in_its_own_child_so_one_slow_fit_holds_up_no_other_stream():
    processes = LearnerProcesses(["a", "b"]).start()

    async def both() -> tuple[bool, int]:
        slow = asyncio.ensure_future(processes.run("a", partial(time.sleep, 60), deadline=None))
        quick = await processes.run("b", partial(sum, [1, 1]), deadline=None)
        still_running = not slow.done()
        slow.cancel()
        return still_running, quick

    try:
        assert asyncio.run(both()) == (True, 2)  # b's answer came while a's fit was still running
        assert set(processes.child_pids("a")).isdisjoint(processes.child_pids("b"))
    finally:
        processes.shutdown(wait=False)


class ExitsOn:
    """The generic learner, except that its process exits (as when the kernel kills it for its
    memory) when its input holds the point ``poison``."""

    def __init__(self, poison: int) -> None:
        self.inner = make_learner("generic")
        self.name = self.inner.name
        self.poison = poison

    def fit(self, hclass, xs, ys, **kwargs):
        if self.poison in xs.tolist():
            os._exit(137)
        return self.inner.fit(hclass, xs, ys, **kwargs)


async def test_a_release_whose_learner_process_dies_goes_out_as_its_default_and_the_next_one_too():
    """Count windows of 100 in a real child process per stream: window 1 holds the poison point, its
    process dies; its default (the learner on 100 copies of a public point) goes out charged like the
    others, and window 2 is fitted by a fresh child."""
    from tests.agents.test_releases import Published, RecordingMetrics, examples, feed, make_agent, policy

    processes = LearnerProcesses(["s"]).start()
    publish, metrics = Published(), RecordingMetrics()
    try:
        agent = make_agent(
            {"s": policy(ExitsOn(poison=1023))}, publish=publish, metrics=metrics, runner=processes
        )
        batch = examples(300)
        poisoned = batch[150][0].model_copy(update={"x": 1023})
        await feed(agent, [*batch[:150], (poisoned, *batch[150][1:]), *batch[151:]])
    finally:
        processes.shutdown()
    windows = [r.certificate.window.window_id.rsplit("-", 1)[1] for r in publish.releases()]
    assert windows == ["0", "1", "2"] and len(agent.ledger.entries("s")) == 3
    assert metrics.events["default_died"] == 1 and metrics.events["failed"] == 0


def test_stopping_kills_every_child_and_closes_its_pool_without_a_leak_report(tmp_path):
    """A worker that stops leaves no child behind and nothing for the interpreter to report at
    exit (a 'leaked semaphore' warning on stderr broke the worker's JSON log lines)."""
    script = tmp_path / "stop.py"
    script.write_text(
        "import os, time\n"
        "from privstream.stream_app.learner_process import LearnerProcesses\n"
        "processes = LearnerProcesses(['a', 'b']).start()\n"
        "while len(pids := processes.child_pids('a') + processes.child_pids('b')) < 2:\n"
        "    time.sleep(0.05)\n"
        "processes.stop()\n"
        "alive = []\n"
        "for pid in pids:\n"
        "    try:\n"
        "        os.kill(pid, 0)\n"
        "        alive.append(pid)\n"
        "    except ProcessLookupError:\n"
        "        pass\n"
        "print(len(pids), alive)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2 []"
    assert "leaked" not in done.stderr and done.stderr == "", done.stderr


def test_a_killed_worker_leaves_nothing_for_the_resource_tracker_to_report(tmp_path):
    """After a SIGKILL the worker cannot clean up; what it leaves is reported by multiprocessing's
    resource tracker on the worker's standard error, where it would break the JSON log. The learner
    processes hold no named semaphore, so the tracker has nothing to say."""
    script = tmp_path / "killed.py"
    script.write_text(
        "import time\n"
        "from privstream.stream_app.learner_process import LearnerProcesses\n"
        "if __name__ == '__main__':\n"
        "    processes = LearnerProcesses(['a', 'b']).start()\n"
        "    while len(processes.child_pids('a') + processes.child_pids('b')) < 2:\n"
        "        time.sleep(0.05)\n"
        "    print(processes.child_pids('a') + processes.child_pids('b'), flush=True)\n"
        "    time.sleep(120)\n"
    )
    worker = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    children = eval(worker.stdout.readline())  # a list of two pids
    assert len(children) == 2
    worker.kill()
    worker.wait(30)
    # Standard error ends when its last writer, the resource tracker, has exited.
    _, stderr = worker.communicate(timeout=60)
    assert stderr == "", stderr
    wait_until(lambda: all(process_gone(pid) for pid in children), 10, what="the children gone")


def test_the_children_run_below_the_workers_cpu_priority_and_the_spare_too():
    # Fits yield the CPU to ingest where the cores are all busy: the child and its warm spare
    # (which takes over after a kill) both run niceness steps below the worker.
    mine = os.nice(0)
    with LearnerProcess(niceness=7) as pool:
        assert pool.submit(os.nice, 0).result() == min(19, mine + 7)
        pool.kill()  # the spare takes over
        assert pool.submit(os.nice, 0).result() == min(19, mine + 7)
    with LearnerProcess() as pool:
        assert pool.submit(os.nice, 0).result() == mine


def test_the_warm_up_leaves_every_stream_with_a_warm_child():
    """A worker of many streams spawns their children one stream after another once it is ready:
    all at once, their imports took the cores from its start. Every stream ends with a warm child."""
    processes = LearnerProcesses(["a", "b", "c"])
    try:
        warm_up = processes.warm_up()
        warm_up.join(120)
        assert not warm_up.is_alive()
        started = [processes.startup_seconds(s) for s in ("a", "b", "c")]
        assert all(seconds is not None and seconds > 0 for seconds in started)
        assert all(len(processes.child_pids(s)) == 1 for s in ("a", "b", "c"))
        assert asyncio.run(processes.run("c", partial(sum, [2, 3]), deadline=None)) == 5
    finally:
        processes.shutdown()


def test_a_warm_up_after_shutdown_ends_without_spawning():
    processes = LearnerProcesses(["a", "b"])
    processes.shutdown()
    warm_up = processes.warm_up()
    warm_up.join(30)
    assert not warm_up.is_alive() and processes.child_pids("a") == processes.child_pids("b") == []
