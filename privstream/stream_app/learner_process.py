"""Learners run in child processes, one per stream, off the worker's GIL, each fit until its deadline.

Parts of a release are pure Python (the exact samplers of the exponential mechanism, for one),
and in a thread of the worker they hold the GIL its ingest loop needs. With the learner in a
thread, ``benchmarks/bench_release_stall.py --flow 300000`` measured ingestion during the release
of a 100,000-example window at 0.51-0.75 of its rate without a release; with a child process,
a median 0.88 (0.66-1.05 over 10 runs on a shared 2-core machine).

Each stream has its own child (:class:`LearnerProcesses`), so one stream's fit never queues behind
another's, and a fit still running at its release's deadline is stopped: the child is killed
(its release's default goes out, see :mod:`privstream.agents.timing`) and a fresh child is
spawned at once, so the stream's next slot starts with a process ready. A child is spawned
(never forked from the threaded worker) when the service starts, imports the learners before its
first fit, dies with the worker (``PR_SET_PDEATHSIG``), and is replaced if it dies. Privacy is
unchanged: the child draws from the OS CSPRNG unless a test injects a seeded source, which is
pickled along with the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from privstream.agents.timing import FitProcessDied, FitTimedOut
from privstream.stream_app.embedded.broker import die_with_parent

#: Imported by a child before its first fit, so a fresh child (after a kill) is ready at once.
LEARNER_MODULES = (
    "privstream.agents.fits",
    "privstream.learning.private_learners",
    "privstream.learning.private_learners.vector_base",
    "privstream.learning.sanitizers",
)


def _child_start(parent: int) -> None:
    """In the child: die with the worker (including when it died before this line ran), then
    import the learners."""
    die_with_parent()
    if os.getppid() != parent:  # already re-parented: the signal it would have sent is lost
        os._exit(1)
    for name in LEARNER_MODULES:
        importlib.import_module(name)


class LearnerProcess(Executor):
    """An executor of one spawned child process, started lazily and replaced when it dies.

    >>> with LearnerProcess() as pool:
    ...     pool.submit(sum, [1, 2, 3]).result()
    6
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_child_start,
            initargs=(os.getpid(),),
        )

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = self._new_pool()
            try:
                return self._pool.submit(fn, *args, **kwargs)
            except BrokenProcessPool:  # the child died (killed, out of memory): start another
                self._pool.shutdown(wait=False)
                self._pool = self._new_pool()
                return self._pool.submit(fn, *args, **kwargs)

    def start(self) -> LearnerProcess:
        """Spawn the child now (it takes about a second of CPU to import), not in the first release."""
        self.submit(int)
        return self

    def kill(self, restart: bool = True) -> None:
        """Kill the child (its running call fails with ``BrokenProcessPool``) and spawn a new one
        (``restart``; without it, as the worker stops, wait until the pool has let go of the child:
        its queues' semaphores are released, never reported leaked at exit)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            for pid in list(getattr(pool, "_processes", None) or {}):
                with contextlib.suppress(ProcessLookupError):  # it died on its own meanwhile
                    os.kill(pid, signal.SIGKILL)
            pool.shutdown(wait=not restart, cancel_futures=True)
        if restart:
            self.start()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)
                self._pool = None

    def child_pids(self) -> list[int]:
        """The running child's pid (for tests and diagnostics), or none before the first release."""
        with self._lock:
            processes = getattr(self._pool, "_processes", None) or {}
            return list(processes)


class LearnerProcesses:
    """The service's :class:`~privstream.agents.timing.FitRunner`: a :class:`LearnerProcess` per
    stream; a fit not done at its deadline (on ``clock``, the release agent's) has its child killed.

    >>> import asyncio
    >>> processes = LearnerProcesses(["s"])
    >>> asyncio.run(processes.run("s", int, deadline=None)), processes.shutdown()
    (0, None)
    """

    def __init__(self, stream_ids: Iterable[str] = (), clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._processes = {stream_id: LearnerProcess() for stream_id in stream_ids}

    def process(self, stream_id: str) -> LearnerProcess:
        if stream_id not in self._processes:
            self._processes[stream_id] = LearnerProcess()
        return self._processes[stream_id]

    def start(self) -> LearnerProcesses:
        """Spawn every stream's child now (see :meth:`LearnerProcess.start`)."""
        for process in self._processes.values():
            process.start()
        return self

    async def run(self, stream_id: str, call: Callable[[], Any], deadline: float | None) -> Any:
        process = self.process(stream_id)
        work = asyncio.wrap_future(process.submit(call))
        try:
            if deadline is None:
                return await work
            return await asyncio.wait_for(work, timeout=max(0.0, deadline - self.clock()))
        except TimeoutError:
            process.kill()  # the next slot starts with a fresh child
            raise FitTimedOut(f"stream {stream_id}: not finished at its deadline") from None
        except BrokenProcessPool as exc:
            raise FitProcessDied(f"stream {stream_id}: {exc}") from exc

    def shutdown(self, wait: bool = True) -> None:
        for process in self._processes.values():
            process.shutdown(wait=wait, cancel_futures=True)

    def stop(self) -> None:
        """As the worker stops: every child killed (a fit in flight is abandoned; its reservation is
        resumed after a restart) and its pool closed."""
        for process in self._processes.values():
            process.kill(restart=False)

    def child_pids(self, stream_id: str) -> list[int]:
        return self.process(stream_id).child_pids()
