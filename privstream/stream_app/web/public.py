"""The public listener's pages: configuration, ledger figures and published releases only.

Everything here is a DP output charged to the ledger or a function of public configuration
(DESIGN.md §4): what any subscriber may see. The pages read the stream configurations and the
ledger through :class:`LedgerReader`, nothing else of the worker.

| path | what |
|---|---|
| ``/streams`` | the configured streams, their release configuration and status |
| ``/streams/{id}/budget`` | the stream's budget, spent and remaining, releases and refusals |
| ``/streams/{id}/releases/latest`` | the latest published hypothesis release, as on the topic |
| ``/streams/{id}/sanitized/latest`` | the latest published sanitized release |

The page for people (``page/``: ``/``, ``/stream/{id}``, ``/streams/{id}/releases``) is served by
the same listener.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from aiohttp import web

from privstream.agents.ledger_port import Charge, PrivacyCost
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.web.listener import Route


class LedgerReader(Protocol):
    """The ledger's read side, as the public pages use it."""

    def spent(self, stream_id: str) -> PrivacyCost: ...

    def remaining(self, stream_id: str) -> PrivacyCost: ...

    def entries(self, stream_id: str) -> list[Charge]: ...

    def refusals(self, stream_id: str) -> int: ...

    def latest_published(self, stream_id: str, mechanism_prefix: str = "") -> Charge | None: ...


def budget(stream: StreamConfig | None, ledger: LedgerReader | None) -> dict[str, Any] | None:
    """The stream's budget figures from the ledger (public: the ledger holds only DP releases)."""
    if stream is None or stream.release is None or ledger is None:
        return None
    stream_id, config = stream.name, stream.release
    spent, remaining = ledger.spent(stream_id), ledger.remaining(stream_id)
    entries = ledger.entries(stream_id)
    return {
        "stream_id": stream_id,
        "epsilon_budget": config.epsilon_budget,
        "delta_budget": config.delta_budget,
        "epsilon_spent": spent.epsilon,
        "delta_spent": spent.delta,
        "epsilon_remaining": remaining.epsilon,
        "delta_remaining": remaining.delta,
        "releases": sum(1 for c in entries if c.mechanism.startswith("learner:")),
        "sanitized_releases": sum(1 for c in entries if c.mechanism.startswith("sanitizer:")),
        "refusals": ledger.refusals(stream_id),
        "exhausted": remaining.epsilon < config.window_cost[0] or remaining.delta < config.window_cost[1],
        "composition": "sequential",
    }


def streams_overview(streams: Sequence[StreamConfig], ledger: LedgerReader | None) -> list[dict[str, Any]]:
    """``/streams``: every configured stream with its release configuration and status."""
    out = []
    for stream in streams:
        entry: dict[str, Any] = {
            "stream_id": stream.name,
            "hypothesis_class": stream.hypothesis_class,
            "features": stream.features,
            "feature_bounds": stream.feature_bounds,
            "release": stream.release.model_dump(mode="json") if stream.release else None,
        }
        figures = budget(stream, ledger)
        if figures is not None:
            entry["status"] = "budget exhausted: not releasing" if figures["exhausted"] else "releasing"
            entry["budget"] = figures
        else:
            entry["status"] = "online only"
        out.append(entry)
    return out


def public_routes(streams: Sequence[StreamConfig], ledger: LedgerReader | None) -> list[Route]:
    """The public listener's routes over these streams and this ledger."""
    by_name = {s.name: s for s in streams}

    def no_releases(stream_id: str) -> web.Response:
        return web.json_response({"error": f"stream {stream_id!r} has no private releases"}, status=404)

    async def streams_page(request: web.Request) -> web.Response:
        return web.json_response({"streams": streams_overview(streams, ledger)})

    async def budget_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        figures = budget(by_name.get(stream_id), ledger)
        return no_releases(stream_id) if figures is None else web.json_response(figures)

    def latest(prefix: str) -> Any:
        async def page(request: web.Request) -> web.Response:
            stream_id = request.match_info["stream_id"]
            if ledger is None or budget(by_name.get(stream_id), ledger) is None:
                return no_releases(stream_id)
            charge = ledger.latest_published(stream_id, prefix)
            if charge is None:
                missing = {"error": f"stream {stream_id!r} has no such release yet"}
                return web.json_response(missing, status=404)
            return web.Response(body=charge.release, content_type="application/json")

        return page

    return [
        ("GET", "/streams", streams_page),
        ("GET", "/streams/{stream_id}/budget", budget_page),
        ("GET", "/streams/{stream_id}/releases/latest", latest("learner:")),
        ("GET", "/streams/{stream_id}/sanitized/latest", latest("sanitizer:")),
    ]
