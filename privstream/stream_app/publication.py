"""The publication slots the service derives at start-up.

Every release is published at the end of its slot of ``publish_delay_seconds`` on its stream's
learner (:mod:`privstream.agents.timing`). Where a stream's configuration leaves the slot unset,
the service measures, in the stream's own learner process and before any example is read, how
long one node's slot may need at worst: for each product the default release's fit and the
slowest fit on public inputs of the largest input the learner can get (the input cap, or a count
node's public n; :func:`privstream.agents.releases.slot_workload`). The slot is a margin plus three
times that (:func:`privstream.learning.planning.slot_advice`), so a loaded machine still meets it;
the measurement is a function of public inputs and the machine only, never of the data.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import Future

from privstream.agents.fits import slot_seconds
from privstream.agents.releases import ReleasePolicy, slot_workload
from privstream.learning.planning import slot_advice
from privstream.stream_app.learner_process import LearnerProcesses

log = logging.getLogger(__name__)


def derive_slots(
    policies: dict[str, ReleasePolicy], processes: LearnerProcesses, timer_seconds: float
) -> dict[str, ReleasePolicy]:
    """The policies with every ``publish_delay_seconds`` set: as configured, or derived (measured in
    each stream's learner process, all streams at once). ``timer_seconds`` is the period of the
    timer that closes time windows: a time window's fits start up to that late."""
    measuring: dict[str, Future[float]] = {
        stream_id: processes.process(stream_id).submit(slot_seconds, slot_workload(policy))
        for stream_id, policy in policies.items()
        if policy.publish_delay_seconds is None
    }
    derived = dict(policies)
    for stream_id, future in measuring.items():
        policy = policies[stream_id]
        seconds = future.result()
        slot = slot_advice(seconds, timer_seconds if policy.window_kind == "time" else 0.0)
        derived[stream_id] = dataclasses.replace(policy, publish_delay_seconds=slot)
        log.info(
            "stream %s: publication slot %g s (a node's fits took %.3g s at worst on public inputs of "
            "%d examples; set publish_delay_seconds to choose it)",
            stream_id,
            slot,
            seconds,
            policy.max_node_examples or policy.window_size << policy.levels,
            extra={"stream_id": stream_id, "window_id": None, "ledger_entry_id": None},
        )
    return derived


def slots_fall_behind(policy: ReleasePolicy) -> str | None:
    """A warning when a time-window stream's slots outgrow its windows, else None.

    Each window closes one node of level 0 and, every 2^j windows, one of level j: on average
    ``2 - 2^-L`` nodes per window, each taking a slot. Slots longer than that share of a window put
    every release further behind its window than the one before.

    >>> slots_fall_behind(ReleasePolicy("s", None, (), window_kind="time", window_seconds=10.0,
    ...                                 levels=1, publish_delay_seconds=7.0))  # doctest: +ELLIPSIS
    'stream s: 1.5 publication slots of 7 s per window of 10 s: ...'
    """
    if policy.window_kind != "time" or policy.publish_delay_seconds is None:
        return None
    assert policy.window_seconds is not None
    per_window = 2 - 2.0**-policy.levels
    if per_window * policy.publish_delay_seconds <= policy.window_seconds:
        return None
    return (
        f"stream {policy.stream_id}: {per_window:g} publication slots of {policy.publish_delay_seconds:g} s "
        f"per window of {policy.window_seconds:g} s: releases will fall further behind their windows; "
        "lengthen the windows, lower max_node_examples or levels, or give a shorter publish_delay_seconds"
    )
