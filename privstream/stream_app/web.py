"""The worker's web pages: ``/metrics``, ``/healthz``, ``/readyz`` and ``/status``.

``/status`` is for operators and the demo's live view (trusted zone: it shows raw mistake
counts, which are not differentially private).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from privstream.stream_app.service import Service


def health(service: Service) -> tuple[bool, str]:
    """Alive when the ingest agent runs and no received message has waited too long."""
    app = service.app
    agent = app.agents.get("ingest")
    if agent is not None and agent.started:
        for actor in agent._actors:  # a crashed agent leaves its actor task done
            task = getattr(actor, "actor_task", None)
            if task is not None and task.done():
                return False, "the ingest agent stopped"
    waiting = service.metrics.received_count > service.progress.handled
    stalled_for = service.progress.seconds_since_progress()
    if waiting and stalled_for > service.settings.stall_seconds:
        return False, f"no message handled for {stalled_for:.0f} s while messages wait"
    return True, "ok"


def readiness(service: Service) -> tuple[bool, str]:
    """Ready when the worker has joined its group, is not rebalancing and recovery is done."""
    app = service.app
    if not app.producer.started:
        return False, "producer not started"
    if app.rebalancing:
        return False, "rebalancing"
    if not app.tables.recovery.completed.is_set():
        return False, "table recovery in progress"
    if not app.consumer.assignment():
        return False, "no partitions assigned yet"
    return True, "ok"


def status(service: Service) -> dict[str, Any]:
    """Per-stream online state and ingest counters, as JSON."""
    m = service.metrics
    streams = {}
    for stream in service.settings.streams:
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


def register_pages(service: Service) -> None:
    app = service.app

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
