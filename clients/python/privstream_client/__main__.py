"""``privstream-subscribe STREAM``: print a stream's verified releases, one line each.

The same choices as ``privstream subscribe`` of the service, without the service installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path

from privstream_client.release import check_level, describe_release
from privstream_client.signing import SigningKeyError
from privstream_client.subscription import subscribe


def _level(text: str) -> str | int:
    try:
        return check_level(int(text) if text.strip().isdigit() else text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="privstream-subscribe", description=__doc__)
    parser.add_argument("stream", help="the stream's id")
    parser.add_argument("--bootstrap", help="Kafka servers host:port,... (else PRIVSTREAM_KAFKA_BOOTSTRAP)")
    parser.add_argument("--topic-prefix", help="the deployment's topic prefix (else PRIVSTREAM_TOPIC_PREFIX)")
    parser.add_argument(
        "--level", type=_level, default="best", help="best (default), most-accurate, all, or a level"
    )
    parser.add_argument("--trusted-keys", type=Path, help="a key set or PEM public keys to trust")
    parser.add_argument("--keys-url", help="where to fetch the key set (else PRIVSTREAM_KEYS_URL)")
    parser.add_argument(
        "--keys-topic",
        action="store_true",
        help="with --trusted-keys: follow the key rotations recorded on the deployment's keys topic",
    )
    parser.add_argument("--ledger-id", help="the deployment's ledger id (else PRIVSTREAM_LEDGER_ID)")
    parser.add_argument("--state-file", type=Path, help="keep what is held here across restarts")
    parser.add_argument("--latest", action="store_true", help="only releases published from now on")
    parser.add_argument("--until-caught-up", action="store_true", help="stop once the past is read")
    parser.add_argument("--count", type=int, help="stop after this many releases")
    parser.add_argument("--json", action="store_true", help="print each release as published")
    args = parser.parse_args(argv)
    try:
        subscription = subscribe(
            args.stream,
            bootstrap=args.bootstrap,
            topic_prefix=args.topic_prefix,
            level=args.level,
            trusted_keys=args.trusted_keys,
            keys_url=args.keys_url,
            keys_topic=args.keys_topic,
            from_beginning=not args.latest,
            until_caught_up=args.until_caught_up,
            ledger_id=args.ledger_id,
            state_file=args.state_file,
        )

        async def follow() -> None:
            async for release in subscription:
                print(release.to_json() if args.json else describe_release(release), flush=True)
                if args.count is not None and subscription.yielded >= args.count:
                    break

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(follow())
    except (ValueError, ConnectionError, SigningKeyError) as exc:
        print(f"privstream-subscribe: {exc}", file=sys.stderr)
        return 2
    print(subscription.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
