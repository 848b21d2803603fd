"""``privstream subscribe``: print a stream's private releases as they arrive, verified."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from privstream.stream_app.cli.common import add_config_option, load_settings

if TYPE_CHECKING:
    from privstream.stream_app.sdk import Release


def register(subparsers: argparse._SubParsersAction) -> None:
    subscribe = subparsers.add_parser("subscribe", help="print a stream's private releases as they arrive")
    add_config_option(subscribe)
    subscribe.add_argument("stream", help="stream_id")
    subscribe.add_argument("--latest", action="store_true", help="only releases published from now on")
    subscribe.add_argument(
        "--level",
        type=level_choice,
        default="best",
        help="'best' (default): the newest release of the highest completed level of the release tree; "
        "'most-accurate': the release of lowest private error estimate (streams with quality_epsilon); "
        "a number: only that level (0: every window); 'all': every release",
    )
    subscribe.add_argument("--count", type=int, help="stop after this many releases")
    subscribe.add_argument("--timeout", type=float, help="stop after this many seconds")
    subscribe.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop once every release published before the start is read (and say so on stderr)",
    )
    subscribe.add_argument("--json", action="store_true", help="one release JSON per line")
    subscribe.add_argument(
        "--trusted-keys",
        type=Path,
        metavar="FILE",
        help="public keys releases must be signed with (a key set or PEM; else "
        "$PRIVSTREAM_TRUSTED_KEYS_FILE, else fetched from --keys-url)",
    )
    subscribe.add_argument(
        "--keys-url", help="where to fetch the key set (default: /keys of the public listener)"
    )
    subscribe.add_argument(
        "--keys-topic",
        action="store_true",
        help="with --trusted-keys: also follow the key rotations recorded on the deployment's keys topic "
        "(each statement signed by a key already trusted)",
    )
    subscribe.add_argument(
        "--ledger-id",
        help="the deployment's ledger id releases must name (else $PRIVSTREAM_LEDGER_ID, else the state "
        "file's, else the first verified release's)",
    )
    subscribe.add_argument(
        "--state-file",
        type=Path,
        metavar="FILE",
        help="keep the newest release held per level (and the positions read) here across restarts: a "
        "replay of an older release is refused after a restart too",
    )
    subscribe.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="accept unsigned releases (anyone who can write to the topic can then feed you theirs)",
    )
    subscribe.set_defaults(handler=run_subscribe)


def level_choice(text: str) -> str | int:
    """``--level``: ``best``, ``all`` or a level number.

    >>> level_choice("best"), level_choice("3")
    ('best', 3)
    """
    from privstream.stream_app.sdk import check_level

    try:
        return check_level(int(text) if text.strip().lstrip("-").isdigit() else text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def describe_release(release: Release) -> str:
    """One line for a person (the client's :func:`privstream_client.release.describe_release`):
    entry, level, the hypothesis in words (``predicts 1 for x ≥ 14,577``), ε and δ, n where
    public, the lifetime bound."""
    from privstream_client.release import describe_release as describe

    return describe(release)


def run_subscribe(args: argparse.Namespace) -> int:
    from privstream.stream_app.sdk import subscribe

    settings = load_settings(args)
    if settings.kafka_bootstrap is None:
        raise ValueError("set PRIVSTREAM_KAFKA_BOOTSTRAP (the demo prints the embedded broker's address)")

    subscription = subscribe(
        args.stream,
        settings=settings,
        from_beginning=not args.latest,
        level=args.level,
        verify=args.verify,
        trusted_keys=args.trusted_keys,
        keys_url=args.keys_url,
        keys_topic=args.keys_topic,
        until_caught_up=args.until_caught_up,
        ledger_id=args.ledger_id,
        state_file=args.state_file,
    )

    async def follow() -> None:
        async for release in subscription:
            print(release.to_json() if args.json else describe_release(release), flush=True)
            if args.count is not None and subscription.yielded >= args.count:
                break

    with contextlib.suppress(TimeoutError):  # --timeout ends a subscription normally
        asyncio.run(asyncio.wait_for(follow(), args.timeout) if args.timeout else follow())
    summary = subscription.summary()  # the rejections by reason (stale, foreign_deployment, unsigned, ...)
    print(f"caught up: {summary}" if subscription.caught_up else summary, file=sys.stderr, flush=True)
    return 0
