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
(``PR_SET_PDEATHSIG``), and is started again if it dies.

**No secret in the child.** Anyone may talk to the child, so it gets none of the worker's secrets:
its environment lacks every secret setting (the operator token, the signing key and its file's
path, the Kafka and PostgreSQL passwords); the one it needs, an inline PostgreSQL password, comes
on its standard input, never in its environment or arguments. It signs nothing: the worker signs
each release once as it publishes it and writes the signature, and the key statement of
``/keys``, to :class:`~privstream.stream_app.store.signatures.ReleaseSignatures`; at its start and
every few seconds it also signs what the child serves (each stream's latest and best release,
whichever worker published it). The child serves those signatures, and the
deployment's keys (those the ledger records) with their rotation statements on ``/keys``; the
worker writes that document again within seconds of ``privstream keys rotate``, and the child
reads it on every request, so a rotation needs no restart of the listener.

Run by hand (for a look at its log): ``python -m privstream.stream_app.web.public_process`` with
the worker's ``PRIVSTREAM_*`` environment, beside a worker (which writes the signatures).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mode
from privstream_client.signing import DeploymentStatement

from privstream.stream_app.embedded.broker import die_with_parent
from privstream.stream_app.key_rotation import key_document
from privstream.stream_app.logs import configure_logging
from privstream.stream_app.settings import ENV_PREFIX, Settings
from privstream.stream_app.signing import KeySet, Signer
from privstream.stream_app.store.signatures import SIGNATURES_FILE, ReleaseSignatures
from privstream.stream_app.web.listener import REFUSAL_REASONS, HttpListener, ListenerLimits
from privstream.stream_app.web.page import page_routes
from privstream.stream_app.web.public import PublicLedger, PublicReads, PublicStreams, public_routes

log = logging.getLogger(__name__)

#: How long the worker waits for the child's port to answer; how often it checks the child lives.
START_SECONDS = 60.0
SUPERVISE_SECONDS = 5.0
#: The child's scheduling niceness: on a machine short of cores the worker (and a broker beside
#: it) gets the CPU before the public pages do.
PUBLIC_NICENESS = 10
#: Settings the child is never given: secrets, and where the signing key is.
WITHHELD = ("operator_token", "signing_key", "signing_key_file", "kafka_sasl_password", "store_password")
#: The child never connects to Kafka, so it gets none of the Kafka security settings either: given
#: a SASL protocol without its password, its settings would not load.
KAFKA_SECURITY = ("kafka_security_protocol", "kafka_sasl_mechanism", "kafka_sasl_username")
#: The secret settings the child needs, sent on its standard input.
PASSED_ON_STDIN = ("store_password",)
#: libpq's password variable: never in the child's environment.
PGPASSWORD = "PGPASSWORD"


def child_environment(settings: Settings) -> tuple[dict[str, str], bytes]:
    """The child's environment (the worker's settings without :data:`WITHHELD`) and what goes to
    its standard input (the secrets it needs, JSON).

    >>> from pydantic import SecretStr
    >>> s = Settings(operator_token=SecretStr("t" * 32), store_password=SecretStr("pw"), _env_file=None)
    >>> env, stdin = child_environment(s)
    >>> [k for k in env if "TOKEN" in k or "PASSWORD" in k], stdin
    ([], b'{"store_password": "pw"}')
    """
    withheld = {f"{ENV_PREFIX}{name.upper()}" for name in WITHHELD + KAFKA_SECURITY}
    env = {k: v for k, v in settings.to_env().items() if k not in withheld}
    secrets = {}
    for name in PASSED_ON_STDIN:
        value = getattr(settings, name)
        if value is not None:
            secrets[name] = value.get_secret_value()
    # libpq's own variable, if the worker was given its password that way (not inherited: below)
    inherited = os.environ.get(PGPASSWORD)
    if inherited and "store_password" not in secrets and settings.store_password_file is None:
        secrets["store_password"] = inherited
    return env, json.dumps(secrets).encode()


def signatures_path(settings: Settings) -> Path:
    return settings.data_dir / SIGNATURES_FILE


#: Where the child writes its listener's refused and dropped connections, for the worker's metrics.
COUNTS_FILE = "public_listener_connections.json"
COUNTS_SECONDS = 5.0


def counts_path(settings: Settings) -> Path:
    return settings.data_dir / COUNTS_FILE


def write_counts(path: Path, counts: dict[str, int]) -> None:
    """Replace ``path`` with ``counts`` (JSON) at once: a reader sees the old or the new counts."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(counts))
    os.replace(partial, path)


def read_counts(path: Path) -> dict[str, int]:
    """The counts the child wrote last, only the known reasons; none yet (or unreadable): zeros.

    >>> read_counts(Path("/nonexistent")) == dict.fromkeys(REFUSAL_REASONS, 0)
    True
    """
    try:
        written = json.loads(path.read_text())
    except (OSError, ValueError):
        written = {}
    counts = dict.fromkeys(REFUSAL_REASONS, 0)
    if isinstance(written, dict):
        for reason in REFUSAL_REASONS:
            value = written.get(reason)
            if isinstance(value, int) and value >= 0:
                counts[reason] = value
    return counts


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
    # The worker's signatures and key statement: the child holds no key (module docstring).
    signatures = ReleaseSignatures(signatures_path(settings), readonly=True)
    public = PublicStreams(
        settings.streams, PublicReads(ledger, settings.public_cache_seconds) if ledger is not None else None
    )
    return HttpListener(
        "public",
        settings.public_host,
        settings.public_port,
        # read on every request: the worker rewrites it when the deployment's key is rotated
        public_routes(public, signatures=signatures, key_document=signatures.key_document)
        + page_routes(public),
        limits=ListenerLimits.of(settings, "public"),
    )


async def serve(listener: HttpListener, counts: Path | None = None) -> None:
    """Serve until SIGTERM or SIGINT; write the listener's refused and dropped connections to
    ``counts`` every few seconds."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await listener.start()
    written: dict[str, int] | None = None
    try:
        while not stop.is_set():
            if counts is not None and listener.connections.counts != written:
                written = dict(listener.connections.counts)
                try:
                    await asyncio.to_thread(write_counts, counts, written)
                except OSError as exc:  # a full disk: the metrics lag, the pages are served
                    log.warning("could not write the public listener's counts to %s: %s", counts, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), COUNTS_SECONDS)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await listener.stop()


