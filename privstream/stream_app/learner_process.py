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

A child takes its calls over a pipe, one at a time, and holds no named semaphore (the queues of a
``ProcessPoolExecutor`` hold five): when the worker is killed, multiprocessing's resource tracker
has nothing to clean up after it and writes nothing to the worker's standard error, whose lines
stay JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from privstream.agents.timing import FitProcessDied, FitTimedOut
from privstream.stream_app.embedded.broker import die_with_parent

log = logging.getLogger(__name__)

#: Imported by a child before its first fit, so a fresh child (after a kill) is ready at once.
LEARNER_MODULES = (
    "privstream.agents.fits",
    "privstream.learning.private_learners",
    "privstream.learning.private_learners.vector_base",
    "privstream.learning.sanitizers",
)


def _child_start(parent: int, niceness: int = 0) -> None:
    """In the child: die with the worker (including when it died before this line ran), yield
    the CPU to the worker (``niceness``: see :class:`LearnerProcess`), then import the learners."""
    die_with_parent()
    if os.getppid() != parent:  # already re-parented: the signal it would have sent is lost
        os._exit(1)
    if niceness > 0:
        with contextlib.suppress(OSError):  # a platform without nice: the learner runs as is
            os.nice(niceness)
    for name in LEARNER_MODULES:
        importlib.import_module(name)


class RemoteTraceback(Exception):
    """The traceback of an exception raised in the child, attached as its ``__cause__``."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def _serve(calls: Connection, parent: int, niceness: int = 0) -> None:
    """The child's loop: each call received is answered with ``(True, result)`` or ``(False,
    exception, traceback)``; the loop ends when the worker closes its end of the pipe."""
    _child_start(parent, niceness)
    while True:
        try:
            fn, args, kwargs = calls.recv()
        except EOFError:
            return
        try:
            answer: tuple[Any, ...] = (True, fn(*args, **kwargs))
        except BaseException as exc:  # every failure goes back to the caller
            answer = (False, exc, traceback.format_exc())
        try:
            calls.send(answer)
        except Exception as exc:  # the result or exception cannot be pickled
            calls.send((False, RuntimeError(f"the learner's answer could not be sent back: {exc!r}"), ""))


@dataclass
class _Call:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


class _Child:
    """One spawned process and the worker's end of its pipe."""

    def __init__(self, niceness: int = 0) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child_end = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child_end, os.getpid(), niceness), name="privstream-learner", daemon=True
        )
        self.process.start()
        child_end.close()  # the child's end lives in the child only: its death ends our reads

    def call(self, call: _Call) -> tuple[Any, ...]:
        """The child's answer to ``call``; ``EOFError`` or ``OSError`` if the child died."""
        self.send(call)
        return self.receive()

    def send(self, call: _Call) -> None:
        self.connection.send((call.fn, call.args, call.kwargs))

    def receive(self) -> tuple[Any, ...]:
        answer: tuple[Any, ...] = self.connection.recv()
        return answer

    def kill(self) -> None:
        if self.process.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # it died on its own meanwhile
                os.kill(self.process.pid, signal.SIGKILL)

    def close(self, wait: bool) -> None:
        """Close the pipe (an idle child exits on it) and, with ``wait``, reap the child."""
        self.connection.close()
        if wait:
            self.process.join(10)
            if self.process.is_alive():
                self.kill()
                self.process.join()


