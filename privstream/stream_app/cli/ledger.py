"""The ``ledger`` command group: look at the privacy ledger, and the two audited changes a worker
refuses to make on its own: ``accept-config`` (a stream's new privacy configuration) and
``adopt`` (continue on a ledger that lacks part of the deployment's history); and ``recover``
(charge into a restored backup the releases the verified public log shows it lacks)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privstream.stream_app.cli.common import UserError, add_config_option, load_settings

if TYPE_CHECKING:
    from privstream_client.signing import RotationStatement

    from privstream.stream_app.settings import Settings

__all__ = ["register"]

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace) -> Any:
    """The deployment's settings, with the worker's log format on standard error (the ledger logs
    what it opens and changes)."""
    from privstream.stream_app.logs import configure_logging

    settings = load_settings(args)
    configure_logging(settings.log_level, settings.log_format)
    return settings


def register(subparsers: argparse._SubParsersAction) -> None:
    ledger = subparsers.add_parser(
        "ledger", help="the privacy ledger: show it, accept a configuration, adopt it, recover it"
    )
    commands = ledger.add_subparsers(dest="ledger_command", metavar="LEDGER_COMMAND", required=True)

    show = commands.add_parser(
        "show", help="the ledger's identity, signing keys, streams, accepted configurations, audit log"
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

    recover = commands.add_parser(
        "recover",
        help="charge into this ledger (a restored backup) the releases signed by the deployment that the "
        "public topics hold and it lacks, with their published bytes; recorded in the audit log",
    )
    add_config_option(recover)
    recover.add_argument("--reason", required=True, help="why (kept in the audit log)")
    recover.add_argument(
        "--rotations",
        type=Path,
        help="a saved /keys document whose rotation statements the ledger lacks (besides those of the "
        "keys topic and the one the worker last wrote in data_dir/release_signatures.sqlite3)",
    )
    recover.set_defaults(handler=run_recover)


def _ledger_errors(run: Any) -> Any:
    """Ledger errors as one line (the CLI's user errors)."""
    from privstream.agents.ledger_port import LedgerError

    try:
        return run()
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def run_show(args: argparse.Namespace) -> int:
    from privstream.stream_app.store import factory

    settings = _settings(args)

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
            keys = [
                {
                    "key_id": k.key_id,
                    "added_at": k.added_at.isoformat(),
                    "retired_at": None if k.retired_at is None else k.retired_at.isoformat(),
                }
                for k in ledger.signing_keys()
            ]
            return {
                "ledger": {**identity._asdict(), "location": ledger.location},
                "signing_keys": keys,
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
    for key in shown["signing_keys"]:
        state = "current" if key["retired_at"] is None else f"retired {key['retired_at']}"
        print(f"  signing key {key['key_id']}: added {key['added_at']}, {state}")
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

    settings = _settings(args)
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


def _public_log(settings: Any, required: bool = True) -> Any:
    """A reader of the verified public log (the deployment's keys; where it has none, one line,
    or with ``required`` false None: nothing on the topics could be verified)."""
    from privstream.agents.ledger_port import LedgerMissingError
    from privstream.stream_app.signing import SigningKeyError, deployment_keys
    from privstream.stream_app.store import factory
    from privstream.stream_app.store.published import read_public_log

    try:
        try:  # the keys the ledger records (none: a lost ledger, adopt replaces it)
            with factory.open_ledger(settings, create=False) as ledger:
                recorded = ledger.signing_keys()
        except LedgerMissingError:
            recorded = []
        keys = deployment_keys(settings, recorded)
    except SigningKeyError as exc:
        raise UserError(str(exc)) from None
    if not len(keys) and not required:
        log.warning("no public key of the deployment: the public topics are not read")
        return None
    if not len(keys):
        raise UserError(
            "no public key of the deployment to verify the public topics with: the worker's signing key "
            "(signing_key, signing_key_file, data_dir/signing_key.pem) or published_keys_file"
        )
    return lambda since: read_public_log(settings, keys, since, timeout=60.0)


def run_adopt(args: argparse.Namespace) -> int:
    from privstream.stream_app.store.identity import adopt

    settings = _settings(args)
    read = _public_log(settings, required=False)
    identity = _ledger_errors(lambda: adopt(settings, reason=args.reason, published=read))
    print(
        f"privstream ledger: the state store's history continues on ledger {identity.ledger_id} "
        f"(epoch {identity.epoch}, entries from {identity.entries + 1})",
        file=sys.stderr,
    )
    return 0


def _replay_rotations(
    settings: Settings,
    document: Path | None,
    reason: str,
    topic: Callable[[str], list[RotationStatement]] | None = None,
) -> list[str]:
    """The rotations the ledger lacks, recorded (a backup from before a rotation: the worker then
    starts with the new key), from the statements of the keys topic (``topic``: the ledger id's
    statements read from it), of ``document`` (a saved ``/keys``) and of the worker's last key
    statement. Only those chaining from the ledger's current key count (``replay_rotations``)."""
    from privstream_client.signing import rotation_statements

    from privstream.stream_app.key_rotation import replay_rotations
    from privstream.stream_app.store import factory
    from privstream.stream_app.store.identity import operator
    from privstream.stream_app.store.signatures import SIGNATURES_FILE, ReleaseSignatures

    texts = []
    if document is not None:
        try:
            texts.append(document.read_text())
        except OSError as exc:
            raise UserError(f"--rotations {document}: {exc.strerror or exc}") from None
    if (settings.data_dir / SIGNATURES_FILE).exists():
        saved = ReleaseSignatures(settings.data_dir / SIGNATURES_FILE, readonly=True)
        try:
            texts.append(json.dumps(saved.key_document()))
        finally:
            saved.close()
    statements = [s for text in texts for s in rotation_statements(text, strict=False)]
    with factory.open_ledger(settings, create=False) as ledger:
        if topic is not None:
            statements += topic(ledger.ledger_id)
        if not statements:
            return []
        return replay_rotations(ledger, statements, who=operator(), reason=reason)


def _rotations_on_topic(settings: Settings) -> Callable[[str], list[RotationStatement]] | None:
    """The keys topic's reader (None without Kafka: the embedded broker is memory-only)."""
    from privstream.stream_app.kafka.rotation_log import read_rotation_log

    if settings.kafka_bootstrap is None:
        return None
    return lambda ledger_id: read_rotation_log(settings, ledger_id).statements


def run_recover(args: argparse.Namespace) -> int:
    from privstream.stream_app.store.identity import recover

    settings = _settings(args)
    topic = _rotations_on_topic(settings)
    rotated = _ledger_errors(lambda: _replay_rotations(settings, args.rotations, args.reason, topic))
    if rotated:
        print(
            f"privstream ledger: recorded {len(rotated)} key rotations the ledger lacked; "
            f"current key {rotated[-1]}",
            file=sys.stderr,
        )
    read = _public_log(settings)
    done = _ledger_errors(lambda: recover(settings, reason=args.reason, published=read))
    named = ", ".join(done.charged[:5]) + (
        f" and {len(done.charged) - 5} more" if len(done.charged) > 5 else ""
    )
    print(
        f"privstream ledger: charged {len(done.charged)} releases of the verified public log into ledger "
        f"{done.identity.ledger_id}" + (f" ({named})" if named else "") + f"; epoch {done.identity.epoch}",
        file=sys.stderr,
    )
    return 0
