"""The page for people: what a stream has released, drawn, for those who consume the releases.

``/`` lists the streams with their latest release and how much of their lifetime privacy budget an
example has used; ``/stream/{id}`` draws the stream's best release (the newest of the highest level
of the release tree, what the SDK subscribes to by default: ``/streams/{id}/releases/best``) beside
its latest one, both served by the public listener: a threshold, an interval or points on the domain
line; a vector model's decision regions, and a halfspace's weights on the named features with a 2-D
slice in any dimension. It lets a person check a vector release's accuracy on their own CSV file in
the browser, draws the releases over time with their ε and level, the releases per level, and the
lifetime ε per example over time, and updates itself when a new release arrives (it polls the JSON
endpoints every few seconds).

Plain HTML and JavaScript from ``assets/``, served by the worker, with one vendored charting
library (uPlot, MIT: ``assets/NOTICE``): no CDN, the pages work offline. Everything they show is
public: the published releases and their certificates, the ledger's lifetime figures and the
streams' configuration (the public listener's JSON endpoints, and ``/streams/{id}/releases`` here).
Every release they show is verified in the browser first (``assets/verify.js``: its Ed25519
signature against ``/keys``, with WebCrypto) and marked verified or not signed by this deployment.

:func:`page_routes` gives the routes, which the service adds to the public listener's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from privstream.agents.ledger_port import Charge
from privstream.learning.errors import InvariantError
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.web.listener import Route
from privstream.stream_app.web.public import (
    LedgerReader,
    PublicLedger,
    PublicReads,
    PublicStreams,
    lifetime,
    no_releases,
)

#: ``/streams/{id}/releases``: releases per answer by default, and at most.
DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
#: The longest ``before`` accepted: a public ledger entry id (stream, node id, product).
MAX_ENTRY_ID = 1000


@dataclass(frozen=True)
class ReleasesQuery:
    """``/streams/{id}/releases?limit=N&before=ENTRY&include=hypotheses``: the most recent ``limit``
    published releases older than the release whose public ledger entry id is ``before`` (the
    answer's ``next_before`` pages back), with each release's hypothesis if asked.

    >>> ReleasesQuery.parse({"limit": "5", "include": "hypotheses"})
    ReleasesQuery(limit=5, before=None, hypotheses=True)
    >>> ReleasesQuery.parse({"limit": "0"})
    Traceback (most recent call last):
    ...
    ValueError: limit must be a whole number from 1 to 1000
    """

    limit: int = DEFAULT_LIMIT
    before: str | None = None  # a public ledger entry id (never the ledger's internal counter)
    hypotheses: bool = False

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ReleasesQuery:
        limit = _whole(query.get("limit", str(DEFAULT_LIMIT)), 1, MAX_LIMIT, "limit")
        before = query.get("before")
        include = {part for part in query.get("include", "").split(",") if part}
        if include - {"hypotheses"}:
            raise ValueError("include takes 'hypotheses'")
        if before is not None and not 0 < len(before) <= MAX_ENTRY_ID:
            raise ValueError(
                f"before must be a release's ledger_entry_id (at most {MAX_ENTRY_ID} characters)"
            )
        return cls(limit, before, bool(include))


def _whole(text: str, low: int, high: int, name: str) -> int:
    if not (text.isdigit() and len(text) <= 19 and low <= int(text) <= high):
        raise ValueError(f"{name} must be a whole number from {low} to {high}")
    return int(text)


_CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
#: The files the page serves: those of ``assets/`` with a served type (no dotfiles), read once.
_ASSET_NAMES = frozenset(
    entry.name
    for entry in resources.files(__name__).joinpath("assets").iterdir()
    if entry.is_file()
    and not entry.name.startswith(".")
    and "." + entry.name.rsplit(".", 1)[-1] in _CONTENT_TYPES
)


def release_summary(charge: Charge, hypothesis: bool = False) -> dict[str, Any]:
    """What the page draws of one published release, read from its certificate.

    ``level``, the node's ``first_window``/``last_window`` and ``lifetime`` (the certificate's
    lifetime bound and its rule) are None for releases made before the release tree, which carry
    the draining ``epsilon_budget_remaining`` instead (None for the others). With ``hypothesis``,
    the summary holds the released hypothesis too.

    >>> from datetime import UTC, datetime
    >>> release = {"certificate": {"epsilon": 1.0, "delta": 0.0, "window": {"window_id": "w-0"},
    ...            "epsilon_budget_remaining": 9.0, "ledger_entry_id": "1"}}
    >>> charge = Charge(1, "s", "w-0", "learner:generic", 1.0, 0.0, json.dumps(release).encode(),
    ...                 datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC))
    >>> summary = release_summary(charge)
    >>> summary["product"], summary["epsilon"], summary["level"], summary["published_at"]
    ('hypotheses', 1.0, None, 1767225602.0)
    """
    release = json.loads(charge.release)
    certificate = release.get("certificate", {})
    if charge.published_at is None:
        raise InvariantError(f"invariant broken: release {charge.public_id} is published")
    summary = {
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
        # the private error estimates of earlier releases this one carries (their DP figures under
        # "estimate"): the page draws the accuracy over time from them
        "evaluations": [
            {
                "release": e.get("release"),
                "level": e.get("level"),
                "epsilon": e.get("epsilon"),
                "confidence": e.get("confidence"),
                "estimate": e.get("estimate"),
            }
            for e in release.get("evaluations") or []
            if isinstance(e, dict)
        ],
    }
    if hypothesis:  # the released hypothesis (None for a sanitized release)
        summary["hypothesis"] = release.get("hypothesis")
    return summary


def asset(name: str) -> tuple[bytes, str] | None:
    """A file of ``assets/`` and its content type; None for anything else (no paths, no dotfiles).

    >>> asset("page.css")[1], asset("../__init__.py"), asset("NOTICE"), asset("x" * 300)
    ('text/css', None, None, None)
    """
    if name not in _ASSET_NAMES:  # the request's name never reaches the file system
        return None
    suffix = "." + name.rsplit(".", 1)[-1]
    return resources.files(__name__).joinpath("assets", name).read_bytes(), _CONTENT_TYPES[suffix]


def page_routes(
    streams: Sequence[StreamConfig] | PublicStreams, ledger: LedgerReader | None = None
) -> list[Route]:
    """The page's routes over these streams and this ledger (or the ``PublicStreams`` shared with
    the public routes), for the public listener."""
    public = (
        streams
        if isinstance(streams, PublicStreams)
        else PublicStreams(streams, PublicReads(ledger) if ledger is not None else None)
    )

    def send(name: str) -> web.Response:
        found = asset(name)
        if found is None:
            return web.json_response({"error": f"no asset {name[:100]!r}"}, status=404)
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
        stream = public.releasing(stream_id)
        if stream is None or public.reads is None:
            return no_releases(stream_id[:200])
        try:
            query = ReleasesQuery.parse(request.query)
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)

        def build(ledger: PublicLedger | None) -> dict[str, Any]:
            if ledger is None:
                raise InvariantError("invariant broken: a releasing stream's page reads the ledger")
            charges = ledger.releases(stream_id, query.limit, query.before)
            return {
                "stream_id": stream_id,
                "lifetime": lifetime(stream, ledger),
                "releases": [release_summary(c, hypothesis=query.hypotheses) for c in charges],
                "next_before": charges[0].public_id if len(charges) == query.limit else None,
            }

        return await public.page(("releases", stream_id, query), build)

    return [
        ("GET", "/", index_page),
        ("GET", "/stream/{stream_id}", stream_page),
        ("GET", "/assets/{name}", asset_page),
        ("GET", "/streams/{stream_id}/releases", releases_page),
    ]