class LearnerProcess(Executor):
    """An executor of one spawned child process, started lazily and replaced when it dies.

    Calls run one at a time, in the order submitted; a call whose child dies fails with
    ``BrokenProcessPool``, and the next call gets a new child: the **warm spare**, a second child
    spawned while the first one works, which has imported the learners by then, so a fit killed
    at its deadline is replaced at once and the stream's next slot pays no start-up; a new spare
    is spawned as the spare takes over. :attr:`startup_seconds` is how long a child took from its
    spawn to its first answer (the time a spare needs to be ready again).

    ``niceness`` lowers the children's CPU priority (``nice``) below the worker's: where the
    cores are all busy, a fit takes what ingest leaves instead of slowing the stream it releases
    (a release tree's fits can take far more CPU than learning its examples online). A fit still
    has its slot, measured at the same priority, and a core of its own where one is free.

    >>> with LearnerProcess() as pool:
    ...     pool.submit(sum, [1, 2, 3]).result()
    6
    """

    def __init__(self, niceness: int = 0) -> None:
        self.niceness = niceness
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._child: _Child | None = None
        self._spare: _Child | None = None
        self._dispatcher: threading.Thread | None = None
        self._closed = False
        #: Seconds from a child's spawn to its first answer (the first child's; None before it).
        self.startup_seconds: float | None = None
        self.spare = True  # keep a warm spare (tests of a single child turn it off)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a learner process after its shutdown")
            if self._dispatcher is None:
                # The thread that spawns the children: a child dies with it (PR_SET_PDEATHSIG
                # follows the thread), and it lives until shutdown.
                self._dispatcher = threading.Thread(
                    target=self._dispatch, name="privstream-learner-calls", daemon=True
                )
                self._dispatcher.start()
            self._calls.put(_Call(future, fn, args, kwargs))
        return future

    def _dispatch(self) -> None:
        while (call := self._calls.get()) is not None:
            if not call.future.set_running_or_notify_cancel():
                continue
            try:
                fresh = self._child is None
                started = time.perf_counter()
                child = self._current_child()
            except Exception as exc:  # no process could be spawned (out of memory, out of pids)
                call.future.set_exception(BrokenProcessPool(f"no learner process could start: {exc!r}"))
                continue
            try:
                child.send(call)
                self._ensure_spare()  # while the child works: ready before the next kill
                answer = child.receive()
                if fresh and self.startup_seconds is None:
                    self.startup_seconds = time.perf_counter() - started
            except (EOFError, OSError):  # killed at its deadline, out of memory, or died on the data
                self._forget(child)
                exitcode = child.process.exitcode
                call.future.set_exception(
                    BrokenProcessPool(f"the learner process died (exit code {exitcode})")
                )
                continue
            except Exception as exc:  # the call itself could not be pickled: the child is fine
                call.future.set_exception(exc)
                continue
            if answer[0]:
                call.future.set_result(answer[1])
            else:
                _, error, text = answer
                if text:
                    error.__cause__ = RemoteTraceback(text)
                call.future.set_exception(error)
        with self._lock:
            last, self._child = self._child, None
            spare, self._spare = self._spare, None
        for leftover in (last, spare):
            if leftover is not None:
                leftover.close(wait=True)

    def _ensure_spare(self) -> None:
        """Spawn the warm spare if there is none (in the dispatching thread: a child dies with the
        thread that spawned it)."""
        spare = self._spare
        if not self.spare or self._closed or (spare is not None and spare.process.is_alive()):
            return
        if spare is not None:
            spare.close(wait=True)
        with contextlib.suppress(Exception):  # no spare now (out of pids): the next call spawns
            spare = _Child(self.niceness)
            with self._lock:
                self._spare = spare

    def _current_child(self) -> _Child:
        # Only the dispatching thread replaces the child, so it spawns without the lock: a submit
        # from the event loop never waits for a process to start.
        child = self._child
        if child is not None and child.process.is_alive():
            return child
        if child is not None:  # died between calls: reap it
            child.close(wait=True)
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.process.is_alive():
            child = spare  # warm: it imported the learners while the last child worked
        else:
            if spare is not None:
                spare.close(wait=True)
            child = _Child(self.niceness)
        with self._lock:
            self._child = child
        return child

    def _forget(self, child: _Child) -> None:
        with self._lock:
            if self._child is child:
                self._child = None
        child.kill()
        child.close(wait=True)

    def start(self) -> LearnerProcess:
        """Spawn the child now, in the background (it takes about a second of CPU to import), not in
        the first release."""
        self.submit(int)
        return self

    def kill(self, restart: bool = True) -> None:
        """Kill the child (its running call fails with ``BrokenProcessPool``) and spawn a new one
        (``restart``; without it, as the worker stops, the calls not started are cancelled and the
        dispatching thread ends)."""
        with self._lock:
            child = self._child
        if child is not None:
            child.kill()
        if restart:
            if not self._closed:  # a release timed out while the worker stops: no new child
                self.start()
        else:
            self.shutdown(wait=True, cancel_futures=True)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            dispatcher = self._dispatcher
            if cancel_futures:
                with contextlib.suppress(queue.Empty):
                    while (call := self._calls.get_nowait()) is not None:
                        call.future.cancel()
            self._calls.put(None)  # after the calls already submitted
        if dispatcher is not None and wait:
            dispatcher.join()

    def child_pids(self) -> list[int]:
        """The running child's pid (for tests and diagnostics), or none before the first release."""
        with self._lock:
            child = self._child
        if child is None or child.process.pid is None or not child.process.is_alive():
            return []
        return [child.process.pid]

    def spare_pids(self) -> list[int]:
        """The warm spare's pid, if one is running."""
        with self._lock:
            spare = self._spare
        if spare is None or spare.process.pid is None or not spare.process.is_alive():
            return []
        return [spare.process.pid]


