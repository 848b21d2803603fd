"""The worker's web pages.

Public (what any subscriber may see): ``/streams``, ``/streams/{id}/releases/latest``,
``/streams/{id}/sanitized/latest``, ``/streams/{id}/budget``: configuration, ledger figures and
published releases only; and the page for people (``page/``): ``/``, ``/stream/{id}``,
``/streams/{id}/releases`` (the published releases' certificates over time).
Operators (trusted zone: raw counts, not differentially private): ``/status``, ``/metrics``.
Probes: ``/healthz``, ``/readyz``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST

from privstream.stream_app.page import register_page

if TYPE_CHECKING:
    from privstream.stream_app.service import Service


def health(service: Service) -> tuple[bool, str]:
    """Alive when the ingest consumer runs, Kafka answers and no received message has waited too long."""
    ingest = service.ingest
    if ingest.crashed:
        return False, f"the ingest consumer crashed: {ingest.crash_reason!r}"
    silent = time.monotonic() - ingest.kafka_ok_at
    if silent > service.settings.stall_seconds:
        return False, f"Kafka has not answered for {silent:.0f} s"
    started = ingest.batch_started
    if started is not None and time.monotonic() - started > service.settings.stall_seconds:
        return False, f"a batch polled {time.monotonic() - started:.0f} s ago is still not done"
    return True, "ok"


def readiness(service: Service) -> tuple[bool, str]:
    """Ready when the worker has joined its group, is not rebalancing and recovery is done."""
    ingest = service.ingest
    if ingest.producer is None or ingest.consumer is None:
        return False, "starting"
    if not ingest.assignment():
        return False, "no partitions of the examples topic assigned yet"
    return True, "ok"


def status(service: Service) -> dict[str, Any]:
    """Per-stream online state and ingest counters, as JSON."""
    m = service.metrics
    streams = {}
    for stream in service.settings.streams:
        if stream.kind == "vector":  # no online learner: private releases only
            streams[stream.name] = {"features": stream.features, "online": None}
            continue
        soa = service.learners.soa(stream.name)
        streams[stream.name] = {
            "hypothesis_class": stream.hypothesis_class,
            "examples": soa.examples_seen,
            "mistakes": soa.mistakes,
            "mistake_bound": soa.mistake_bound,
            "realizable": soa.realizable and soa.mistakes <= soa.mistake_bound,
        }
    invalid = dict(m.invalid_counts)
    return {
        "received": m.received_count,
        "handled": service.progress.handled,
        "invalid": sum(invalid.values()),
        "invalid_by_reason": invalid,
        "streams": streams,
    }


def budget(service: Service, stream_id: str) -> dict[str, Any] | None:
    """The stream's budget figures from the ledger (public: the ledger holds only DP releases)."""
    config = service.settings.stream(stream_id)
    if config is None or config.release is None or service.ledger is None:
        return None
    ledger = service.ledger
    spent, remaining = ledger.spent(stream_id), ledger.remaining(stream_id)
    entries = ledger.entries(stream_id)
    return {
        "stream_id": stream_id,
        "epsilon_budget": config.release.epsilon_budget,
        "delta_budget": config.release.delta_budget,
        "epsilon_spent": spent.epsilon,
        "delta_spent": spent.delta,
        "epsilon_remaining": remaining.epsilon,
        "delta_remaining": remaining.delta,
        "releases": sum(1 for c in entries if c.mechanism.startswith("learner:")),
        "sanitized_releases": sum(1 for c in entries if c.mechanism.startswith("sanitizer:")),
        "refusals": ledger.refusals(stream_id),
        "exhausted": remaining.epsilon < config.release.epsilon or remaining.delta < config.release.delta,
        "composition": "sequential",
    }


def streams_overview(service: Service) -> list[dict[str, Any]]:
    out = []
    for stream in service.settings.streams:
        entry: dict[str, Any] = {
            "stream_id": stream.name,
            "hypothesis_class": stream.hypothesis_class,
            "features": stream.features,
            "feature_bounds": stream.feature_bounds,
            "release": stream.release.model_dump(mode="json") if stream.release else None,
        }
        figures = budget(service, stream.name)
        if figures is not None:
            entry["status"] = "budget exhausted: not releasing" if figures["exhausted"] else "releasing"
            entry["budget"] = figures
        else:
            entry["status"] = "online only"
        out.append(entry)
    return out


def register_pages(service: Service) -> None:
    app = service.app

    @app.page("/streams")
    async def streams_page(web: Any, request: Any) -> Any:
        return web.json({"streams": streams_overview(service)})

    @app.page("/streams/{stream_id}/budget")
    async def budget_page(web: Any, request: Any, stream_id: str) -> Any:
        figures = budget(service, stream_id)
        if figures is None:
            return web.json({"error": f"stream {stream_id!r} has no private releases"}, status=404)
        return web.json(figures)

    async def latest(web: Any, stream_id: str, prefix: str) -> Any:
        if budget(service, stream_id) is None:
            return web.json({"error": f"stream {stream_id!r} has no private releases"}, status=404)
        assert service.ledger is not None
        charge = service.ledger.latest_published(stream_id, prefix)
        if charge is None:
            return web.json({"error": f"stream {stream_id!r} has no such release yet"}, status=404)
        return web.bytes(charge.release, content_type="application/json")

    @app.page("/streams/{stream_id}/releases/latest")
    async def latest_release_page(web: Any, request: Any, stream_id: str) -> Any:
        return await latest(web, stream_id, "learner:")

    @app.page("/streams/{stream_id}/sanitized/latest")
    async def latest_sanitized_page(web: Any, request: Any, stream_id: str) -> Any:
        return await latest(web, stream_id, "sanitizer:")

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        return web.bytes(service.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        ok, reason = health(service)
        return web.json({"status": "ok" if ok else "unhealthy", "reason": reason}, status=200 if ok else 503)

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        ok, reason = readiness(service)
        return web.json({"status": "ready" if ok else "not ready", "reason": reason},
                        status=200 if ok else 503)

    @app.page("/status")
    async def status_page(web: Any, request: Any) -> Any:
        return web.json(status(service))

    register_page(app, service)  # the page for people: /, /stream/{id}, /streams/{id}/releases
