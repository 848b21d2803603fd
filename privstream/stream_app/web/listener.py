"""An HTTP listener run as a service of the faust app: one aiohttp server on one host and port.

The worker runs two (trust boundary): the *public* listener (releases, budgets, the page for
people: DP outputs and public configuration only) and the *operator* listener (``/metrics``,
``/status``, probes: raw, non-private figures). They are separate servers on separate ports so
that exposing one never exposes the other; the operator listener can demand a bearer token
(:func:`bearer_token_guard`).

Each listener protects the worker from its clients (:class:`ListenerLimits`):

* at most ``max_connections`` open connections: one more is answered ``503`` and closed at once,
  so a flood of connections cannot take the file descriptors that Kafka, the ledger and the other
  listener need;
* at most ``max_connections_per_client`` of them from one client (one IPv4 address, one IPv6
  /64 network: what one host can hold): one more from that client is answered ``429`` and closed,
  so one client cannot take the listener's connections from every other client;
* a new connection's first request head must arrive within ``header_timeout`` seconds, and a
  connection with no request in progress is closed after ``idle_timeout`` seconds (half-sent
  requests do not pile up: a client holding connections with partial heads loses each of them at
  the deadline, however slowly it keeps sending);
* a handler that fails is answered ``500 {"error": "internal error"}`` without a traceback, and
  every repeated log line of the listener (and asyncio's accept errors) is rate-limited
  (:class:`RateLimitFilter`).

faust's own web server is disabled (``web_enabled=False``): its default views (``/router``,
``/table``, ...) would sit beside the public pages, and it serves one port only.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import mode
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from privstream.learning.errors import InvariantError
from privstream.stream_app.settings import Settings

log = logging.getLogger(__name__)

#: ``(method, path, handler)``; paths use aiohttp's syntax (``/streams/{stream_id}/budget``).
Route = tuple[str, str, Handler]

#: What a connection over the cap gets before it is closed.
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b'Content-Length: 38\r\n\r\n{"error": "too many open connections"}'
)
#: What a connection over its client's share gets before it is closed.
CLIENT_BUSY_RESPONSE = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b'Content-Length: 55\r\n\r\n{"error": "too many open connections from your address"}'
)


@dataclass(frozen=True)
class ListenerLimits:
    """How much one listener's clients may hold (see the module docstring)."""

    max_connections: int = 256
    max_connections_per_client: int = 16
    header_timeout: float = 10.0
    idle_timeout: float = 30.0

    @classmethod
    def of(cls, settings: Settings, listener: Literal["public", "operator"]) -> ListenerLimits:
        """The limits the settings give the public or the operator listener."""
        public = listener == "public"
        return cls(
            max_connections=settings.public_max_connections if public else settings.operator_max_connections,
            max_connections_per_client=settings.public_max_connections_per_client
            if public
            else settings.operator_max_connections_per_client,
            header_timeout=settings.listener_header_timeout_seconds,
            idle_timeout=settings.listener_idle_timeout_seconds,
        )


