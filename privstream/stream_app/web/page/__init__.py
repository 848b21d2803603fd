"""The page for people: what a stream has released, drawn, for those who consume the releases.

``/`` lists the streams with their latest release and how much of their lifetime privacy budget an
example has used; ``/stream/{id}`` draws the stream's best release (the newest of the highest level
of the release tree, what the SDK subscribes to by default: ``/streams/{id}/releases/best``) beside
its latest one (a threshold, an interval or points on the domain line; a vector model's decision
regions, and a halfspace's weights on the named features with a 2-D slice in any dimension), lets a
person check a vector release's accuracy on their own CSV file in the browser, and draws the
releases over time with their ε and level, the releases per level, and the lifetime ε per example
over time. It
updates itself when a new release arrives (it polls the JSON endpoints every few seconds).

Plain HTML and JavaScript from ``assets/``, served by the worker, with one vendored charting
library (uPlot, MIT: ``assets/NOTICE``): no CDN, the pages work offline. Everything they show is
public: the published releases and their certificates, the ledger's lifetime figures and the
streams' configuration (the public listener's JSON endpoints, and ``/streams/{id}/releases`` here).

:func:`page_routes` gives the routes, which the service adds to the public listener's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

from aiohttp import web

from privstream.agents.ledger_port import Charge
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.web.listener import Route
from privstream.stream_app.web.public import LedgerReader, lifetime

#: How many releases ``/streams/{id}/releases`` returns at most (the most recent).
HISTORY_LIMIT = 1000

_CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def release_summary(charge: Charge) -> dict[str, Any]:
    """What the page draws of one published release, read from its certificate.

    ``level``, the node's ``first_window``/``last_window`` and ``lifetime`` (the certificate's
    lifetime bound and its rule, in the release tree) are None for releases made before
    the tree, which carry the draining ``epsilon_budget_remaining`` instead (None for the others).

    >>> from datetime import UTC, datetime
    >>> release = {"certificate": {"epsilon": 1.0, "delta": 0.0, "window": {"window_id": "w-0"},
    ...            "epsilon_budget_remaining": 9.0, "ledger_entry_id": "1"}}
    >>> charge = Charge(1, "s", "w-0", "learner:generic", 1.0, 0.0, json.dumps(release).encode(),
    ...                 datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC))
    >>> summary = release_summary(charge)
    >>> summary["product"], summary["epsilon"], summary["level"], summary["published_at"]
    ('hypotheses', 1.0, None, 1767225602.0)
    """
    certificate = json.loads(charge.release).get("certificate", {})
    assert charge.published_at is not None
    return {
        "ledger_entry_id": charge.public_id,
        "product": "sanitized" if charge.mechanism.startswith("sanitizer:") else "hypotheses",
        "mechanism": charge.mechanism,
        "window_id": charge.window_id,
        # the scheduled time (public); the moment it was sent depends on the worker's load
        "published_at": charge.scheduled_at
        if charge.scheduled_at is not None
        else charge.published_at.timestamp(),
        "epsilon": certificate.get("epsilon", charge.epsilon),
        "delta": certificate.get("delta", charge.delta),
        "level": certificate.get("level"),
        "first_window": (certificate.get("window") or {}).get("first_window"),
        "last_window": (certificate.get("window") or {}).get("last_window"),
        "lifetime": certificate.get("lifetime"),
        "epsilon_budget_remaining": certificate.get("epsilon_budget_remaining"),
        "window": certificate.get("window"),
    }


class ReleaseHistory:
    """Published releases of a stream, oldest first, from the ledger (summaries cached by entry
    id: a published release never changes)."""

    def __init__(self) -> None:
        self._summaries: dict[int, dict[str, Any]] = {}

    def of(self, entries: Iterable[Charge], limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
        published = [c for c in entries if c.published and c.release]
        out = []
        for charge in published[-limit:]:
            if charge.entry_id not in self._summaries:
                self._summaries[charge.entry_id] = release_summary(charge)
            out.append(self._summaries[charge.entry_id])
        return out


def best_release(charges: Iterable[Charge], summaries: ReleaseHistory) -> Charge | None:
    """The release the SDK's ``subscribe`` gives by default: the newest hypothesis release of the
    highest level of the release tree completed so far (the highest ``(level, last window)``; of
    equal ones the first published, as a subscriber would have kept it). None before any release.

    >>> from datetime import UTC, datetime
    >>> def charge(entry, level, first, last):
    ...     window = {"window_id": f"w-{entry}", "first_window": first, "last_window": last}
    ...     body = json.dumps({"certificate": {"epsilon": 1.0, "level": level, "window": window}})
    ...     at = datetime(2026, 1, 1, tzinfo=UTC)
    ...     return Charge(entry, "s", f"w-{entry}", "learner:halfspaces", 1.0, 0.0, body.encode(), at, at)
    >>> tree = [charge(1, 0, 0, 0), charge(2, 0, 1, 1), charge(3, 1, 0, 1), charge(4, 0, 2, 2)]
    >>> best_release(tree, ReleaseHistory()).entry_id
    3
    """
    best, rank = None, None
    published = [c for c in charges if c.published and c.release and c.mechanism.startswith("learner:")]
    for charge, summary in zip(published, summaries.of(published, limit=len(published)), strict=True):
        last = summary["last_window"]
        this = (summary["level"] or 0, -1 if last is None else last)
        if rank is None or this > rank or (this == rank and last is None):
            best, rank = charge, this
    return best


def asset(name: str) -> tuple[bytes, str] | None:
    """A file of ``assets/`` and its content type; None for anything else (no paths, no dotfiles).

    >>> asset("page.css")[1], asset("../__init__.py"), asset("NOTICE")
    ('text/css', None, None)
    """
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    path = resources.files(__name__).joinpath("assets", name)
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix not in _CONTENT_TYPES or not path.is_file():
        return None
    return path.read_bytes(), _CONTENT_TYPES[suffix]


def page_routes(streams: Sequence[StreamConfig], ledger: LedgerReader | None) -> list[Route]:
    """The page's routes over these streams and this ledger (for the public listener)."""
    by_name = {s.name: s for s in streams}
    history = ReleaseHistory()

    def send(name: str) -> web.Response:
        found = asset(name)
        if found is None:
            return web.json_response({"error": f"no asset {name!r}"}, status=404)
        body, content_type = found
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    async def index_page(request: web.Request) -> web.Response:
        return send("index.html")

    async def stream_page(request: web.Request) -> web.Response:
        return send("stream.html")

    async def asset_page(request: web.Request) -> web.Response:
        return send(request.match_info["name"])

    async def releases_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        figures = lifetime(by_name.get(stream_id), ledger)
        if figures is None or ledger is None:
            return web.json_response({"error": f"stream {stream_id!r} has no private releases"}, status=404)
        visible = ledger.entries(stream_id, visible_at=time.time())
        return web.json_response(
            {"stream_id": stream_id, "lifetime": figures, "releases": history.of(visible)}
        )

    async def best_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        stream = by_name.get(stream_id)
        if ledger is None or stream is None or stream.release is None:
            return web.json_response({"error": f"stream {stream_id!r} has no private releases"}, status=404)
        charge = best_release(ledger.entries(stream_id, visible_at=time.time()), history)
        if charge is None:
            return web.json_response({"error": f"stream {stream_id!r} has no release yet"}, status=404)
        return web.Response(body=charge.release, content_type="application/json")

    return [
        ("GET", "/", index_page),
        ("GET", "/stream/{stream_id}", stream_page),
        ("GET", "/assets/{name}", asset_page),
        ("GET", "/streams/{stream_id}/releases", releases_page),
        ("GET", "/streams/{stream_id}/releases/best", best_page),
    ]
