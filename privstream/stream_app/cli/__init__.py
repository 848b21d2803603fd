"""The ``privstream`` command line: one entry point, one module per command group.

Each module in :data:`COMMAND_MODULES` exposes ``register(subparsers)``, which adds its
sub-commands and sets ``handler`` (a function ``(args) -> int``) on each sub-parser.
Errors a user can fix (bad input files, bad configuration) are printed as one clear line
and exit with status 2; set ``PRIVSTREAM_DEBUG=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from privstream import __version__
from privstream.learning.errors import InvariantError
from privstream.learning.guarantees import GuaranteeError
from privstream.stream_app.cli.common import UserError
from privstream.stream_app.startup import StartupError

# Command groups, in the order ``privstream --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "worker",  # worker, broker
    "produce",
    "subscribe",
    "bench",  # ingest, startup, ledger, faults, scale
    "demo",
    "offline",  # dims, online
    "learn",  # learn, audit
    "sanitize",  # sanitize
    "bounds",  # bounds
    "evaluate",  # evaluate
    "plan",  # plan
    "config",  # config check, config schema
    "ledger",  # ledger show, accept-config, adopt, recover
    "keys",  # keys show, rotate
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privstream",
        description="Online learners paired with differentially-private releases, on Kafka.",
    )
    parser.add_argument("--version", action="version", version=f"privstream {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (UserError, StartupError, ValueError, OSError) as exc:
        # ValueError covers pydantic's ValidationError and the learning layer's input errors.
        if os.environ.get("PRIVSTREAM_DEBUG"):
            raise
        print(f"privstream {args.command}: error: {str(exc) or type(exc).__name__}", file=sys.stderr)
        return 2
    except (GuaranteeError, InvariantError) as exc:
        # Not the user's mistake: an algorithm that spent more than it was charged (nothing is
        # printed or published) or a broken invariant. One line and exit 1, as for any failure
        # that is not a usage error; PRIVSTREAM_DEBUG=1 shows the traceback.
        if os.environ.get("PRIVSTREAM_DEBUG"):
            raise
        kind = "refused" if isinstance(exc, GuaranteeError) else "internal error"
        print(f"privstream {args.command}: {kind}: {str(exc) or type(exc).__name__}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
