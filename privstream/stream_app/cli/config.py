"""``privstream config check FILE`` and ``privstream config schema``.

``check`` validates a settings file as a worker would (every setting, the algorithms and their
parameters, the cross-stream rules, the directories, keys and ports) without creating anything,
then prints the effective settings and, per stream, the lifetime ε per example and the publication
slots (:mod:`privstream.stream_app.config_check`). A bad configuration is one line and exit 2.
``schema`` prints the settings' JSON Schema, for editors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from privstream.stream_app.cli.common import load_settings

CONFIGURATION_PAGE = "docs/guide/configuration.md (the site's Configuration reference)"


def register(subparsers: argparse._SubParsersAction) -> None:
    config = subparsers.add_parser(
        "config", help="check a settings file without starting a worker; the settings' JSON Schema"
    )
    kinds = config.add_subparsers(dest="config", metavar="ACTION", required=True)
    check = kinds.add_parser(
        "check",
        help="validate FILE as a worker would, with no side effect; print the effective settings, each "
        "stream's lifetime ε and its publication slots",
        description="Validate a settings file as `privstream worker` would (PRIVSTREAM_* variables "
        "still apply, as for the worker), creating nothing: no topic, ledger, key or data folder. "
        f"Every setting: {CONFIGURATION_PAGE}.",
    )
    check.add_argument("file", type=Path, metavar="FILE", help="TOML or JSON settings file")
    check.add_argument(
        "--measure-slots",
        action="store_true",
        help="time each level's fits on public inputs, as the worker does at start-up, to show the "
        "publication slots it would derive (where publish_delay_seconds is unset)",
    )
    check.add_argument(
        "--no-simulation",
        dest="simulate",
        action="store_false",
        help="skip the check that each count window is large enough to be useful (a few seconds per stream)",
    )
    check.add_argument(
        "--here",
        action="store_true",
        help="also refuse what would stop a worker started on this machine (a key file it cannot read, "
        "a directory it cannot create, a port in use); else each is a note",
    )
    check.add_argument("--json", action="store_true", help="print the report as one JSON object")
    check.set_defaults(handler=run_check)
    schema = kinds.add_parser("schema", help="print the settings file's JSON Schema (for editors)")
    schema.set_defaults(handler=run_schema)


def run_check(args: argparse.Namespace) -> int:
    from privstream.stream_app.config_check import check_configuration

    if not args.file.is_file():
        raise FileNotFoundError(f"config file {args.file} does not exist")
    args.config = args.file
    settings = load_settings(args)
    report = check_configuration(settings, simulate=args.simulate, measure=args.measure_slots, here=args.here)
    if args.json:
        print(json.dumps({"config_file": str(args.file), "valid": True, **report.to_dict()}))
        return 0
    print(f"{args.file}: valid")
    print("effective settings:")
    print(json.dumps(report.settings, indent=2))
    for stream in report.streams:
        print(_stream_lines(stream))
    for note in report.notes:
        print(f"note: {note}")
    for warning in report.warnings:
        print(f"warning: {warning}")
    return 0


def _stream_lines(stream: dict[str, Any]) -> str:
    what = stream["hypothesis_class"] or f"{stream['features']} features"
    if stream.get("classes", 2) != 2:
        what += f", {stream['classes']} classes"
    head = f"stream {stream['name']} ({what}, online: {stream['online_learner']})"
    release = stream.get("release")
    if release is None:
        return f"{head}: no private releases"
    window = release["window"]
    cut = (
        f"count windows of {window['size']:,}"
        if window["kind"] == "count"
        else f"time windows of {window['seconds']:g} s"
    )
    products = release["learner"] + (f" and {release['sanitizer']}" if release["sanitizer"] else "")
    life = stream["lifetime"]
    levels = f"0..{release['top_level']}"
    per_level = ", ".join(f"{e:g}" for e in life["level_epsilon"])
    slots = stream["slots"]
    sizes = ", ".join(f"{n:,}" for n in slots["inputs"])
    if slots["seconds"] is None:
        slot_text = (
            f"derived at start-up, per level {levels}: a margin plus 3x a node's load, shipping, default "
            f"and slowest fit on public inputs of {sizes} examples, never shorter than a learner process's "
            "start-up (--measure-slots times them here)"
        )
    else:
        seconds = ", ".join(f"{s:g}" for s in slots["seconds"])
        slot_text = f"{seconds} s per level {levels} ({slots['source']}; fits read at most {sizes} examples)"
    lines = [
        f"{head}: {products} on {cut}, levels {levels}",
        f"  lifetime per {life['per']}: ε {life['epsilon']:g}, δ {life['delta']:g} (budget ε "
        f"{life['epsilon_budget']:g}, δ {life['delta_budget']:g}); ε per level {levels}: {per_level}",
        f"  publication slots: {slot_text}",
    ]
    for level, parts in enumerate(slots.get("parts", ())):
        lines.append(f"    level {level}: {slot_parts_text(parts)}")
    return "\n".join(lines)


def slot_parts_text(parts: dict[str, Any]) -> str:
    """A measured slot's parts on one line (``SlotMeasurement.to_dict``).

    >>> slot_parts_text({"examples": 2000, "seconds": {"load": 0.01, "fit": 0.02}, "timer_seconds": 0.6,
    ...                  "slot_seconds": 1.0})
    'slot 1 s on 2,000 examples: load 0.01, fit 0.02, timer 0.6 s'
    """
    seconds = ", ".join(f"{part} {value:.3g}" for part, value in parts["seconds"].items())
    return (
        f"slot {parts['slot_seconds']:g} s on {parts['examples']:,} examples: {seconds}, "
        f"timer {parts['timer_seconds']:g} s"
    )


def run_schema(args: argparse.Namespace) -> int:
    from privstream.stream_app.config_check import settings_schema

    print(json.dumps(settings_schema(), indent=2))
    return 0
