"""The publication slots the service derives at start-up.

Every release is published at the end of its slot on its stream's learner
(:mod:`privstream.agents.timing`). Where a stream's configuration leaves ``publish_delay_seconds``
unset, the service measures, in the stream's own learner process and before any example is read,
how long a node's slot may need at worst, level by level (each distinct workload once, timed
alone, and remembered for the next start: :mod:`privstream.stream_app.slot_cache`): for each
product the default release's fit and the slowest fit on public inputs of the largest input a node
of the level can give the learner (the input cap, or a count node's public n if smaller;
:func:`privstream.agents.releases.slot_workload`). A level's slot is a margin plus three times
that (:func:`privstream.learning.planning.slot_advice`), so a loaded machine still meets it; the
measurement is a function of public inputs and the machine only, never of the data.

The slot also covers what the node costs outside the fit: building it in the state store, reading
it back and shipping it to the learner process, and, for a stream with ``quality_epsilon``, a
window's quality estimates (scored before its level-0 node's defaults), timed on public rows as
many as the level's largest input (:mod:`.slot_path`).

A fit stopped at its deadline is replaced by the stream's warm spare learner process at once; the
new spare then has one slot to start. So no slot is shorter than the margin plus a learner
process's start-up (spawn, imports, first answer, measured as the process started): a killed fit
never costs the next node its slot.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pickle
from dataclasses import dataclass
from typing import Any

from privstream.agents.fits import slot_parts
from privstream.agents.releases import ReleasePolicy, largest_input, slot_workload
from privstream.learning.errors import InvariantError
from privstream.learning.planning import SLOT_MARGIN_SECONDS, slot_advice
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.slot_cache import SlotCache, workload_key
from privstream.stream_app.slot_path import load_seconds, score_seconds, ship_seconds

log = logging.getLogger(__name__)

__all__ = [
    "SlotMeasurement",
    "configuration_of",
    "derive_slots",
    "measure_slot",
    "respawn_floor",
    "slot_of",
    "slots_fall_behind",
]


@dataclass(frozen=True)
class SlotMeasurement:
    """A level's slot, part by part, in seconds, on public inputs of ``examples`` examples (the
    level's largest input): ``load`` (the node built in the state store and read back), ``ship``
    (its input to the learner process and back), ``default``, ``prepare`` (the fit's random order
    and cap) and ``fit`` (the slowest over the public inputs), summed over the products,
    ``respawn``, a learner process's start-up (what a new warm spare needs before the next slot),
    and ``score``, the quality estimates a level-0 node's window computes before its defaults
    (0 without ``quality_epsilon`` and above level 0).

    >>> m = SlotMeasurement(2000, load=0.01, ship=0.01, default=0.01, prepare=0.0, fit=0.02, respawn=0.5)
    >>> round(m.work, 3), m.slot(timer_seconds=0.6), m.slot()
    (0.05, 1.0, 0.8)
    >>> scored = dataclasses.replace(m, score=0.1)
    >>> round(scored.work, 3), scored.slot()
    (0.15, 0.8)
    """

    examples: int
    load: float
    ship: float
    default: float
    prepare: float
    fit: float
    respawn: float
    score: float = 0.0

    @property
    def work(self) -> float:
        """What a node's close to its deadline may spend at worst: every part but the respawn."""
        return self.load + self.ship + self.score + self.default + self.prepare + self.fit

    def slot(self, timer_seconds: float = 0.0) -> float:
        """The slot the service derives from it (:func:`slot_of`)."""
        return slot_of(self.work, timer_seconds, self.respawn)

    def to_dict(self, timer_seconds: float = 0.0) -> dict[str, Any]:
        parts = ("load", "ship", "score", "default", "prepare", "fit", "respawn")
        return {
            "examples": self.examples,
            "seconds": {part: round(getattr(self, part), 4) for part in parts},
            "timer_seconds": timer_seconds,
            "slot_seconds": self.slot(timer_seconds),
        }


def respawn_floor(respawn_seconds: float) -> float:
    """The shortest slot: the margin plus a learner process's start-up, in tenths of a second (a
    fit killed at its deadline hands over to the warm spare, and the new spare has one slot to
    start).

    >>> respawn_floor(0.44)
    0.7
    """
    return math.ceil(round((SLOT_MARGIN_SECONDS + respawn_seconds) * 10, 6)) / 10


