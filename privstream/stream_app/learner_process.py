"""Learners run in a child process, off the worker's GIL.

Parts of a release are pure Python (the exact samplers of the exponential mechanism, for one),
and in a thread of the worker they hold the GIL its ingest loop needs. With the learner in a
thread, ``benchmarks/bench_release_stall.py --flow 300000`` measured ingestion during the release
of a 100,000-example window at 0.51-0.75 of its rate without a release; with this child process,
a median 0.88 (0.66-1.05 over 10 runs on a shared 2-core machine). The child is spawned (never
forked from the threaded worker) when the service is built, dies with the worker
(``PR_SET_PDEATHSIG``), and is replaced if it dies: the release it was running fails (logged; its
window is kept and retried after a restart), the next one gets a new child. Privacy is unchanged:
the child draws from the OS CSPRNG unless a test injects a seeded source, which is pickled along
with the call.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from privstream.stream_app.embedded.broker import die_with_parent


def _die_with(parent: int) -> None:
    """In the child: die with the worker, including when it died before this line ran."""
    die_with_parent()
    if os.getppid() != parent:  # already re-parented: the signal it would have sent is lost
        os._exit(1)


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
            initializer=_die_with,
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
