"""The worker's stop on Ctrl-C or SIGTERM, without fixed waits.

mode's ``Worker`` stops the service gracefully (commit, close, leave the group) and then, before
it closes the event loop, waits up to 1 s for the remaining tasks to end by themselves and 1 s
more for nothing (a "sentinel" sleep): two seconds of every stop, whatever was left. Here the
tasks left after the service stopped are cancelled at once and awaited, at most
:data:`CANCELLED_TASKS_SECONDS`. After that, all the interpreter would still do is finalize: a
garbage collection of the whole heap, 1-2 s for a worker's; everything was committed and closed
by then, so :func:`exit_without_finalizing` skips it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import NoReturn

import faust

#: How long the tasks left after the service stopped get to handle their cancellation.
CANCELLED_TASKS_SECONDS = 0.5


class PromptWorker(faust.Worker):
    """``faust.Worker`` whose last step cancels what is left instead of sleeping (see the module)."""

    def _gather_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks(loop=self.loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            gathered = asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                self.loop.run_until_complete(asyncio.wait_for(gathered, CANCELLED_TASKS_SECONDS))

    async def _sentinel_task(self) -> None:
        await asyncio.sleep(0)


def exit_without_finalizing(status: int) -> NoReturn:
    """Exit at once with ``status`` once the service has stopped cleanly: logs and standard streams
    flushed, the interpreter's finalization (a collection of the whole heap) skipped."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
