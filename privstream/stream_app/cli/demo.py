"""``privstream demo``: everything on this machine: the broker, a worker and a producer."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from privstream.stream_app.cli.common import add_config_option, load_settings

if TYPE_CHECKING:
    pass


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser("demo", help="run everything on this machine: broker, worker, producer")
    add_config_option(demo)
    demo.add_argument("--examples", type=int, default=20_000, help="examples to send (default 20000)")
    demo.add_argument(
        "--class",
        dest="class_spec",
        default="thresholds:65536",
        help="hypothesis class of the demo stream (default thresholds:65536)",
    )
    demo.add_argument(
        "--label-noise",
        type=float,
        default=0.0,
        help="flip each label with probability P (P > 0 makes the stream non-realizable)",
    )
    demo.add_argument("--invalid", type=int, default=0, help="also send this many malformed messages")
    demo.add_argument("--window", type=int, default=2000, help="examples per private release (2000)")
    demo.add_argument(
        "--top-level",
        type=int,
        default=4,
        metavar="L",
        help="the release tree's top level: releases at levels 0..L, a level-j release learning "
        "from 2^j windows (4)",
    )
    demo.add_argument("--levels", type=int, action=RenamedOption, dest="top_level", help=argparse.SUPPRESS)
    demo.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="ε of each release, every level (default: the lifetime budget split evenly)",
    )
    demo.add_argument(
        "--epsilon-budget", type=float, default=10.0, help="lifetime ε per example, over every level (10)"
    )
    demo.add_argument(
        "--vectors",
        type=int,
        metavar="D",
        help="a stream of D-feature vectors instead of a class: labelled by a random halfspace, learned "
        "online by the Perceptron (--online-learner) and released privately by the halfspaces learner",
    )
    demo.add_argument(
        "--online-learner",
        default="perceptron",
        help="--vectors: perceptron (default), averaged-perceptron, second-order-perceptron, logistic, "
        "scaled-logistic, scaled-passive-aggressive, weighted-majority, block-vote, auto",
    )
    demo.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="--vectors: the examples' margin from the target hyperplane (features scaled to [-1, 1]), "
        "and the Perceptron's γ: at most (D+1)/γ² mistakes (0.05)",
    )
    demo.add_argument("--seed", type=int, help="seed of the synthetic target and examples")
    demo.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    demo.add_argument("--json", action="store_true", help="print one JSON summary line at the end")
    demo.set_defaults(handler=run_demo)


class RenamedOption(argparse.Action):
    """A former option name: still works, with a note naming the new one."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option: str | None = None,
    ) -> None:
        new = "--" + self.dest.replace("_", "-")
        print(f"{parser.prog}: note: {option} is deprecated, write {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def run_demo(args: argparse.Namespace) -> int:
    from privstream.stream_app.embedded.demo import Demo
    from privstream.stream_app.embedded.demo_view import summary_text

    settings = load_settings(args)
    summary = Demo(settings, args).run()
    print(json.dumps(summary, separators=(",", ":")) if args.json else summary_text(summary))
    return 0 if summary["processed"] == summary["examples"] else 1