class LearnerProcesses:
    """The service's :class:`~privstream.agents.timing.FitRunner`: a :class:`LearnerProcess` per
    stream; a fit not done at its deadline (on ``clock``, the release agent's) has its child killed.

    >>> import asyncio
    >>> processes = LearnerProcesses(["s"])
    >>> asyncio.run(processes.run("s", int, deadline=None)), processes.shutdown()
    (0, None)
    """

    def __init__(
        self, stream_ids: Iterable[str] = (), clock: Callable[[], float] = time.time, niceness: int = 0
    ) -> None:
        self.clock = clock
        self.niceness = niceness
        self._processes = {stream_id: LearnerProcess(niceness) for stream_id in stream_ids}

    def process(self, stream_id: str) -> LearnerProcess:
        if stream_id not in self._processes:
            self._processes[stream_id] = LearnerProcess(self.niceness)
        return self._processes[stream_id]

    def start(self) -> LearnerProcesses:
        """Spawn every stream's child now (see :meth:`LearnerProcess.start`)."""
        for process in self._processes.values():
            process.start()
        return self

    def warm_up(self) -> threading.Thread:
        """Spawn the streams' children one stream after another, in a background thread: each
        stream's child (and its warm spare beside it) once the previous stream's child answered.

        A child takes about a second of CPU to import the learners. Spawned all at once, a worker
        of many streams ran twice as many imports together, and even at a lower priority their
        sum took the cores from the worker's own start (measured with 24 streams: the public
        listener's process took 21 s to listen instead of 3). A stream whose call comes before
        its turn spawns its child at once, as without a warm-up."""

        def one_by_one() -> None:
            for stream_id, process in list(self._processes.items()):
                try:
                    process.submit(int).result()
                except (RuntimeError, BrokenProcessPool) as exc:  # shut down meanwhile, or no pid
                    log.debug("learner process of stream %s not warmed up: %s", stream_id, exc)
                    if isinstance(exc, RuntimeError):
                        return

        thread = threading.Thread(target=one_by_one, name="privstream-learner-warm-up", daemon=True)
        thread.start()
        return thread

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

    def spare_pids(self, stream_id: str) -> list[int]:
        return self.process(stream_id).spare_pids()

    def startup_seconds(self, stream_id: str) -> float | None:
        """How long the stream's first child took to start (spawn, imports, first answer)."""
        return self.process(stream_id).startup_seconds
