"""The publication slot the service derives at start-up: measured in each stream's own learner
process on public inputs of the largest input the learner can get, never on the data."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from privstream.agents.fits import SlotParts
from privstream.agents.releases import largest_input, slot_workload
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.planning import SLOT_MARGIN_SECONDS, slot_advice
from privstream.stream_app.learner_process import LearnerProcesses
from privstream.stream_app.publication import derive_slots
from privstream.stream_app.release_policies import release_policy
from privstream.stream_app.settings import ReleaseConfig, StreamConfig


def stream(name: str, **release: object) -> StreamConfig:
    return StreamConfig(
        name=name,
        hypothesis_class="thresholds:1024",
        release={"epsilon_budget": 2.0, "sanitizer": "mwem", **release},
    )


def policy_of(config: StreamConfig):
    return release_policy(config, parse_class_spec("thresholds:1024"))


def test_the_slot_workload_is_each_products_default_and_its_fits_on_public_inputs_of_the_largest_node():
    count = policy_of(stream("c", top_level=3, window={"kind": "count", "size": 100}, max_node_examples=500))
    assert largest_input(count) == 500  # level 3 holds 800 examples, the learner reads 500
    work = slot_workload(count)
    assert len(work) == 2  # the learner, then the sanitizer
    for default, fits in work:
        assert len(default.xs) == 500 and set(default.xs.tolist()) == {0}  # n copies of a public point
        assert [len(fit.xs) for fit in fits] == [500, 500, 500]  # realizable, noise, constant
    timed = policy_of(stream("t", expected_size=20, window={"kind": "time", "seconds": 60.0}))
    assert largest_input(timed) == 100_000  # n private: the default input cap
    assert len(slot_workload(timed)[0][0].xs) == 0  # its default reads zero examples


def test_where_n_is_private_and_nothing_caps_the_input_the_slot_must_be_given():
    with pytest.raises(ValidationError, match=r"set window\.publish_delay_seconds"):
        ReleaseConfig(
            epsilon_budget=1.0,
            expected_size=5,
            max_node_examples=None,
            window={"kind": "time", "seconds": 60.0},
        )
    given = ReleaseConfig(
        epsilon_budget=1.0,
        expected_size=5,
        max_node_examples=None,
        window={"kind": "time", "seconds": 60.0, "publish_delay_seconds": 3.0},
    )
    assert given.window.publish_delay_seconds == 3.0


def test_a_configured_slot_is_kept_and_unset_ones_are_measured_per_level_in_the_streams_process():
    configured = policy_of(stream("a", window={"kind": "count", "size": 100, "publish_delay_seconds": 2.5}))
    derived = policy_of(
        stream("b", top_level=3, max_node_examples=400, window={"kind": "count", "size": 100})
    )
    assert derived.publish_delay_seconds is None
    processes = LearnerProcesses(["a", "b"])
    try:
        slots = derive_slots({"a": configured, "b": derived}, processes, timer_seconds=1.0)
        assert processes.child_pids("b") and not processes.child_pids("a")  # measured in b's own child
    finally:
        processes.shutdown()
    assert slots["a"] == configured and [configured.slot(j) for j in range(1)] == [2.5]
    b = slots["b"]
    assert b == dataclasses.replace(
        derived, publish_delay_seconds=b.publish_delay_seconds, level_slots=b.level_slots
    )
    assert len(b.level_slots) == 4 and b.publish_delay_seconds == max(b.level_slots)
    assert min(b.level_slots) >= SLOT_MARGIN_SECONDS  # count windows: no timer period
    assert b.level_slots[2] == b.level_slots[3]  # levels 2 and 3 both read 400 examples: one measurement


def test_no_derived_slot_is_shorter_than_a_learner_process_start_up():
    """A fit killed at its deadline hands over to the warm spare, and the new spare has one slot to
    start: the slot covers the measured start-up of the stream's learner process."""
    derived = policy_of(stream("b", max_node_examples=50, window={"kind": "count", "size": 50}))
    processes = LearnerProcesses(["b"])
    try:
        slots = derive_slots({"b": derived}, processes, timer_seconds=0.0)
        startup = processes.startup_seconds("b")
    finally:
        processes.shutdown()
    assert startup is not None and startup > 0
    assert min(slots["b"].level_slots) >= SLOT_MARGIN_SECONDS + startup


