"""What ``privstream config check`` reports: a configuration checked as the worker would check it,
without any side effect (no topic, ledger, key, data folder or file is created).

A worker refuses a configuration in three places: when the settings load (every setting, the
algorithms' names, the cross-stream rules, the vector learners' refusals), when it builds each
stream's release policy (the learner's and the sanitizer's parameters) and before it starts (its
directories, its signing key, its ports, its ledger). :func:`check_configuration` runs the first
two as the worker does and the third read-only: a directory the worker would create is checked
by its nearest existing parent, a signing key is read but never generated, a port is bound and
released, a ledger is looked for and never opened. What the configuration fixes is reported per
stream: the lifetime ε and δ per example (or user) the certificates will state, each level's ε,
and the publication slots (configured, or how the worker derives them at start-up, measured here
on the same public inputs when asked).

>>> from privstream.stream_app.settings import Settings
>>> s = Settings(streams=[{"name": "a", "hypothesis_class": "thresholds:16",
...     "release": {"epsilon_budget": 2.0, "top_level": 1, "window": {"size": 100}}}], _env_file=None)
>>> report = check_configuration(s, simulate=False)
>>> stream = report.streams[0]
>>> stream["lifetime"]["epsilon"], stream["lifetime"]["level_epsilon"], stream["slots"]["inputs"]
(2.0, [1.0, 1.0], [100, 200])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.startup import directory_problem, port_problem, worker_directories

__all__ = ["ConfigReport", "check_configuration", "settings_schema"]


@dataclass
class ConfigReport:
    """The effective settings, what each stream's configuration fixes, and what the worker would
    say about its surroundings (``notes``) or its usefulness (``warnings``)."""

    settings: dict[str, Any]
    streams: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "streams": self.streams,
            "notes": self.notes,
            "warnings": self.warnings,
        }


def check_configuration(
    settings: Settings, *, simulate: bool = True, measure: bool = False, here: bool = False
) -> ConfigReport:
    """Check ``settings`` (already validated on load) as a worker would, with no side effect.

    Raises ``ValueError`` (one line) for what stops the worker wherever it runs (a learner's or a
    sanitizer's parameters it refuses, a signing key or a key set that does not parse); what stops
    it on this machine only (a key file it cannot read, a directory it cannot create, a port in use)
    is a note, or raises with ``here``. ``simulate`` runs the worker's check that a count window is
    large enough to be useful (a few seconds per stream); ``measure`` times each level's fits on
    public inputs as the worker does at start-up, to show the publication slots it would derive.
    """
    from privstream.learning.hypothesis_classes import parse_class_spec

    report = ConfigReport(settings=settings.model_dump(mode="json"))
    for stream in settings.streams:
        hclass = parse_class_spec(stream.hypothesis_class) if stream.hypothesis_class else None
        report.streams.append(_stream_report(settings, stream, hclass, report, simulate, measure))
    _check_surroundings(settings, report, here)
    return report


def _online_learner(stream: StreamConfig) -> str:
    """The online learner that runs on ``stream`` (``auto`` resolved, as the worker builds it)."""
    if stream.features is None:
        return "soa"
    from privstream.learning.online import resolve_stream_learner

    return resolve_stream_learner(stream.online_learner, stream.features, stream.classes)


def _stream_report(
    settings: Settings,
    stream: StreamConfig,
    hclass: Any,
    report: ConfigReport,
    simulate: bool,
    measure: bool,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": stream.name,
        "kind": stream.kind,
        "hypothesis_class": stream.hypothesis_class,
        "features": stream.features,
        "classes": stream.classes,
        "online_learner": _online_learner(stream),
    }
    config = stream.release
    if config is None:
        entry["release"] = None
        return entry

    from privstream.agents.ledger_port import PrivacyCost
    from privstream.agents.releases import largest_input
    from privstream.stream_app.release_policies import lifetime_bound, release_policy

    try:  # the learner's and the sanitizer's parameters, as the worker builds them
        policy = release_policy(stream, hclass)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"streams {stream.name}: release: {exc}") from None
    user_budget = (
        PrivacyCost(settings.user_epsilon_budget, settings.user_delta_budget)
        if config.privacy_unit == "user" and settings.user_epsilon_budget is not None
        else None
    )
    lifetime = lifetime_bound(config, user_budget)
    entry["release"] = {
        "learner": config.learner,
        "sanitizer": config.sanitizer,
        "window": config.window.model_dump(mode="json"),
        "top_level": config.top_level,
        "privacy_unit": config.privacy_unit,
    }
    entry["lifetime"] = {
        "epsilon": lifetime.epsilon,
        "delta": lifetime.delta,
        "epsilon_budget": lifetime.epsilon_budget,
        "delta_budget": lifetime.delta_budget,
        "per": config.privacy_unit,
        "level_epsilon": lifetime.level_epsilon,
        "learner_epsilon": config.learner_epsilons,
        "sanitizer_epsilon": config.sanitizer_epsilons,
        "rule": lifetime.rule,
    }
    inputs = [largest_input(policy, level) for level in range(config.top_level + 1)]
    slots: dict[str, Any] = {"inputs": inputs}
    if config.window.publish_delay_seconds is not None:
        slots |= {"source": "configured", "seconds": [config.window.publish_delay_seconds] * len(inputs)}
    elif measure:
        seconds, parts = _measured_slots(policy)
        slots |= {"source": "measured", "seconds": seconds, "parts": parts}
    else:
        slots |= {"source": "derived at start-up", "seconds": None}
    entry["slots"] = slots
    if slots["seconds"] is not None:
        import dataclasses

        from privstream.stream_app.publication import slots_fall_behind

        timed = dataclasses.replace(
            policy, publish_delay_seconds=max(slots["seconds"]), level_slots=tuple(slots["seconds"])
        )
        if why := slots_fall_behind(timed):
            report.warnings.append(why)
    if simulate and hclass is not None and config.window.kind == "count":
        from privstream.learning.planning import window_too_small

        product = policy.products[0]
        why = window_too_small(
            product.algorithm,
            hclass,
            epsilon=product.epsilon,
            delta=product.delta,
            alpha=policy.alpha,
            beta=policy.beta,
            window_size=policy.window_size,
        )
        if why:
            report.warnings.append(f"stream {stream.name}: window too small to be useful: {why}")
    return entry


def _measured_slots(policy: Any) -> tuple[list[float], list[dict[str, Any]]]:
    """The slots the worker derives at start-up and their parts, measured as
    :func:`~privstream.stream_app.publication.derive_slots` measures them (the fits in a learner
    process of the stream's own, the node's load and shipping here) on the same public inputs."""
    from privstream.agents.releases import largest_input
    from privstream.stream_app.learner_process import LearnerProcesses
    from privstream.stream_app.publication import SlotMeasurement, learner_startup, measure_slot
    from privstream.stream_app.release_policies import time_window_tick

    timer = time_window_tick({policy.stream_id: policy}) if policy.window_kind == "time" else 0.0
    processes = LearnerProcesses([policy.stream_id])
    measured: dict[int, SlotMeasurement] = {}
    try:
        respawn = learner_startup(processes, policy.stream_id)
        for level in range(policy.top_level + 1):
            size = largest_input(policy, level)
            same = next((m for m in measured if largest_input(policy, m) == size), None)
            measured[level] = (
                measured[same] if same is not None else measure_slot(policy, processes, level, respawn)
            )
    finally:
        processes.shutdown()
    levels = range(policy.top_level + 1)
    return [measured[level].slot(timer) for level in levels], [measured[j].to_dict(timer) for j in levels]


def _check_surroundings(settings: Settings, report: ConfigReport, here: bool) -> None:
    """The worker's start-up checks (``startup.check_before_start``, the signing key), read-only.
    What depends on this machine (a file or directory the settings name, a port) is a note, or an
    error with ``here`` (the worker is to start on this machine)."""
    from privstream.stream_app.signing import KeySet, Signer

    def problem(text: str) -> None:
        if here:
            raise ValueError(text)
        report.notes.append(f"on this machine, {text}")

    for path, setting in worker_directories(settings):
        if why := directory_problem(path):
            problem(f"{setting} {path}: {why}; set {setting} to a directory the worker may write")
    if settings.store_backend == "sqlite":
        releasing = any(s.release is not None for s in settings.streams)
        if releasing and not settings.resolved_ledger_path.exists():
            report.notes.append(
                f"the privacy ledger {settings.resolved_ledger_path} does not exist yet: the deployment's "
                "first worker creates it when started with PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true "
                "(once; later starts refuse a missing ledger)"
            )
    else:
        report.notes.append(
            "the ledger and the state are in the PostgreSQL database of store_url (not contacted here)"
        )
    if settings.signing_key is not None:  # a key in the settings is part of the configuration
        Signer.from_pem(settings.signing_key.get_secret_value().encode(), "signing_key")
    default_key = settings.data_dir / "signing_key.pem"
    key_file: tuple[Path, str] | None = None
    if settings.signing_key is None and settings.signing_key_file is not None:
        key_file = (settings.signing_key_file, "signing_key_file")
    elif settings.signing_key is None and default_key.is_file():
        key_file = (default_key, "the signing key")
    elif settings.signing_key is None:
        report.notes.append(f"no signing key yet: the first start on a new ledger creates {default_key}")
    if key_file is not None:
        try:
            pem = key_file[0].read_bytes()
        except OSError as exc:
            problem(f"cannot read {key_file[1]} {key_file[0]}: {exc.strerror or exc}")
        else:
            Signer.from_pem(pem, f"{key_file[1]} {key_file[0]}")
    for name in ("published_keys_file", "trusted_keys_file"):
        keys: Path | None = getattr(settings, name)
        if keys is None:
            continue
        try:
            text = keys.read_text()
        except OSError as exc:
            problem(f"cannot read {name} {keys}: {exc.strerror or exc}")
            continue
        KeySet.from_text(text)
    for zone in ("public", "operator"):
        host, port = getattr(settings, f"{zone}_host"), getattr(settings, f"{zone}_port")
        if why := port_problem(host, port):
            problem(f"the {zone} listener's address {host}:{port} {why}")


def settings_schema() -> dict[str, Any]:
    """The settings file's JSON Schema (pydantic's), with the ``$schema`` key a JSON file may carry
    to name it for an editor.

    >>> schema = settings_schema()
    >>> schema["properties"]["streams"]["items"]["$ref"], "$schema" in schema["properties"]
    ('#/$defs/StreamConfig', True)
    """
    schema = Settings.model_json_schema()
    schema["properties"] = {
        "$schema": {"type": "string", "description": "the JSON Schema of this file (for editors)"},
        **schema["properties"],
    }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