def slot_of(work_seconds: float, timer_seconds: float, respawn_seconds: float) -> float:
    """A level's slot: :func:`~privstream.learning.planning.slot_advice` of the work a node's close
    to its deadline takes at worst (the timer's period added for time windows), never shorter than
    :func:`respawn_floor`.

    >>> slot_of(0.05, 0.6, 0.5), slot_of(0.05, 0.0, 0.5)
    (1.0, 0.8)
    """
    return max(slot_advice(work_seconds, timer_seconds), respawn_floor(respawn_seconds))


def measure_slot(
    policy: ReleasePolicy,
    processes: LearnerProcesses,
    level: int,
    respawn_seconds: float,
    path: tuple[float, float] | None = None,
) -> SlotMeasurement:
    """Time a node of ``level`` part by part on public inputs: the fits in the stream's learner
    process, the load, the shipping and the quality estimates' scoring in this one (what
    :func:`derive_slots` measures). ``path``:
    the load and shipping measured already on a policy of the same shape (they depend on the
    input's size and the stream's ingest rule, not on its algorithms)."""
    parts = processes.process(policy.stream_id).submit(slot_parts, slot_workload(policy, level)).result()
    if path is None:
        path = (load_seconds(policy, level), ship_seconds(processes, policy, level))
    load, ship = path
    return SlotMeasurement(
        largest_input(policy, level),
        load=load,
        ship=ship,
        default=parts[0],
        prepare=parts[1],
        fit=parts[2],
        respawn=respawn_seconds,
        score=score_seconds(policy, level),
    )


def learner_startup(processes: LearnerProcesses, stream_id: str) -> float:
    """A learner process's start-up, spawning the stream's first one if none ran yet."""
    if processes.startup_seconds(stream_id) is None:
        processes.process(stream_id).submit(int).result()
    return processes.startup_seconds(stream_id) or 0.0


def configuration_of(policy: ReleasePolicy, level: int) -> bytes | None:
    """A level's public configuration but the stream's name (pickled), or None if it does not
    pickle: streams configured alike have the same slot workload, whose inputs (arrays of the
    level's largest input) cost far more to build and digest than this (24 streams: 2.6 s).

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> a = ReleasePolicy("a", parse_class_spec("thresholds:64"), (), window_size=50)
    >>> configuration_of(a, 0) == configuration_of(dataclasses.replace(a, stream_id="b"), 0)
    True
    >>> configuration_of(a, 0) == configuration_of(dataclasses.replace(a, window_size=60), 0)
    False
    """
    try:
        return pickle.dumps((dataclasses.replace(policy, stream_id=""), level), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):  # a learner that does not pickle
        return None