def test_the_slot_covers_loading_and_shipping_the_node_measured_on_public_rows(monkeypatch):
    """Building the node in the store, reading it back and shipping it are in the slot: a machine
    where they take 2 s gets a slot for 2 s more work."""
    from privstream.stream_app import publication
    from privstream.stream_app.slot_path import load_seconds

    derived = policy_of(stream("b", max_node_examples=50, window={"kind": "count", "size": 50}))
    assert load_seconds(derived, 0) > 0  # measured through a real store, on 50 public rows
    monkeypatch.setattr(publication, "load_seconds", lambda policy, level: 2.0)
    processes = LearnerProcesses(["b"])
    try:
        slots = derive_slots({"b": derived}, processes, timer_seconds=0.0)
    finally:
        processes.shutdown()
    assert min(slots["b"].level_slots) >= slot_advice(2.0)


class _Recording:
    """A stand-in for the learner processes: each call runs in a thread of its own, and the most
    measurements in flight at once are recorded."""

    def __init__(self):
        import threading

        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.measured: list[str] = []

    def startup_seconds(self, stream_id):
        return 0.5

    def process(self, stream_id):
        recording = self

        class Process:
            def submit(self, fn, *args):
                from concurrent.futures import Future
                from threading import Thread

                future = Future()
                timing = getattr(fn, "__name__", "") == "slot_parts"

                def run():
                    with recording.lock:
                        if timing:
                            recording.in_flight += 1
                            recording.most_in_flight = max(recording.most_in_flight, recording.in_flight)
                            recording.measured.append(stream_id)
                    result = SlotParts(0.0625, 0.0625, 0.125) if timing else fn(*args)
                    with recording.lock:
                        recording.in_flight -= timing
                    future.set_result(result)

                Thread(target=run).start()
                return future

        return Process()


def test_streams_configured_alike_share_one_measurement_and_distinct_ones_are_timed_one_at_a_time(
    tmp_path, monkeypatch
):
    """However many streams start together, each distinct workload is timed once, alone: 24 streams
    of two configurations get two measurements, never two at once, and the slots of the 24 are the
    slots of a worker with one stream of each configuration."""
    from privstream.stream_app import publication
    from privstream.stream_app.slot_cache import SlotCache

    # the node's load and shipping as fixed figures too: the slots compared below are then exact
    monkeypatch.setattr(publication, "load_seconds", lambda policy, level: 0.125)
    monkeypatch.setattr(publication, "ship_seconds", lambda processes, policy, level: 0.0625)
    window = {"kind": "count", "size": 100}
    alike = {f"s{i}": policy_of(stream(f"s{i}", window=window)) for i in range(12)}
    other = {f"t{i}": policy_of(stream(f"t{i}", window=window, max_node_examples=50)) for i in range(12)}
    many = _Recording()
    slots = derive_slots({**alike, **other}, many, timer_seconds=0.0)
    assert len(many.measured) == 2 and many.most_in_flight == 1
    assert len({slots[s].level_slots for s in alike}) == 1 and len({slots[t].level_slots for t in other}) == 1
    # the same measurement on its own gives the same slot (the stand-in's timings are fixed)
    alone = derive_slots({"s0": alike["s0"]}, _Recording(), timer_seconds=0.0)
    assert alone["s0"].level_slots == slots["s5"].level_slots
    # remembered: a restart measures nothing and derives the same slots
    cache = SlotCache(tmp_path / "slots.json")
    first = derive_slots({**alike, **other}, _Recording(), timer_seconds=0.0, cache=cache)
    again = _Recording()
    restarted = derive_slots({**alike, **other}, again, timer_seconds=0.0, cache=SlotCache(cache.path))
    assert again.measured == [] and restarted == first


def test_a_remembered_measurement_is_keyed_by_the_workload_not_the_stream_name(tmp_path):
    from privstream.stream_app.slot_cache import SlotCache, workload_key

    a = policy_of(stream("a", window={"kind": "count", "size": 100}))
    renamed = policy_of(stream("renamed", window={"kind": "count", "size": 100}))
    bigger = policy_of(stream("a", window={"kind": "count", "size": 200}))
    assert workload_key(slot_workload(a, 0)) == workload_key(slot_workload(renamed, 0))
    assert workload_key(slot_workload(a, 0)) != workload_key(slot_workload(bigger, 0))
    broken = tmp_path / "slots.json"
    broken.write_text("{not json")
    assert SlotCache(broken).get(workload_key(slot_workload(a, 0))) is None  # unreadable: measured again


