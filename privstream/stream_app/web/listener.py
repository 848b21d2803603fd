"""An HTTP listener run as a service of the faust app: one aiohttp server on one host and port.

The worker runs two (DESIGN.md §4, trust boundary): the *public* listener (releases, budgets, the
page for people: DP outputs and public configuration only) and the *operator* listener
(``/metrics``, ``/status``, probes: raw, non-private figures). They are separate servers on
separate ports so that exposing one never exposes the other; the operator listener can demand a
bearer token (:func:`bearer_token_guard`).

faust's own web server is disabled (``web_enabled=False``): its default views (``/router``,
``/table``, ...) would sit beside the public pages, and it serves one port only.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable

import mode
from aiohttp import web

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: ``(method, path, handler)``; paths use aiohttp's syntax (``/streams/{stream_id}/budget``).
Route = tuple[str, str, Handler]


Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


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


class HttpListener(mode.Service):
    """Serve ``routes`` on ``host:port`` for as long as the worker runs."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        routes: Iterable[Route],
        *,
        middlewares: Iterable[Middleware] = (),
        **kwargs: object,
    ):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.name = name
        self.host = host
        self.port = port
        self.application = web.Application(middlewares=list(middlewares))
        for method, path, handler in routes:
            self.application.router.add_route(method, path, handler)
        self._runner: web.AppRunner | None = None

    @property
    def label(self) -> str:
        return f"{self.name} listener on {self.host}:{self.port}"

    async def on_start(self) -> None:
        self._runner = web.AppRunner(self.application, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("%s listener serving on http://%s:%d", self.name, self.host, self.port)

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
