"""When releases appear: the clock, each stream's publication slots, and fits with a deadline.

A release's timing is public (when its record lands on the topic, the record's timestamp, when a
public page first counts it), so it must be a function of the configuration and the clock, never
of how long a learner ran on the data. The model is the predictable transaction (Haeberlen,
Pierce and Narayan, "Differential privacy under fire", USENIX Security 2011): every release has a
deadline fixed when its node closes; at the deadline the publisher sends what is ready, or a
data-independent default release charged the same.

**Slots.** Each node's release gets one slot on its stream's learner (``publish_delay_seconds``,
or its level's slot where the service derived one per level). A node that closes at ``c`` (the
end of its time window on the worker's clock, or the moment its count window's last example was
taken in) takes the stream's next slot: it starts at ``c`` or when the previous node's slot ends,
whichever is later, and the slot's end is the release's deadline. Nodes that close together (the
tree's levels, a burst of count windows) take consecutive slots in the schedule's order. Every
deadline is a function of the close moments and the configuration only.

>>> slots = Slots()
>>> [slots.next(10.0, length=2.0) for _ in range(3)], slots.next(30.0, length=1.5)
([12.0, 14.0, 16.0], 31.5)

**Fits.** A :class:`FitRunner` runs a learner for a stream and gives up at a deadline
(:class:`FitTimedOut`): the service's runner kills the stream's learner process then, so the next
slot starts on time; a process that died on the data raises :class:`FitProcessDied`. Either way
the release agent publishes the default release it prepared before the fit.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_REASONS",
    "Clock",
    "ExecutorFits",
    "FitProcessDied",
    "FitRunner",
    "FitTimedOut",
    "Slots",
    "SystemClock",
    "sleep_until",
]


#: Why a release's default went out instead of its learner's output (an operator metric's label).
DEFAULT_REASONS = ("unfinished", "failed", "died")


@runtime_checkable
class Clock(Protocol):
    """The worker's clock: Unix seconds, and a way to wait for a moment of it."""

    def __call__(self) -> float: ...

    async def sleep_until(self, moment: float) -> None: ...


class SystemClock:
    """The wall clock (``time.time``).

    >>> clock = SystemClock()
    >>> abs(clock() - time.time()) < 1.0
    True
    """

    def __call__(self) -> float:
        return time.time()

    async def sleep_until(self, moment: float) -> None:
        while (left := moment - time.time()) > 0:
            await asyncio.sleep(left)


async def sleep_until(clock: Callable[[], float], moment: float) -> None:
    """Wait until ``clock()`` reaches ``moment``: the clock's own way if it has one, else by the wall
    clock (a plain function such as ``time.time``)."""
    if isinstance(clock, Clock):
        await clock.sleep_until(moment)
        return
    while (left := moment - clock()) > 0:
        await asyncio.sleep(left)


@dataclass
class Slots:
    """A stream's publication slots (module docstring): each node's deadline is the end of its slot."""

    last_end: float = -math.inf

    def next(self, closed_at: float, length: float) -> float:
        """The deadline of a node that closed at ``closed_at`` and needs a slot of ``length``: its
        slot starts then, or when the previous slot ends if that is later."""
        end = max(closed_at, self.last_end) + length
        self.last_end = end
        return end

    def taken(self, deadline: float) -> None:
        """A deadline fixed before (a reservation made before a restart): later slots follow it."""
        self.last_end = max(self.last_end, deadline)


class FitTimedOut(Exception):
    """The fit had not finished at its deadline (its process was stopped)."""


class FitProcessDied(Exception):
    """The process running the fit died (killed, out of memory) before it finished."""


class FitRunner(Protocol):
    """Runs a stream's learner calls, one at a time per stream, each until a deadline."""

    async def run(self, stream_id: str, call: Callable[[], Any], deadline: float | None) -> Any:
        """``call()``'s result; :class:`FitTimedOut` if it is not done at ``deadline`` (on the release
        agent's clock; ``None``: no deadline), :class:`FitProcessDied` if its process died; the call's
        own exception if it raised."""
        ...


class ExecutorFits:
    """A :class:`FitRunner` over one executor (``None``: the event loop's default threads), for tests
    and offline use: at the deadline the call is abandoned (a thread cannot be stopped; it finishes
    in the background and its result is dropped).

    >>> async def demo():
    ...     return await ExecutorFits(SystemClock()).run("s", lambda: 6 * 7, deadline=None)
    >>> asyncio.run(demo())
    42
    """

    def __init__(self, clock: Callable[[], float], executor: Executor | None = None) -> None:
        self.clock = clock
        self.executor = executor

    async def run(self, stream_id: str, call: Callable[[], Any], deadline: float | None) -> Any:
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self.executor, call)
        try:
            if deadline is None:
                return await work
            timer = asyncio.ensure_future(sleep_until(self.clock, deadline))
            try:
                done, _ = await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
            if work not in done:
                work.add_done_callback(_drop_result)
                raise FitTimedOut(f"not finished at {deadline:.3f}")
            return work.result()
        except BrokenProcessPool as exc:
            raise FitProcessDied(str(exc)) from exc


def _drop_result(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned fit's outcome, so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()