def derive_slots(
    policies: dict[str, ReleasePolicy],
    processes: LearnerProcesses,
    timer_seconds: float,
    cache: SlotCache | None = None,
) -> dict[str, ReleasePolicy]:
    """The policies with their slots set: as configured, or derived per level. Levels whose nodes
    read as many examples share one measurement, and so do streams configured alike (one
    :func:`~privstream.stream_app.slot_cache.workload_key`); each distinct workload is timed alone,
    one after another, so a slot does not depend on how many streams start together; ``cache``
    remembers the figures (and a learner process's start-up) for the next start.
    ``timer_seconds`` is the period of the timer that closes time windows: a time window's fits
    start up to that late."""
    keys: dict[str, dict[int, str]] = {}  # stream -> level -> its workload's key
    owners: dict[str, tuple[str, int]] = {}  # key -> the stream and level it is measured on
    keyed: dict[bytes, str] = {}  # a stream's configuration but its name, and a level -> the key
    for stream_id, policy in policies.items():
        if policy.publish_delay_seconds is not None:
            continue
        # Levels alike share a measurement: the same largest input, and scored (level 0) or not.
        scores = policy.quality_epsilon is not None
        by_size = {
            (largest_input(policy, level), scores and level == 0): level
            for level in range(policy.top_level + 1)
        }
        keys[stream_id] = {}
        for level in by_size.values():
            alike = configuration_of(policy, level)
            key = keyed.get(alike) if alike is not None else None
            if key is None:
                # What the node's load, shipping and scoring cost depends on, besides the fits' workload.
                path = (
                    policy.privacy_unit,
                    policy.user_contribution_bound,
                    policy.window_kind,
                    policy.top_level + 1 if scores and level == 0 else 0,  # the estimates it scores
                )
                key = workload_key((slot_workload(policy, level), path))  # built again to be timed
                if alike is not None:
                    keyed[alike] = key
            keys[stream_id][level] = key
            owners.setdefault(key, (stream_id, level))
    if not keys:
        return dict(policies)
    # A learner process's start-up: the first stream's, spawned alone (the others spawn later).
    startup_key = workload_key("learner process start-up")
    respawn = cache.get(startup_key) if cache is not None else None
    if respawn is None:
        respawn = learner_startup(processes, next(iter(keys)))
        if cache is not None:
            cache.put(startup_key, respawn)
    seconds: dict[str, float] = {}
    cached = 0
    for key, (stream_id, level) in owners.items():
        known = cache.get(key) if cache is not None else None
        if known is not None:
            seconds[key], cached = known, cached + 1
            continue
        measurement = measure_slot(policies[stream_id], processes, level, respawn)
        seconds[key] = measurement.work
        log.info(
            "stream %s, level %d: a node's slot on %d public examples: %s",
            stream_id,
            level,
            measurement.examples,
            ", ".join(f"{part} {value:.3g} s" for part, value in measurement.to_dict()["seconds"].items()),
            extra={"stream_id": stream_id, "window_id": None, "ledger_entry_id": None},
        )
        if cache is not None:
            cache.put(key, seconds[key])
    log.info(
        "publication slots: %d distinct workloads for %d streams, %d measured alone, %d remembered (%s)",
        len(owners),
        len(keys),
        len(owners) - cached,
        cached,
        cache.path if cache is not None else "no cache",
    )
    derived = dict(policies)
    for stream_id, levels in keys.items():
        policy = policies[stream_id]
        timer = timer_seconds if policy.window_kind == "time" else 0.0
        measured = {level: seconds[key] for level, key in levels.items()}
        slots = tuple(
            slot_of(measured[min(m for m in measured if m >= level)], timer, respawn)
            for level in range(policy.top_level + 1)
        )
        derived[stream_id] = dataclasses.replace(policy, publish_delay_seconds=max(slots), level_slots=slots)
        log.info(
            "stream %s: publication slots %s s per level 0..%d (a node's load, shipping and fits took %s s "
            "at worst on public inputs, a learner process starts in %.3g s; set publish_delay_seconds to "
            "choose one slot for every level)",
            stream_id,
            ", ".join(f"{slot:g}" for slot in slots),
            policy.top_level,
            ", ".join(f"{seconds:.3g}" for _, seconds in sorted(measured.items())),
            respawn,
            extra={"stream_id": stream_id, "window_id": None, "ledger_entry_id": None},
        )
    return derived


def slots_fall_behind(policy: ReleasePolicy) -> str | None:
    """A warning when a time-window stream's slots outgrow its windows, else None.

    Each window closes one node of level 0 and, every 2^j windows, one of level j: per window, the
    slots of level j take ``slot_j / 2^j`` on average. Slots longer than a window in all put every
    release further behind its window than the one before.

    >>> slots_fall_behind(ReleasePolicy("s", None, (), window_kind="time", window_seconds=10.0,
    ...                                 top_level=1, publish_delay_seconds=7.0))  # doctest: +ELLIPSIS
    'stream s: its publication slots take 10.5 s per window of 10 s: ...'
    """
    if policy.window_kind != "time" or policy.slot(0) is None:
        return None
    if policy.window_seconds is None:
        raise InvariantError(f"invariant broken: time-window stream {policy.stream_id} has window_seconds")
    per_window = sum((policy.slot(level) or 0.0) / 2**level for level in range(policy.top_level + 1))
    if per_window <= policy.window_seconds:
        return None
    return (
        f"stream {policy.stream_id}: its publication slots take {per_window:g} s per window of "
        f"{policy.window_seconds:g} s: releases will fall further behind their windows; lengthen the "
        "windows, lower max_node_examples or top_level, or give a shorter publish_delay_seconds"
    )
