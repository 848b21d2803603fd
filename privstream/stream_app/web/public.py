"""The public listener's pages: configuration, ledger figures and published releases only.

Everything here is a DP output charged to the ledger or a function of public configuration:
what any subscriber may see. The pages read the stream configurations and the ledger through
:class:`LedgerReader`, nothing else of the worker. A release counts and shows from its scheduled
time on (its deadline, when it is published; the ledger's ``visible_at``), never from when its
charge or its computation happened, which can depend on how long a learner ran on the data.

| path | what |
|---|---|
| ``/streams`` | the configured streams, their release configuration, status and lifetime figures |
| ``/streams/{id}`` | one stream, the same |
| ``/streams/{id}/budget`` | the stream's lifetime figures alone (:func:`lifetime`) |
| ``/streams/{id}/releases/latest`` | the latest published hypothesis release, as on the topic |
| ``/streams/{id}/sanitized/latest`` | the latest published sanitized release |

**Lifetime accounting**: each example (or user) lies in one node per level of
the release tree, so its lifetime cost is the sum of the charges of the nodes covering its
window, for ever; there is no draining total. The figures are the ledger's
(``PrivacyLedger.lifetime``): the lifetime budget, the largest lifetime spend of an example, the
releases per level and the refusals. They depend on the public schedule only (which nodes were
charged, at which ε), never on which windows held data.

The page for people (``page/``: ``/``, ``/stream/{id}``, ``/streams/{id}/releases``) is served by
the same listener.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from aiohttp import web

from privstream.agents.ledger_port import Charge, LifetimeFigures, PrivacyCost
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.web.listener import Route


class LedgerReader(Protocol):
    """The ledger's read side, as the public pages use it (``visible_at``: the charges scheduled at
    or before it only)."""

    def lifetime(self, stream_id: str, visible_at: float | None = None) -> LifetimeFigures: ...

    def entries(self, stream_id: str, visible_at: float | None = None) -> list[Charge]: ...

    def refusals(self, stream_id: str) -> int: ...

    def latest_published(
        self,
        stream_id: str,
        mechanism_prefix: str = "",
        level: int | None = None,
        visible_at: float | None = None,
    ) -> Charge | None: ...


#: How the lifetime bound follows from the charges, in words a reviewer can check.
LIFETIME_RULES = {
    "example": "parallel composition over the disjoint nodes of a level, sequential composition over "
    "the levels: an example's lifetime cost is the sum of the charges of the nodes covering "
    "its window",
    "user": "individual privacy filter (Feldman & Zrnic 2021): each user is charged only by the releases "
    "that include them, and excluded once their lifetime budget would be passed",
}


def lifetime(
    stream: StreamConfig | None, ledger: LedgerReader | None, now: float | None = None
) -> dict[str, Any] | None:
    """The stream's lifetime figures at ``now`` (default: the wall clock), counting the releases
    scheduled by then (public: the ledger holds only DP releases, and which nodes are charged when
    is a function of the public schedule).

    ``lifetime_epsilon_spent`` is the largest lifetime ε of an example (at the user level: of a user
    present in every release of this stream); ``releases_per_level`` counts the hypothesis releases
    by level of the release tree (releases without a node count as windows, level 0).
    ``exhausted``: the ledger has refused releases of this stream (a lowered budget, or a ledger
    shared with an older configuration: a valid configuration never runs out).

    >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
    >>> ledger = SqliteLedger.open(":memory:", budgets={"s": (2.0, 0.0)})
    >>> _ = ledger.charge("s", "w0", "learner:generic", 0.5, 0.0, b"{}")
    >>> stream = StreamConfig(name="s", hypothesis_class="thresholds:16",
    ...                       release={"epsilon": 0.5, "epsilon_budget": 2.0})
    >>> figures = lifetime(stream, ledger)
    >>> figures["lifetime_epsilon_spent"], figures["lifetime_epsilon_budget"], figures["releases_per_level"]
    (0.5, 2.0, {'0': 1})
    """
    if stream is None or stream.release is None or ledger is None:
        return None
    stream_id, config = stream.name, stream.release
    visible_at = time.time() if now is None else now
    spent = ledger.lifetime(stream_id, visible_at=visible_at).spent_per_example
    entries = ledger.entries(stream_id, visible_at=visible_at)
    per_level: dict[str, int] = {}
    for charge in entries:
        if charge.mechanism.startswith("learner:"):
            level = str(charge.level or 0)  # a charge without a node (before the tree): a window
            per_level[level] = per_level.get(level, 0) + 1
    remaining = PrivacyCost(
        max(config.epsilon_budget - spent.epsilon, 0.0), max(config.delta_budget - spent.delta, 0.0)
    )
    refusals = ledger.refusals(stream_id)
    return {
        "stream_id": stream_id,
        "accounting": "lifetime",
        "privacy_unit": config.privacy_unit,
        "lifetime_epsilon_budget": config.epsilon_budget,
        "lifetime_delta_budget": config.delta_budget,
        "lifetime_epsilon_spent": spent.epsilon,
        "lifetime_delta_spent": spent.delta,
        "lifetime_epsilon_remaining": remaining.epsilon,
        "lifetime_delta_remaining": remaining.delta,
        "rule": LIFETIME_RULES[config.privacy_unit],
        "levels": config.levels,
        "level_epsilon": config.learner_epsilons,
        "sanitizer_level_epsilon": config.sanitizer_epsilons,
        "lifetime_epsilon_bound": config.lifetime_cost[0],
        "releases": sum(per_level.values()),
        "releases_per_level": dict(sorted(per_level.items(), key=lambda kv: int(kv[0]))),
        "sanitized_releases": sum(1 for c in entries if c.mechanism.startswith("sanitizer:")),
        "refusals": refusals,
        "exhausted": refusals > 0,
    }


#: The figures of ``/streams/{id}/budget``, under the route's name (tests/agents/twins.py uses it).
budget = lifetime


def stream_overview(
    stream: StreamConfig, ledger: LedgerReader | None, now: float | None = None
) -> dict[str, Any]:
    """``/streams/{id}``: a stream's public configuration, status and lifetime figures at ``now``."""
    entry: dict[str, Any] = {
        "stream_id": stream.name,
        "hypothesis_class": stream.hypothesis_class,
        "features": stream.features,
        "feature_bounds": stream.feature_bounds,
        "feature_names": stream.feature_labels if stream.kind == "vector" else None,
        "release": stream.release.model_dump(mode="json") if stream.release else None,
    }
    figures = lifetime(stream, ledger, now)
    if figures is None:
        entry["status"] = "online only"
    else:
        entry["status"] = "budget exhausted: refusing releases" if figures["exhausted"] else "releasing"
        entry["lifetime"] = figures
    return entry


