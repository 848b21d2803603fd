"""The ``keys`` command group: the deployment's signing keys. ``show`` prints the key set the
public listener serves on ``/keys`` (the keys the ledger records, their rotation statements);
``rotate`` replaces the key with a new one, signed by the old (:mod:`..key_rotation`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from privstream.stream_app.cli.common import UserError, add_config_option, load_settings

if TYPE_CHECKING:
    from privstream_client.signing import RotationStatement

    from privstream.stream_app.settings import Settings

__all__ = ["register"]

T = TypeVar("T")


def register(subparsers: argparse._SubParsersAction) -> None:
    keys = subparsers.add_parser("keys", help="the deployment's signing keys: show them, rotate the key")
    commands = keys.add_subparsers(dest="keys_command", metavar="KEYS_COMMAND", required=True)

    show = commands.add_parser(
        "show", help="print the deployment's key set (as /keys serves it: keys and rotation statements)"
    )
    add_config_option(show)
    show.set_defaults(handler=run_show)

    rotate = commands.add_parser(
        "rotate",
        help="replace the deployment's signing key with a new one, signed by the old; recorded in the "
        "ledger (stop the workers first, start them after)",
    )
    add_config_option(rotate)
    rotate.add_argument("--reason", required=True, help="why (kept in the ledger's audit log)")
    rotate.add_argument(
        "--out",
        type=Path,
        help="write the new key to this new file (needed when the key is in the signing_key setting)",
    )
    rotate.set_defaults(handler=run_rotate)


def _ledger_errors(run: Callable[[], T]) -> T:
    from privstream.agents.ledger_port import LedgerError

    try:
        return run()
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def run_show(args: argparse.Namespace) -> int:
    from privstream.stream_app.key_rotation import key_document
    from privstream.stream_app.signing import KeySet
    from privstream.stream_app.store import factory

    settings = load_settings(args)

    def read() -> dict[str, Any]:
        with factory.open_ledger(settings, create=False) as ledger:
            recorded = ledger.signing_keys()
        published = KeySet.from_file(settings.published_keys_file) if settings.published_keys_file else None
        return key_document(recorded, published)

    print(json.dumps(_ledger_errors(read), indent=2))
    return 0


def run_rotate(args: argparse.Namespace) -> int:
    from privstream.stream_app.key_rotation import rotate
    from privstream.stream_app.store.identity import operator

    settings = load_settings(args)
    done = _ledger_errors(lambda: rotate(settings, reason=args.reason, who=operator(), out=args.out))
    print(
        f"privstream keys: rotated the signing key {done.old_key_id} -> {done.new_key_id} (now in "
        f"{done.path}); the ledger records the rotation statement, which /keys serves. Start the "
        "workers again (a worker with the old key refuses to start)",
        file=sys.stderr,
    )
    print(f"privstream keys: {_publish(settings, done.statement)}", file=sys.stderr)
    return 0


def _publish(settings: Settings, statement: RotationStatement) -> str:
    """The rotation statement sent to the keys topic: what became of it, for one line. Kafka
    down is not an error: the ledger holds the statement and the next worker start sends it."""
    from privstream.stream_app.kafka.rotation_log import publish_rotations

    topic = settings.topic("keys")
    if settings.kafka_bootstrap is None:
        return f"no kafka_bootstrap: the next worker start sends the rotation statement to {topic}"
    try:
        asyncio.run(asyncio.wait_for(publish_rotations(settings, [statement]), 60.0))
    except Exception as exc:  # any failure to reach Kafka: the statement is safe in the ledger
        return (
            f"could not send the rotation statement to {topic} ({type(exc).__name__}: {exc}); "
            "the next worker start sends it"
        )
    return f"sent the rotation statement to {topic}"
