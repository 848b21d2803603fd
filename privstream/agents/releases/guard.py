"""The deadline guard: ingest's work never competes with a node's preparation or with a release at
its deadline. Ingest waits between the parts of a poll while a node's input is being loaded and
its defaults computed (until they are ready, or its deadline), and while a release not yet
published has its deadline within the guard of the clock (before it or after it: until it is out,
or the guard past its deadline). However much was polled, whether a fit is in time and when a
release lands are not the flood's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from privstream.agents.releases.state import StreamState
from privstream.agents.timing import sleep_until

#: Ingest holds its work from this long before a release's deadline until the release is out, or
#: until this long after the deadline (a publication stuck on Kafka must not stop ingest for good):
#: the worker's event loop and CPU are the publisher's at the deadline, whatever was polled. Above
#: the processing time of one part of a poll (:data:`privstream.agents.pipeline.CHUNK_EXAMPLES`
#: rows), except for reading the JSON of a message of several MiB.
DEADLINE_GUARD_SECONDS = 0.25


class DeadlineGuard:
    """The nodes being prepared (the streams' states) and the releases due and not yet out."""

    def __init__(self, clock: Callable[[], float], streams: Iterable[StreamState]):
        self.clock = clock
        self._streams = streams
        # Releases scheduled and not yet out: their deadline, and an event set once they are out.
        self._due: dict[int, tuple[float, asyncio.Event]] = {}

    def due(self, deadline: float | None) -> asyncio.Event:
        """A release due at ``deadline`` (None: none, nothing to guard); pass the event returned to
        :meth:`out` once it is out."""
        out = asyncio.Event()
        if deadline is not None:
            self._due[id(out)] = (deadline, out)
        return out

    def out(self, release: asyncio.Event) -> None:
        """The release is out: ingest need no longer wait for it."""
        release.set()
        self.forget(release)

    def forget(self, release: asyncio.Event) -> None:
        """Stop guarding the release (out or abandoned)."""
        self._due.pop(id(release), None)

    async def clear(self, guard: float = DEADLINE_GUARD_SECONDS) -> None:
        """Return once no node is being prepared and no release not yet out has its deadline
        within ``guard`` seconds of the clock."""
        while True:
            now = self.clock()
            waits = [
                (state.preparing, state.prepared)
                for state in self._streams
                if state.preparing is not None and now < state.preparing
            ]
            waits += [
                (deadline + guard, out)
                for deadline, out in self._due.values()
                if deadline - guard <= now < deadline + guard
            ]
            if not waits:
                return
            until, done = min(waits, key=lambda wait: wait[0])
            pending = {
                asyncio.ensure_future(done.wait()),
                asyncio.ensure_future(sleep_until(self.clock, until)),
            }
            try:
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in pending:
                    wait.cancel()