class RateLimitFilter(logging.Filter):
    """Let at most ``burst`` records of one message template through per ``period`` seconds and
    logger; the next record let through says how many were dropped meanwhile.

    >>> limit = RateLimitFilter(burst=2, period=60.0, clock=lambda: 0.0)
    >>> records = [logging.makeLogRecord({"msg": "accept failed: %s", "args": (i,)}) for i in range(5)]
    >>> [limit.filter(r) for r in records]
    [True, True, False, False, False]
    >>> limit = RateLimitFilter(burst=1, period=60.0, clock=iter([0.0, 1.0, 61.0]).__next__)
    >>> [limit.filter(logging.makeLogRecord({"msg": "m"})) for _ in range(3)]
    [True, False, True]
    """

    def __init__(self, burst: int = 5, period: float = 60.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.burst, self.period, self.clock = burst, period, clock
        self._windows: dict[tuple[str, str], list[float]] = {}  # key -> [window start, passed, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg)[:200])
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.period:
            dropped = 0 if window is None else int(window[2])
            if len(self._windows) > 1000:  # bounded: forget the others
                self._windows.clear()
            self._windows[key] = [now, 1, 0]
            if dropped:
                record.msg = (
                    f"{record.msg} ({dropped} similar messages dropped in the last {self.period:g} s)"
                )
            return True
        if window[1] < self.burst:
            window[1] += 1
            return True
        window[2] += 1
        return False


#: One filter for the loggers a flood of clients can make talk (shared, so the limit is global).
_RATE_LIMIT = RateLimitFilter()
_LIMITED_LOGGERS = (__name__, "asyncio", "aiohttp.server", "aiohttp.web", "aiohttp.access")


def limit_listener_logs() -> None:
    """Rate-limit the loggers of the listeners (idempotent)."""
    for name in _LIMITED_LOGGERS:
        logger = logging.getLogger(name)
        if _RATE_LIMIT not in logger.filters:
            logger.addFilter(_RATE_LIMIT)


def bearer_token_guard(token: str, *, open_paths: Iterable[str] = ()) -> Middleware:
    """An aiohttp middleware refusing requests without ``Authorization: Bearer <token>`` (401).

    ``open_paths`` stay reachable without the token (the liveness and readiness probes, which a
    kubelet calls without secrets and which carry no figures). The comparison takes constant time.
    """
    expected = f"Bearer {token}".encode()
    exempt = frozenset(open_paths)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in exempt:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return web.json_response(
                    {"error": "this operator listener needs Authorization: Bearer <operator_token>"},
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="privstream operator"'},
                )
        return await handler(request)

    return guard


def plain_errors(name: str) -> Middleware:
    """An aiohttp middleware answering a failed handler with a short JSON 500 (no traceback to the
    client, one rate-limited log line)."""

    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:
            log.error(
                "%s listener: %s %s failed: %s: %s",
                name,
                request.method,
                request.path[:120],
                type(exc).__name__,
                str(exc)[:200],
            )
            return web.json_response({"error": "internal error"}, status=500)

    return answer


def client_of(peer: Any) -> str:
    """The client a connection's peer address counts against: the IPv4 address, or the IPv6 /64
    network (one host is given a whole /64); an IPv4-mapped IPv6 address is its IPv4 address.

    >>> client_of(("192.0.2.7", 40000)), client_of(("2001:db8:1:2:3:4:5:6", 40000, 0, 0))
    ('192.0.2.7', '2001:db8:1:2::/64')
    >>> client_of(("::ffff:192.0.2.7", 1, 0, 0)), client_of(None)
    ('192.0.2.7', '')
    """
    host = peer[0] if isinstance(peer, tuple) and peer else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return str(host)  # a Unix socket or an unknown family: one client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


#: Why a listener refused or dropped a connection (the label values of its counter).
REFUSAL_REASONS = ("max_connections", "max_connections_per_client", "header_timeout")


class _Connections:
    """The open connections of one listener, against its cap and each client's share."""

    def __init__(self, limits: ListenerLimits):
        self.limits = limits
        self.open = 0
        self.per_client: dict[str, int] = {}  # only clients with an open connection: bounded by the cap
        self.counts = dict.fromkeys(REFUSAL_REASONS, 0)

    @property
    def refused(self) -> int:
        """Connections refused at once (over the cap or over their client's share)."""
        return self.counts["max_connections"] + self.counts["max_connections_per_client"]

    def admit(self, client: str) -> bytes | None:
        """Count the connection in, or the answer that refuses it."""
        if self.open >= self.limits.max_connections:
            self.counts["max_connections"] += 1
            return BUSY_RESPONSE
        held = self.per_client.get(client, 0)
        if held >= self.limits.max_connections_per_client:
            self.counts["max_connections_per_client"] += 1
            return CLIENT_BUSY_RESPONSE
        self.open += 1
        self.per_client[client] = held + 1
        return None

    def release(self, client: str) -> None:
        self.open -= 1
        held = self.per_client.pop(client, 1) - 1
        if held > 0:
            self.per_client[client] = held


class _GuardedConnection(asyncio.Protocol):
    """Stands between the socket and aiohttp's protocol: admits the connection under the cap, and
    closes it if its first request head has not arrived within the header timeout."""

    def __init__(self, inner: Any, connections: _Connections):
        self._inner = inner
        self._connections = connections
        self._admitted = False
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._tail = b""  # the last bytes received until the first head is complete
        self._client = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):
            raise InvariantError(f"invariant broken: a stream transport, not {type(transport).__name__}")
        connections = self._connections
        self._client = client_of(transport.get_extra_info("peername"))
        refusal = connections.admit(self._client)
        if refusal is not None:
            transport.write(refusal)
            transport.close()
            return
        self._admitted = True
        self._transport = transport
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(connections.limits.header_timeout, self._head_too_slow)
        self._inner.connection_made(transport)

    def _head_too_slow(self) -> None:
        self._timer = None
        if self._transport is not None:
            self._connections.counts["header_timeout"] += 1
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if self._timer is not None:
            self._tail = (self._tail + data)[-(len(data) + 3) :]
            if b"\r\n\r\n" in self._tail:  # the first request head is complete
                self._timer.cancel()
                self._timer = None
                self._tail = b""
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        if self._admitted:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._admitted:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self._connections.release(self._client)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport = None
        self._inner.connection_lost(exc)


class HttpListener(mode.Service):
    """Serve ``routes`` on ``host:port`` for as long as the worker runs, within ``limits``."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        routes: Iterable[Route],
        *,
        middlewares: Iterable[Middleware] = (),
        limits: ListenerLimits | None = None,
        **kwargs: Any,  # mode.Service's (beacon, loop)
    ):
        super().__init__(**kwargs)
        self.name = name
        self.host = host
        self.port = port
        self.limits = limits or ListenerLimits()
        self.application = web.Application(middlewares=[plain_errors(name), *middlewares])
        for method, path, handler in routes:
            self.application.router.add_route(method, path, handler)
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.connections = _Connections(self.limits)
        limit_listener_logs()

    @property
    def label(self) -> str:
        return f"{self.name} listener on {self.host}:{self.port}"

    async def on_start(self) -> None:
        self._runner = web.AppRunner(
            self.application, access_log=None, keepalive_timeout=self.limits.idle_timeout
        )
        await self._runner.setup()
        protocol_factory = self._runner.server
        if protocol_factory is None:
            raise InvariantError("invariant broken: the app runner has a server after setup")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _GuardedConnection(protocol_factory(), self.connections),
            self.host,
            self.port,
            reuse_address=True,
        )
        log.info("%s listener serving on http://%s:%d", self.name, self.host, self.port)

    async def on_stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
