"""The small interfaces the agents depend on; the service (``stream_app``) implements them."""

from __future__ import annotations

from typing import Protocol


class IngestMetrics(Protocol):
    """Counters the ingest and online agents report to (Prometheus in the service)."""

    def received(self, count: int = 1) -> None: ...

    def invalid(self, reason: str) -> None: ...

    def dead_lettered(self) -> None: ...

    def learned(self, stream_id: str, mistake: bool, mistakes: int, realizable: bool) -> None: ...

    def mistake_bound(self, stream_id: str, bound: int) -> None: ...