def streams_overview(
    streams: Sequence[StreamConfig], ledger: LedgerReader | None, now: float | None = None
) -> list[dict[str, Any]]:
    """``/streams``: every configured stream (:func:`stream_overview`)."""
    return [stream_overview(stream, ledger, now) for stream in streams]


def public_routes(streams: Sequence[StreamConfig], ledger: LedgerReader | None) -> list[Route]:
    """The public listener's routes over these streams and this ledger."""
    by_name = {s.name: s for s in streams}

    def no_releases(stream_id: str) -> web.Response:
        return web.json_response({"error": f"stream {stream_id!r} has no private releases"}, status=404)

    async def streams_page(request: web.Request) -> web.Response:
        return web.json_response({"streams": streams_overview(streams, ledger)})

    async def stream_page(request: web.Request) -> web.Response:
        stream = by_name.get(request.match_info["stream_id"])
        if stream is None:
            return web.json_response({"error": f"no stream {request.match_info['stream_id']!r}"}, status=404)
        return web.json_response(stream_overview(stream, ledger))

    async def lifetime_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        figures = lifetime(by_name.get(stream_id), ledger)
        return no_releases(stream_id) if figures is None else web.json_response(figures)

    def latest(prefix: str) -> Any:
        async def page(request: web.Request) -> web.Response:
            stream_id = request.match_info["stream_id"]
            if ledger is None or by_name.get(stream_id) is None or by_name[stream_id].release is None:
                return no_releases(stream_id)
            charge = ledger.latest_published(stream_id, prefix, visible_at=time.time())
            if charge is None:
                missing = {"error": f"stream {stream_id!r} has no such release yet"}
                return web.json_response(missing, status=404)
            return web.Response(body=charge.release, content_type="application/json")

        return page

    return [
        ("GET", "/streams", streams_page),
        ("GET", "/streams/{stream_id}", stream_page),
        ("GET", "/streams/{stream_id}/budget", lifetime_page),
        ("GET", "/streams/{stream_id}/releases/latest", latest("learner:")),
        ("GET", "/streams/{stream_id}/sanitized/latest", latest("sanitizer:")),
    ]
