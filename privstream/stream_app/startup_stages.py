"""When a worker reached each stage of its start, in seconds since its process started.

``/status`` shows them (``startup``) and ``privstream bench startup`` reports them:

* ``store_ready``: imports done, the ledger and the state store opened (migrations applied) and
  checked once;
* ``listening``: the public and operator listeners serve (``/healthz`` answers);
* ``partitions_assigned``: the ingest consumer joined its group and has partitions (``/readyz`` says
  ready from here on);
* ``first_prediction``: the first predictions were acknowledged by Kafka.

>>> stages = StartupStages(started=0.0, clock=lambda: 2.5)
>>> stages.reach("listening"); stages.reach("listening")  # the first time counts
>>> stages.as_dict()
{'listening': 2.5}
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

STAGES = ("store_ready", "listening", "partitions_assigned", "first_prediction")


def process_started_at() -> float:
    """When this process started (Unix time, to 10 ms): its age from ``/proc`` on Linux, else now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(") ", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()
    return time.time() - age


class StartupStages:
    """The start's stages reached so far, each the first time it is reached."""

    def __init__(self, started: float | None = None, clock: Callable[[], float] = time.time):
        self.started = process_started_at() if started is None else started
        self._clock = clock
        self._reached: dict[str, float] = {}

    def reach(self, stage: str) -> None:
        if stage not in self._reached:
            self._reached[stage] = round(self._clock() - self.started, 3)

    def as_dict(self) -> dict[str, float]:
        return dict(self._reached)
