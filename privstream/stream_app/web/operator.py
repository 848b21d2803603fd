"""The operator listener's pages: raw figures of the trusted zone, and the probes.

Nothing here is differentially private (per-stream example and mistake counts, invalid counts,
Prometheus metrics): the listener binds 127.0.0.1 by default and, anywhere else, needs a bearer
token (``operator_token``; :func:`~privstream.stream_app.web.listener.bearer_token_guard`). The
probes ``/healthz`` and ``/readyz`` stay open: they carry a state and a reason, no figures.

| path | what |
|---|---|
| ``/metrics`` | Prometheus text format (every name starts with ``privstream_``) |
| ``/status`` | per-stream examples, mistakes, bound, realizability; invalid counts |
| ``/healthz`` | 200 while the ingest consumer runs and nothing is stuck, else 503 |
| ``/readyz`` | 200 once partitions are assigned and the store answers, else 503 |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from privstream.stream_app.web.listener import Route

#: Reachable without the operator token (kubelet probes carry no secrets).
PROBE_PATHS = ("/healthz", "/readyz")


class Probes(Protocol):
    """Liveness and readiness, each as ``(ok, reason)`` (the ingest service implements them)."""

    def health(self) -> tuple[bool, str]: ...

    def readiness(self) -> tuple[bool, str]: ...


def operator_routes(
    exposition: Callable[[], bytes], probes: Probes, status: Callable[[], dict[str, Any]]
) -> list[Route]:
    """The operator listener's routes: metrics ``exposition``, the ``probes`` and the ``status`` JSON."""

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(body=exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        ok, reason = probes.health()
        return web.json_response(
            {"status": "ok" if ok else "unhealthy", "reason": reason}, status=200 if ok else 503
        )

    async def readyz(request: web.Request) -> web.Response:
        ok, reason = probes.readiness()
        return web.json_response(
            {"status": "ready" if ok else "not ready", "reason": reason}, status=200 if ok else 503
        )

    async def status_page(request: web.Request) -> web.Response:
        return web.json_response(status())

    return [
        ("GET", "/metrics", metrics_page),
        ("GET", "/healthz", healthz),
        ("GET", "/readyz", readyz),
        ("GET", "/status", status_page),
    ]
