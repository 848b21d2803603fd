"""The public listener cannot hurt the worker: reads off the event loop, shared and bounded; a cap
on connections; half-sent requests closed; failures answered without a traceback; quiet logs."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import urllib.error
import urllib.request

import pytest

from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.web.listener import HttpListener, ListenerLimits, RateLimitFilter
from privstream.stream_app.web.page import page_routes
from privstream.stream_app.web.public import PublicReads, PublicStreams, public_routes

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    )
]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class WatchedLedger:
    """A ledger that records the thread of every read and can hold reads until released."""

    def __init__(self) -> None:
        self.ledger = SqliteLedger.open(":memory:", budgets={"clicks": (4.0, 0.0)})
        for w in range(3):
            charge = self.ledger.charge("clicks", f"w{w}", "learner:generic", 1.0, 0.0, release(w))
            self.ledger.mark_published(charge.entry_id)
        self.threads: list[threading.Thread] = []
        self.gate = threading.Event()
        self.gate.set()

    def _read(self) -> None:
        self.threads.append(threading.current_thread())
        self.gate.wait(10)

    def lifetime(self, stream_id: str, visible_at: float | None = None):
        self._read()
        return self.ledger.lifetime(stream_id, visible_at=visible_at)

    def entries(self, stream_id: str, visible_at: float | None = None):
        raise AssertionError("the public pages never read every entry")

    def release_counts(self, stream_id: str, visible_at: float | None = None):
        return self.ledger.release_counts(stream_id, visible_at=visible_at)

    def published_page(
        self, stream_id: str, limit: int, before: int | None = None, visible_at: float | None = None
    ):
        return self.ledger.published_page(stream_id, limit, before, visible_at=visible_at)

    def lookup(self, stream_id: str, window_id: str, mechanism: str):
        return self.ledger.lookup(stream_id, window_id, mechanism)

    def refusals(self, stream_id: str, visible_at: float | None = None) -> int:
        return self.ledger.refusals(stream_id, visible_at)

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ):
        self._read()
        return self.ledger.latest_published(stream_id, mechanism_prefix, level, visible_at=visible_at)


def release(w: int) -> bytes:
    hypothesis = {"kind": "runs", "domain": 16, "first": 0, "changes": [w + 1]}
    certificate = {
        "epsilon": 1.0,
        "delta": 0.0,
        "ledger_entry_id": str(w + 1),
        "window": {"window_id": f"w{w}"},
    }
    return json.dumps({"stream_id": "clicks", "hypothesis": hypothesis, "certificate": certificate}).encode()


async def serve(routes, limits: ListenerLimits | None = None) -> HttpListener:
    listener = HttpListener("public", "127.0.0.1", free_port(), routes, limits=limits)
    await listener.start()
    return listener


async def test_ledger_reads_run_off_the_event_loop_and_concurrent_requests_share_one_read() -> None:
    """Before: every request read the whole ledger on the event loop that ingests examples, one
    read per request (40 concurrent requests stalled the worker for ~40 s at 50,000 charges)."""
    watched = WatchedLedger()
    reads = PublicReads(watched, cache_seconds=60.0)
    public = PublicStreams(STREAMS, reads)
    listener = await serve(public_routes(public) + page_routes(public))
    url = f"http://127.0.0.1:{listener.port}/streams/clicks/budget"
    try:
        watched.gate.clear()  # hold the first read: everyone else must wait for the same one
        pending = [asyncio.to_thread(get, url) for _ in range(20)]
        answers = asyncio.gather(*pending)
        for _ in range(1000):  # bounded: a read that fails before the gate must not hang the test
            if watched.threads or answers.done():
                break
            await asyncio.sleep(0.01)
        assert watched.threads, answers.exception() if answers.done() else "no read reached the ledger"
        ticks = 0
        for _ in range(5):  # the loop keeps running while the read is held
            await asyncio.sleep(0.01)
            ticks += 1
        watched.gate.set()
        results = await answers
        assert ticks == 5 and {status for status, _ in results} == {200}
        assert {json.loads(body)["releases"] for _, body in results} == {3}
        assert len(watched.threads) == 1 and reads.ledger_reads == 1  # one read for twenty requests
        assert watched.threads[0] is not threading.main_thread()
    finally:
        await listener.stop()


async def test_a_page_of_releases_is_bounded_and_pages_back_with_hypotheses_on_request() -> None:
    watched = WatchedLedger()
    listener = await serve(page_routes(STREAMS, watched))
    base = f"http://127.0.0.1:{listener.port}/streams/clicks/releases"
    try:
        status, body = await asyncio.to_thread(get, f"{base}?limit=2")
        page = json.loads(body)
        assert status == 200 and [r["window_id"] for r in page["releases"]] == ["w1", "w2"]
        assert "hypothesis" not in page["releases"][0]
        status, body = await asyncio.to_thread(
            get, f"{base}?limit=2&before={page['next_before']}&include=hypotheses"
        )
        older = json.loads(body)
        assert [r["window_id"] for r in older["releases"]] == ["w0"] and older["next_before"] is None
        assert older["releases"][0]["hypothesis"] == json.loads(release(0))["hypothesis"]
        for bad in ("limit=0", "limit=100000", "limit=x", f"before={'x' * 1001}", "include=everything"):
            status, body = await asyncio.to_thread(get, f"{base}?{bad}")
            assert status == 400 and "error" in json.loads(body), bad
    finally:
        await listener.stop()


async def test_a_long_asset_name_is_a_plain_404_and_a_failing_page_a_plain_500(caplog) -> None:
    """Before: a 300-character asset name gave a 500 with a 1.8 KB traceback."""

    async def broken(request):
        raise RuntimeError("x" * 5000)

    listener = await serve([*page_routes(STREAMS, WatchedLedger()), ("GET", "/broken", broken)])
    base = f"http://127.0.0.1:{listener.port}"
    try:
        status, body = await asyncio.to_thread(get, f"{base}/assets/{'a' * 300}.js")
        assert status == 404 and len(body) < 200 and b"Traceback" not in body
        with caplog.at_level(logging.ERROR):
            status, body = await asyncio.to_thread(get, f"{base}/broken")
        assert (status, json.loads(body)) == (500, {"error": "internal error"})
        assert "Traceback" not in caplog.text and "RuntimeError" in caplog.text
        assert all(len(r.getMessage()) < 500 for r in caplog.records)
    finally:
        await listener.stop()


def half_sent(port: int) -> socket.socket:
    """A connection that sends the start of a request head and never finishes it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /streams HTTP/1.1\r\nHost: x\r\n")
    return sock


