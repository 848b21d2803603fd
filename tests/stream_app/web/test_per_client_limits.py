"""One client holding many half-sent requests cannot deny the listener to other clients: each
client (address) has a share of the connections, and a request head that does not arrive within
the header timeout loses its connection. Real sockets on 127.0.0.1 and 127.0.0.2 (both loopback
on Linux)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

from aiohttp import web

from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.settings import Settings
from privstream.stream_app.web.listener import HttpListener, ListenerLimits

ATTACKER, OTHER = "127.0.0.1", "127.0.0.2"
SLOW = 300


async def hello(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def half_sent(port: int, source: str) -> socket.socket:
    """A connection from ``source`` that sends the start of a request head and never finishes it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
    return sock


def get_from(port: int, source: str) -> tuple[int, bytes]:
    """``GET /hello`` from ``source``, by hand (urllib cannot choose the source address)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:  # refused: the server closed before reading the request
            return 0, b"null"
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def refusal_to(port: int, source: str) -> tuple[int, bytes]:
    """What the listener answers a new connection from ``source`` before it sends anything (a
    refused connection is answered at once; sending into it could meet its reset instead)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as sock:
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed (or reset) the connection: what it sent, then the end."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


async def test_300_half_sent_requests_from_one_address_leave_the_listener_to_another() -> None:
    """Before: one global cap of 256, so 300 partial heads from one client made every other
    client's request a 503 (in 0.02 s), for as long as the client renewed them."""
    limits = ListenerLimits.of(Settings(listener_header_timeout_seconds=1.0, _env_file=None), "public")
    listener = HttpListener("public", "127.0.0.1", free_port(), [("GET", "/hello", hello)], limits=limits)
    await listener.start()
    try:
        held = [await asyncio.to_thread(half_sent, listener.port, ATTACKER) for _ in range(SLOW)]
        connections = listener.connections
        for _ in range(500):  # bounded: the connections are counted as they are accepted
            if connections.open + connections.refused >= SLOW:
                break
            await asyncio.sleep(0.01)
        status, body = await asyncio.to_thread(get_from, listener.port, OTHER)
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        per_client = limits.max_connections_per_client
        assert connections.per_client == {ATTACKER: per_client}
        assert connections.counts["max_connections_per_client"] == SLOW - per_client
        status, body = await asyncio.to_thread(refusal_to, listener.port, ATTACKER)
        assert status == 429 and "from your address" in json.loads(body)["error"]
        # The admitted slow ones are dropped at the header deadline; the refused ones at once.
        started = time.monotonic()
        closed = await asyncio.gather(*(asyncio.to_thread(closed_by_server, s) for s in held))
        assert all(closed) and time.monotonic() - started < 9.0  # well before the sockets' 10 s
        for sock in held:
            sock.close()
        for _ in range(500):
            if not connections.open:
                break
            await asyncio.sleep(0.01)
        assert connections.open == 0 and connections.per_client == {}
        assert connections.counts["header_timeout"] == per_client
        # The client's share is free again.
        assert (await asyncio.to_thread(get_from, listener.port, ATTACKER))[0] == 200
    finally:
        await listener.stop()


async def test_the_global_cap_still_holds_across_clients() -> None:
    limits = ListenerLimits(max_connections=3, max_connections_per_client=2, header_timeout=30.0)
    listener = HttpListener("operator", "127.0.0.1", free_port(), [("GET", "/hello", hello)], limits=limits)
    await listener.start()
    try:
        held = [await asyncio.to_thread(half_sent, listener.port, source) for source in (ATTACKER,) * 2]
        held.append(await asyncio.to_thread(half_sent, listener.port, OTHER))
        for _ in range(500):
            if listener.connections.open == 3:
                break
            await asyncio.sleep(0.01)
        status, body = await asyncio.to_thread(refusal_to, listener.port, "127.0.0.3")
        assert (status, json.loads(body)) == (503, {"error": "too many open connections"})
        assert listener.connections.counts == {
            "max_connections": 1,
            "max_connections_per_client": 0,
            "header_timeout": 0,
        }
        for sock in held:
            sock.close()
    finally:
        await listener.stop()


def test_the_limits_come_from_each_listeners_settings() -> None:
    settings = Settings(
        public_max_connections_per_client=5, operator_max_connections_per_client=3, _env_file=None
    )
    assert ListenerLimits.of(settings, "public").max_connections_per_client == 5
    assert ListenerLimits.of(settings, "operator").max_connections_per_client == 3


async def test_refused_and_dropped_connections_are_counted_on_the_operator_metrics(tmp_path) -> None:
    """Each listener's refusals by reason reach ``/metrics``: the operator listener's directly,
    the public listener's through the file its process writes."""
    from privstream.stream_app.metrics import ServiceMetrics
    from privstream.stream_app.web import public_process

    limits = ListenerLimits(max_connections=10, max_connections_per_client=1, header_timeout=0.3)
    public = HttpListener("public", "127.0.0.1", free_port(), [("GET", "/hello", hello)], limits=limits)
    counts = tmp_path / public_process.COUNTS_FILE
    serving = asyncio.create_task(public_process.serve(public, counts))
    metrics = ServiceMetrics([])
    metrics.listener_connections.sources["public"] = lambda: public_process.read_counts(counts)
    try:
        for _ in range(500):
            if counts.exists():
                break
            await asyncio.sleep(0.01)
        held = await asyncio.to_thread(half_sent, public.port, ATTACKER)
        assert (await asyncio.to_thread(refusal_to, public.port, ATTACKER))[0] == 429
        assert await asyncio.to_thread(closed_by_server, held)  # dropped at the header timeout
        held.close()
        public_process.write_counts(counts, dict(public.connections.counts))  # as the child does

        def sample(reason: str) -> float | None:
            return metrics.registry.get_sample_value(
                "privstream_listener_connections_refused_total", {"listener": "public", "reason": reason}
            )

        assert [sample(r) for r in ("max_connections", "max_connections_per_client", "header_timeout")] == [
            0.0,
            1.0,
            1.0,
        ]
        assert b'listener="public",reason="header_timeout"} 1.0' in metrics.exposition()
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