def test_the_slot_is_measured_part_by_part_and_covers_every_part(monkeypatch):
    """A node's slot on public inputs, part by part (load, ship, default, prepare, fit, respawn):
    the derived slot is the advice on the sum of the work, never below the respawn floor."""
    from privstream.stream_app.publication import SlotMeasurement, measure_slot, respawn_floor, slot_of

    derived = policy_of(stream("b", max_node_examples=50, window={"kind": "count", "size": 50}))
    processes = LearnerProcesses(["b"])
    try:
        measured = measure_slot(derived, processes, 0, respawn_seconds=0.5)
    finally:
        processes.shutdown()
    assert measured.examples == 50
    parts = measured.to_dict()["seconds"]
    assert list(parts) == ["load", "ship", "score", "default", "prepare", "fit", "respawn"]
    assert measured.score == 0.0  # no quality_epsilon: nothing scored
    assert all(value >= 0 for value in parts.values()) and measured.load > 0 and measured.fit > 0
    assert measured.work == pytest.approx(
        sum(v for k, v in vars(measured).items() if k not in ("examples", "respawn"))
    )
    heavy = SlotMeasurement(50, load=1.0, ship=0.5, default=0.25, prepare=0.25, fit=1.0, respawn=0.1)
    assert heavy.slot() == slot_advice(3.0) == slot_of(3.0, 0.0, 0.1)  # every part counts
    assert SlotMeasurement(50, 0, 0, 0, 0, 0, respawn=2.0).slot() == respawn_floor(2.0) >= 2.25


def test_the_level_0_slot_covers_scoring_every_release_its_window_estimates(monkeypatch):
    """With quality_epsilon, a level-0 node's window scores the releases that ended just before it
    (up to top_level + 1 of them, on its rows) before its defaults: that work is in the level-0
    slot, measured on the cap's public rows; the levels above score nothing. Scoring made slow
    (a pause per scored release) moves the level-0 slot and only it."""
    import time

    from privstream.stream_app import slot_path
    from privstream.stream_app.publication import measure_slot

    scored: list[int] = []
    predict = slot_path.predictions

    def slow_predictions(release, xs):
        scored.append(len(xs))
        time.sleep(0.4)
        return predict(release, xs)

    monkeypatch.setattr(slot_path, "predictions", slow_predictions)
    window = {"kind": "time", "seconds": 60.0}
    config = stream(
        "q",
        learner="generic",
        sanitizer=None,
        expected_size=50,
        max_node_examples=50,
        top_level=2,
        quality_epsilon=0.5,
        window=window,
    )
    policy = policy_of(config)
    processes = LearnerProcesses(["q"])
    try:
        level_0 = measure_slot(policy, processes, 0, respawn_seconds=0.1)
        assert scored == [50, 50, 50] and level_0.score >= 1.2
        assert level_0.work >= level_0.score + level_0.fit
        assert measure_slot(policy, processes, 1, respawn_seconds=0.1).score == 0.0 and len(scored) == 3
        slots = derive_slots({"q": policy}, processes, timer_seconds=0.6)["q"].level_slots
        unscored = derive_slots(
            {"q": dataclasses.replace(policy, quality_epsilon=None)}, processes, timer_seconds=0.6
        )["q"].level_slots
    finally:
        processes.shutdown()
    assert len(scored) == 6  # derive_slots timed level 0 (three estimates) apart from the levels above
    # Level 0's slot holds its scoring (a lower bound: the pauses); the levels above scored
    # nothing (counted above). Their slots are measured times: never compared with level 0's.
    assert slots[0] >= slot_advice(1.2, 0.6) and len(slots) == 3
    assert len(unscored) == 3 and len(scored) == 6  # without quality_epsilon nothing is scored


def test_plan_and_config_check_give_the_slot_the_worker_derives(monkeypatch, tmp_path, capsys):
    """The same measurement gives the same slot in all three: the worker's start-up
    (derive_slots), ``privstream config check --measure-slots`` and ``privstream plan``."""
    import json

    from privstream.stream_app import publication
    from privstream.stream_app.cli import main
    from privstream.stream_app.publication import SlotMeasurement

    fixed = SlotMeasurement(
        2000, load=0.125, ship=0.0625, default=0.03125, prepare=0.03125, fit=0.5, respawn=0.3
    )
    seen: list[int] = []

    def measure(policy, processes, level, respawn_seconds, path=None):
        seen.append(publication.largest_input(policy, level))
        return fixed

    monkeypatch.setattr(publication, "measure_slot", measure)
    monkeypatch.setattr(publication, "learner_startup", lambda processes, stream_id: fixed.respawn)
    window = {"kind": "time", "seconds": 6.0}
    config = stream(
        "s", learner="generic", sanitizer=None, expected_size=2000, max_node_examples=2000, window=window
    )
    worker = derive_slots({"s": policy_of(config)}, processes=None, timer_seconds=0.6)["s"].level_slots
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"streams": [config.model_dump(mode="json", exclude_none=True)]}))
    assert main(["config", "check", str(settings), "--json", "--measure-slots", "--no-simulation"]) == 0
    checked = json.loads(capsys.readouterr().out)["streams"][0]["slots"]
    argv = ["plan", "thresholds:1024", "--epsilon", "1", "--alpha", "0.2", "--only", "generic", "--runs", "1"]
    argv += ["--budget", "1", "--node-size", "2000", "--window-seconds", "6", "--no-progress", "--json"]
    assert main(argv) == 0
    planned = json.loads(capsys.readouterr().out)["candidates"][0]
    assert seen == [2000, 2000, 2000]
    assert worker == (fixed.slot(0.6),) and checked["seconds"] == [fixed.slot(0.6)]
    assert planned["publish_delay_seconds"] == fixed.slot(0.6) == checked["parts"][0]["slot_seconds"]
    assert planned["slot_parts"] == fixed.to_dict(0.6) == checked["parts"][0]


