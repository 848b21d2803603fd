"""The worker's stop: what is left after the service stopped is cancelled, not waited for."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import types

from privstream.stream_app.shutdown import PromptWorker


def test_the_tasks_left_are_cancelled_and_awaited_and_nothing_sleeps() -> None:
    loop = asyncio.new_event_loop()
    try:
        cleaned: list[str] = []

        async def forever() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                cleaned.append("forever")

        task = loop.create_task(forever())
        loop.run_until_complete(asyncio.sleep(0))
        fake = types.SimpleNamespace(loop=loop)
        PromptWorker._gather_all(fake)  # type: ignore[arg-type]
        assert task.cancelled() and cleaned == ["forever"]
        sentinel = loop.create_task(PromptWorker._sentinel_task(fake))  # type: ignore[arg-type]
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(asyncio.sleep(0))
        assert sentinel.done()  # mode's sleeps a second here
    finally:
        loop.close()


def test_exiting_without_finalizing_keeps_the_status_and_flushes_the_logs() -> None:
    script = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
        logging.getLogger("x").info("stopped cleanly")
        print("committed", end="")
        from privstream.stream_app.shutdown import exit_without_finalizing
        exit_without_finalizing(3)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert done.stdout == "committed" and "stopped cleanly" in done.stderr
