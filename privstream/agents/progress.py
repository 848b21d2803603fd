"""Liveness bookkeeping: when did the agents last finish a message."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Progress:
    """Counts handled messages and remembers when the last one finished (monotonic clock)."""

    handled: int = 0
    last_handled_at: float = field(default_factory=time.monotonic)

    def tick(self, count: int = 1) -> None:
        self.handled += count
        self.last_handled_at = time.monotonic()