def test_the_slot_cache_is_the_machines_unless_configured_or_unwritable(tmp_path, monkeypatch):
    from privstream.stream_app.slot_cache import CACHE_FILE, cache_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # shared by every data directory of the machine: a fresh one finds what another start measured
    assert (
        cache_path(None, tmp_path / "a")
        == cache_path(None, tmp_path / "b")
        == tmp_path / "cache" / "privstream" / CACHE_FILE
    )
    assert cache_path(tmp_path / "mine.json", tmp_path / "a") == tmp_path / "mine.json"
    (tmp_path / "file").write_text("")  # a cache directory that cannot be made: the data directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert cache_path(None, tmp_path / "a") == tmp_path / "a" / CACHE_FILE


def test_a_measurement_is_keyed_by_the_code_that_ran_it():
    from privstream.stream_app.slot_cache import code_digest, machine

    assert code_digest() in machine()


def test_the_workload_of_streams_configured_alike_is_built_and_digested_once(monkeypatch):
    """Building a slot's workload (public arrays of the level's largest input) and digesting it cost
    seconds per stream at 24 streams; streams whose configuration differs only by name share it."""
    from privstream.stream_app import publication

    built: list[tuple[str, int]] = []

    def counted(policy, level):
        built.append((policy.stream_id, level))
        return slot_workload(policy, level)

    monkeypatch.setattr(publication, "slot_workload", counted)
    monkeypatch.setattr(publication, "load_seconds", lambda policy, level: 0.125)
    monkeypatch.setattr(publication, "ship_seconds", lambda processes, policy, level: 0.0625)
    window = {"kind": "count", "size": 100}
    alike = {f"s{i}": policy_of(stream(f"s{i}", window=window)) for i in range(6)}
    other = {"t": policy_of(stream("t", window=window, max_node_examples=50))}
    slots = derive_slots({**alike, **other}, _Recording(), timer_seconds=0.0)
    levels = alike["s0"].top_level + 1
    assert sorted({sid for sid, _ in built}) == ["s0", "t"]  # s1..s5 reuse s0's
    assert len([b for b in built if b[0] == "s0"]) <= 2 * levels  # keyed, then measured
    assert len({slots[s].level_slots for s in alike}) == 1


def test_plan_times_the_quality_estimates_of_a_stream_with_quality_epsilon(monkeypatch, capsys):
    """``privstream plan --quality-epsilon`` measures the slot of a stream that scores its
    releases, as the worker does; without it, of one that does not."""
    import json

    from privstream.stream_app import publication
    from privstream.stream_app.cli import main
    from privstream.stream_app.publication import SlotMeasurement

    seen: list[float | None] = []

    def measure(policy, processes, level, respawn_seconds, path=None):
        seen.append(policy.quality_epsilon)
        score = 0.5 if policy.quality_epsilon else 0.0
        return SlotMeasurement(20, 0.0, 0.0, 0.0, 0.0, 0.0, respawn=0.1, score=score)

    monkeypatch.setattr(publication, "measure_slot", measure)
    monkeypatch.setattr(publication, "learner_startup", lambda processes, stream_id: 0.1)
    argv = ["plan", "thresholds:1024", "--epsilon", "1", "--alpha", "0.2", "--only", "generic", "--runs", "1"]
    argv += ["--budget", "1", "--node-size", "20", "--no-progress", "--json"]
    for extra in ([], ["--quality-epsilon", "0.25"]):
        assert main(argv + extra) == 0
        parts = json.loads(capsys.readouterr().out)["candidates"][0]["slot_parts"]
        assert parts["seconds"]["score"] == (0.5 if extra else 0.0)
    assert seen == [None, 0.25]
