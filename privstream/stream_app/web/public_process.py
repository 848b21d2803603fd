"""The public listener in a process of its own, so that its crowd cannot hurt ingest.

Anyone may call the public listener. Served on the worker's event loop, every request would take
loop time from ingestion (measured with ``benchmarks/bench_public_listener.py``: 100 clients on
the same machine cut the ingest rate to about half of what their own CPU use explains), and a
flood of connections would take the worker's file descriptors. In a child process, the public
pages have their own interpreter, event loop, file descriptors and ledger connection (a second
SQLite reader of the ledger file, or a pool of two PostgreSQL connections): the worker's loop
never serves a public request, and its ledger lock is never held by one. The child runs at a
lower scheduling priority (niceness 10): where cores are short, ingestion is served first.

The child is started by :class:`PublicListenerProcess` (a service of the worker's app) with the
worker's settings in its environment, serves :func:`~.public.public_routes` and
:func:`~.page.page_routes` within the listener limits, dies with the worker
(``PR_SET_PDEATHSIG``), and is started again if it dies. It signs ``releases/latest`` with the
worker's key (which the worker checked against the ledger before the child starts) and lists the
deployment's keys, the ledger's, and their rotation statements on ``/keys``.

Run by hand (for a look at its log): ``python -m privstream.stream_app.web.public_process`` with
the worker's ``PRIVSTREAM_*`` environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import mode

from privstream.stream_app.embedded.broker import die_with_parent
from privstream.stream_app.key_rotation import key_document
from privstream.stream_app.logs import configure_logging
from privstream.stream_app.settings import ENV_PREFIX, Settings
from privstream.stream_app.signing import deployment_keys, existing_signer
from privstream.stream_app.web.listener import HttpListener, ListenerLimits
from privstream.stream_app.web.page import page_routes
from privstream.stream_app.web.public import PublicReads, PublicStreams, public_routes

log = logging.getLogger(__name__)

#: How long the worker waits for the child's port to answer; how often it checks the child lives.
START_SECONDS = 60.0
SUPERVISE_SECONDS = 5.0
#: The child's scheduling niceness: on a machine short of cores the worker (and a broker beside
#: it) gets the CPU before the public pages do.
PUBLIC_NICENESS = 10


def public_listener(settings: Settings) -> HttpListener:
    """The public listener the settings describe, with its own ledger connection."""
    from privstream.stream_app.store import factory

    releasing = any(s.release for s in settings.streams)
    # Its own connections; the worker registered the streams' budgets, so the pages only read.
    ledger = (
        factory.open_ledger(settings.model_copy(update={"store_pool_size": 2}), create=False)
        if releasing
        else None
    )
    # The key its worker checked against the ledger; /keys lists the ledger's keys and rotations.
    signer = existing_signer(settings) if ledger is not None else None
    recorded = ledger.signing_keys() if ledger is not None else []
    document = key_document(recorded, deployment_keys(settings, (), signer))
    public = PublicStreams(
        settings.streams, PublicReads(ledger, settings.public_cache_seconds) if ledger is not None else None
    )
    return HttpListener(
        "public",
        settings.public_host,
        settings.public_port,
        public_routes(public, signer=signer, key_document=document) + page_routes(public),
        limits=ListenerLimits.of(settings, "public"),
    )


async def serve(listener: HttpListener) -> None:
    """Serve until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await listener.start()
    try:
        await stop.wait()
    finally:
        await listener.stop()


def main() -> int:
    """The child: the worker's settings from the environment, the public listener until SIGTERM."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    with contextlib.suppress(OSError):  # when cores are short, ingestion goes first
        os.nice(PUBLIC_NICENESS)
    asyncio.run(serve(public_listener(settings)))
    return 0


def port_answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
        return True
    return False


class PublicListenerProcess(mode.Service):
    """Runs the public listener as a child process for as long as the worker runs."""

    def __init__(self, settings: Settings, **kwargs: Any):  # kwargs: mode.Service's (beacon, loop)
        super().__init__(**kwargs)
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def label(self) -> str:
        return f"public listener process on {self.settings.public_host}:{self.settings.public_port}"

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        env.update(self.settings.to_env())
        return subprocess.Popen(
            [sys.executable, "-m", "privstream.stream_app.web.public_process"],
            env=env,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )

    async def on_start(self) -> None:
        self.process = self._spawn()
        host = (
            "127.0.0.1" if self.settings.public_host in ("0.0.0.0", "::", "") else self.settings.public_host
        )
        deadline = time.monotonic() + START_SECONDS
        while not await asyncio.to_thread(port_answers, host, self.settings.public_port):
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"the public listener process exited with status {code} (see its log above)"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the public listener process did not listen within {START_SECONDS:g} s")
            await asyncio.sleep(0.1)
        log.info("public listener process %d serving on port %d", self.process.pid, self.settings.public_port)

    @mode.Service.timer(SUPERVISE_SECONDS)
    async def _supervise(self) -> None:
        if self.process is None or self.process.poll() is None:
            return
        self.restarts += 1
        log.error(
            "the public listener process exited with status %s; starting it again (restart %d)",
            self.process.returncode,
            self.restarts,
        )
        self.process = self._spawn()

    async def on_stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait, 10)


if __name__ == "__main__":
    sys.exit(main())