async def test_half_sent_requests_are_closed_after_the_header_timeout() -> None:
    """Before: no header timeout, so half-sent requests stayed open (1,010 of them exhausted the
    open-file limit and took the operator probes down)."""
    limits = ListenerLimits(max_connections=100, header_timeout=0.3, idle_timeout=30.0)
    listener = await serve(public_routes(STREAMS, WatchedLedger()), limits)
    try:
        sock = await asyncio.to_thread(half_sent, listener.port)
        closed = await asyncio.to_thread(sock.recv, 1024)  # blocks until the server closes it
        assert closed == b""
        sock.close()
        assert listener.connections.open == 0
    finally:
        await listener.stop()


async def test_connections_over_the_cap_get_503_and_the_other_listener_still_answers() -> None:
    limits = ListenerLimits(max_connections=3, header_timeout=30.0, idle_timeout=30.0)
    public = await serve(public_routes(STREAMS, WatchedLedger()), limits)
    operator = await serve([("GET", "/healthz", healthz)])
    try:
        held = [await asyncio.to_thread(half_sent, public.port) for _ in range(3)]
        while public.connections.open < 3:
            await asyncio.sleep(0.01)
        status, body = await asyncio.to_thread(get, f"http://127.0.0.1:{public.port}/streams")
        assert status == 503 and json.loads(body) == {"error": "too many open connections"}
        assert public.connections.refused == 1
        assert (await asyncio.to_thread(get, f"http://127.0.0.1:{operator.port}/healthz"))[0] == 200
        for sock in held:
            sock.close()
        while public.connections.open:
            await asyncio.sleep(0.01)
        assert (await asyncio.to_thread(get, f"http://127.0.0.1:{public.port}/streams"))[0] == 200
    finally:
        await operator.stop()
        await public.stop()


