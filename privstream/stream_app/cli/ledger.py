"""The ``ledger`` command group: look at the privacy ledger, and the two audited changes a worker
refuses to make on its own: ``accept-config`` (a stream's new privacy configuration) and
``adopt`` (continue on a ledger that lacks part of the deployment's history)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privstream.stream_app.cli.common import UserError, add_config_option, load_settings

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    ledger = subparsers.add_parser(
        "ledger", help="the privacy ledger: show it, accept a configuration, adopt it"
    )
    commands = ledger.add_subparsers(dest="ledger_command", metavar="LEDGER_COMMAND", required=True)

    show = commands.add_parser(
        "show", help="the ledger's identity, streams, accepted configurations, audit log"
    )
    add_config_option(show)
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=run_show)

    accept = commands.add_parser(
        "accept-config",
        help="accept a stream's privacy configuration as configured now (a raised budget, another ε, "
        "window, levels or learner); recorded in the ledger's audit log",
    )
    add_config_option(accept)
    accept.add_argument("--stream", required=True, help="the stream whose configuration to accept")
    accept.add_argument("--reason", required=True, help="why (kept in the audit log)")
    accept.set_defaults(handler=run_accept_config)

    adopt = commands.add_parser(
        "adopt",
        help="continue the state store's history on this ledger although it lacks part of it (the "
        "ledger was lost, or only an older backup is left); recorded in the ledger's audit log",
    )
    add_config_option(adopt)
    adopt.add_argument("--reason", required=True, help="why (kept in the audit log)")
    adopt.set_defaults(handler=run_adopt)


def _ledger_errors(run: Any) -> Any:
    """Ledger errors as one line (the CLI's user errors)."""
    from privstream.agents.ledger_port import LedgerError

    try:
        return run()
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def run_show(args: argparse.Namespace) -> int:
    from privstream.stream_app.store import factory

    settings = load_settings(args)

    def read() -> dict[str, Any]:
        with factory.open_ledger(settings, create=False) as ledger:
            identity = ledger.identity()
            streams = {
                sid: {
                    "budget": list(ledger.budget(sid)),
                    "spent_per_example": list(ledger.spent(sid)),
                    "config": ledger.accepted_config(sid),
                }
                for sid in ledger.streams()
            }
            audit = [{**entry, "at": entry["at"].isoformat()} for entry in ledger.audit_log()]
            return {
                "ledger": {**identity._asdict(), "location": ledger.location},
                "streams": streams,
                "audit": audit,
            }

    shown = _ledger_errors(read)
    if args.json:
        print(json.dumps(shown))
        return 0
    ident = shown["ledger"]
    print(
        f"ledger {ident['ledger_id']} at {ident['location']}: epoch {ident['epoch']}, "
        f"entries up to {ident['entries']}"
    )
    for sid, stream in shown["streams"].items():
        print(f"  stream {sid}: budget {stream['budget']}, spent per example {stream['spent_per_example']}")
    for entry in shown["audit"]:
        stream = f" stream {entry['stream_id']}" if entry["stream_id"] else ""
        print(f"  {entry['at']} {entry['who']}: {entry['action']}{stream}: {entry['reason']}")
    return 0


def run_accept_config(args: argparse.Namespace) -> int:
    from privstream.stream_app.store import factory
    from privstream.stream_app.store.identity import operator
    from privstream.stream_app.store.privacy_config import differences, privacy_configuration

    settings = load_settings(args)
    stream = next((s for s in settings.streams if s.name == args.stream and s.release), None)
    if stream is None:
        releasing = sorted(s.name for s in settings.streams if s.release)
        raise UserError(f"no releasing stream {args.stream!r} in the configuration (releasing: {releasing})")
    config = privacy_configuration(stream, settings)

    def accept() -> dict[str, Any]:
        with factory.open_ledger(settings, create=False) as ledger:
            before = ledger.accepted_config(stream.name) or {}
            ledger.accept_config(stream.name, config, who=operator(), reason=args.reason)
            return differences(before, config)

    changed = _ledger_errors(accept)
    what = "; ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items()) or "no change"
    print(
        f"privstream ledger: accepted the privacy configuration of stream {stream.name}: {what}",
        file=sys.stderr,
    )
    return 0


def run_adopt(args: argparse.Namespace) -> int:
    from privstream.stream_app.store.identity import adopt
    from privstream.stream_app.store.published import newest_published

    settings = load_settings(args)

    def read() -> Any:  # the public topics' newest releases: the ids not to give again
        return newest_published(settings, per_partition=1000, timeout=30.0)

    identity = _ledger_errors(lambda: adopt(settings, reason=args.reason, published=read))
    print(
        f"privstream ledger: the state store's history continues on ledger {identity.ledger_id} "
        f"(epoch {identity.epoch}, entries from {identity.entries + 1})",
        file=sys.stderr,
    )
    return 0