def main() -> int:
    """The child: the worker's settings from the environment, the public listener until SIGTERM."""
    # The secrets the worker keeps out of the environment (none when run by hand from a terminal).
    secrets = {} if sys.stdin.isatty() else json.loads(sys.stdin.buffer.read() or b"{}")
    settings = Settings(**secrets)
    configure_logging(settings.log_level, settings.log_format)
    with contextlib.suppress(OSError):  # when cores are short, ingestion goes first
        os.nice(PUBLIC_NICENESS)
    asyncio.run(serve(public_listener(settings), counts_path(settings)))
    # Stopped and closed: exit without the interpreter's finalization (a collection of the whole
    # heap, a second or more), which the worker's own stop would wait for.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


def port_answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
        return True
    return False


class PublicListenerProcess(mode.Service):
    """Runs the public listener as a child process for as long as the worker runs."""

    def __init__(
        self,
        settings: Settings,
        *,
        signer: Signer | None = None,
        signatures: ReleaseSignatures | None = None,
        **kwargs: Any,  # mode.Service's (beacon, loop)
    ):
        super().__init__(**kwargs)
        self.settings = settings
        self.signer, self.signatures = signer, signatures
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._ledger: Any = None  # the worker's own reader of what the child serves
        self._signing = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="public-signatures")

    @property
    def label(self) -> str:
        return f"public listener process on {self.settings.public_host}:{self.settings.public_port}"

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX) and k != PGPASSWORD}
        settings_env, secrets = child_environment(self.settings)
        env.update(settings_env)
        process = subprocess.Popen(
            [sys.executable, "-m", "privstream.stream_app.web.public_process"],
            env=env,
            stdin=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        if process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(secrets)
            process.stdin.close()
        return process

    def _sign_served(self) -> int:
        """Sign what the child serves and the worker has not signed (yet): each releasing stream's
        latest release, latest sanitized release and best release; how many were signed."""
        from privstream.stream_app.store import factory

        if self.signer is None or self.signatures is None:
            return 0
        releasing = [s.name for s in self.settings.streams if s.release is not None]
        if not releasing:
            return 0
        if self._ledger is None:
            options = self.settings.model_copy(update={"store_pool_size": 1})
            self._ledger = factory.open_ledger(options, create=False)
        public, signed = PublicLedger(self._ledger), 0
        for stream in releasing:
            for charge in (
                public.latest(stream, "learner:"),
                public.latest(stream, "sanitizer:"),
                public.best(stream),
            ):
                if charge is not None and charge.release and self.signatures.lookup(charge.release) is None:
                    self.signatures.put(charge.release, *self.signer.sign(charge.release))
                    signed += 1
        return signed

    def _key_document(self) -> dict[str, Any]:
        """What ``/keys`` serves: the keys the ledger records, with their rotation statements,
        and ``published_keys_file``'s (the worker checked its key against the ledger's)."""
        from privstream.stream_app.store import factory

        published = (
            KeySet.from_file(self.settings.published_keys_file) if self.settings.published_keys_file else None
        )
        if self.signer is not None:
            published = KeySet([self.signer.public_entry()]).merged(published or KeySet())
        if not any(s.release is not None for s in self.settings.streams):
            return key_document([], published)
        if self._ledger is None:
            options = self.settings.model_copy(update={"store_pool_size": 1})
            self._ledger = factory.open_ledger(options, create=False)
        # The ledger id, signed: a subscriber given no ledger id trusts no release on first use for it.
        deployment = (
            None if self.signer is None else DeploymentStatement.sign(self.signer, self._ledger.ledger_id)
        )
        return key_document(self._ledger.signing_keys(), published, deployment)

    def _refresh_keys(self) -> bool:
        """Write the key statement again if the ledger's keys changed (``privstream keys rotate``
        ran): the child serves it from its next request on. Whether it changed."""
        if self.signatures is None:
            return False
        document = self._key_document()
        if document == self.signatures.key_document():
            return False
        self.signatures.put_keys(document)
        log.info("the deployment's signing keys changed: /keys serves %d keys", len(document.get("keys", [])))
        return True

    async def _sign(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._signing, self._refresh_keys)
            await loop.run_in_executor(self._signing, self._sign_served)
        except Exception as exc:  # the ledger unreachable: the readiness probe reports it
            log.debug("could not sign the releases the public listener serves: %s", exc)

    async def on_start(self) -> None:
        if self.signatures is None:
            self.signatures = ReleaseSignatures(signatures_path(self.settings))
        await asyncio.get_running_loop().run_in_executor(self._signing, self._refresh_keys)
        await self._sign()
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
        await self._sign()  # releases other workers of the deployment published
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
        self._signing.shutdown(wait=False)
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