async def healthz(request):
    from aiohttp import web

    return web.json_response({"status": "ok"})


def test_repeated_log_lines_are_rate_limited_with_a_count_of_those_dropped() -> None:
    now = [0.0]
    limit = RateLimitFilter(burst=3, period=10.0, clock=lambda: now[0])

    def record():
        return logging.makeLogRecord({"name": "asyncio", "msg": "socket.accept() out of system resource"})

    passed = [limit.filter(record()) for _ in range(1000)]
    assert sum(passed) == 3
    now[0] = 11.0
    later = record()
    assert limit.filter(later) and "997 similar messages dropped" in later.getMessage()


@pytest.mark.parametrize("token", ["", "x", "s3cret"])
def test_a_short_operator_token_is_refused(token: str) -> None:
    """Before: an empty or one-character token was accepted on 0.0.0.0."""
    from pydantic import ValidationError

    from privstream.stream_app.settings import Settings

    with pytest.raises(ValidationError, match="shorter than 16 characters"):
        Settings(operator_host="0.0.0.0", operator_token=token, _env_file=None)
    assert Settings(operator_host="0.0.0.0", operator_token="t" * 16, _env_file=None).operator_token


@pytest.mark.live  # starts the public listener's process (a server)
async def test_the_worker_serves_the_public_pages_from_a_child_process_it_restarts(tmp_path) -> None:
    """The public listener has its own process (event loop, file descriptors, ledger connection):
    a crowd there takes nothing from the worker's loop; if it dies, it is started again."""
    import os
    import signal

    from privstream.stream_app.embedded.broker import free_listener_ports
    from privstream.stream_app.settings import Settings
    from privstream.stream_app.signing import KeySet, worker_signer
    from privstream.stream_app.web import public_process

    settings = Settings(
        kafka_bootstrap="127.0.0.1:1",
        data_dir=tmp_path,
        streams=STREAMS,
        ledger_create_if_missing=True,
        _env_file=None,
        **free_listener_ports(),
    )
    with SqliteLedger.open(
        settings.resolved_ledger_path, create_if_missing=True, budgets={"clicks": (3.0, 0.0)}
    ) as ledger:
        signer = worker_signer(settings, ledger)  # as the worker does before it starts the child
    service = public_process.PublicListenerProcess(settings)
    await service.start()
    base = f"http://127.0.0.1:{settings.public_port}"
    try:
        first = service.process
        assert first is not None and first.pid != os.getpid()
        status, body = await asyncio.to_thread(get, f"{base}/keys")
        assert status == 200 and KeySet.from_json(body).key_ids == [signer.key_id]
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
        while service.process is first or (await asyncio.to_thread(probe, f"{base}/streams")) != 200:
            await asyncio.sleep(0.2)
        assert service.restarts == 1
    finally:
        await service.stop()
    assert service.process is None


def probe(url: str) -> int | None:
    try:
        return get(url)[0]
    except OSError:
        return None


def test_the_figures_and_a_page_of_releases_come_from_aggregates_of_the_ledger() -> None:
    """Before: every page read every charge with its release bytes (1.07 s per /streams at 50,000
    charges); now an aggregate and a bounded page (the watched ledger refuses to list them all)."""
    from privstream.stream_app.store.sqlite_ledger import SqliteLedger as Ledger
    from privstream.stream_app.web.public import PublicLedger

    watched = WatchedLedger()
    sanitized = watched.ledger.charge("clicks", "w0", "sanitizer:mwem", 0.5, 0.0, b"{}")
    watched.ledger.mark_published(sanitized.entry_id)
    public = PublicLedger(watched)
    figures = public.figures("clicks")
    assert figures.releases_per_level == {0: 3} and figures.sanitized_releases == 1
    assert [c.window_id for c in public.releases("clicks", limit=2)] == ["w2", "w0"]  # w0: the sanitized
    assert [c.window_id for c in public.releases("clicks", limit=9)] == ["w0", "w1", "w2", "w0"]
    assert isinstance(watched.ledger, Ledger)
