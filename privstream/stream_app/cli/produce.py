"""``privstream produce``: send examples to a stream from a file or a synthetic source."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privstream.stream_app.cli.common import UserError, add_config_option, load_settings

if TYPE_CHECKING:
    from privstream.stream_app.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    produce = subparsers.add_parser("produce", help="send examples from a file or a synthetic source")
    add_config_option(produce)
    produce.add_argument("--stream", required=True, help="stream_id of the examples")
    source = produce.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--file",
        type=Path,
        help="CSV with a header (x,y; or feature columns by name and y; a tabular stream's columns by "
        "name and y) or JSON lines ({x, y}; x a list for feature vectors, an object of cells for a "
        "tabular stream's rows); labels 0/1, or 0..K-1 on a stream of K classes",
    )
    source.add_argument(
        "--synthetic",
        type=int,
        metavar="N",
        help="N examples labelled by a random target (on a stream of K classes, a linear K-class one)",
    )
    produce.add_argument(
        "--class",
        dest="class_spec",
        help="hypothesis class of the synthetic target, or halfspaces:D for feature vectors",
    )
    produce.add_argument("--label-noise", type=float, default=0.0, help="flip each synthetic label w.p. P")
    produce.add_argument(
        "--margin",
        type=float,
        help="halfspaces:D: keep only points this far from the target hyperplane (features scaled to "
        "[-1, 1]): a stream separable with that margin",
    )
    produce.add_argument(
        "--seed",
        type=int,
        help="seed of the synthetic source: its target and its points (default: a target fixed per "
        "stream, so every run labels by the same one, and fresh points)",
    )
    produce.set_defaults(handler=run_produce)


def run_produce(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    if settings.kafka_bootstrap is None:
        raise ValueError("set PRIVSTREAM_KAFKA_BOOTSTRAP (e.g. the address `privstream broker` prints)")

    from privstream.stream_app.kafka.clients import ensure_topics, produce_json

    records = keyed(settings, args.stream, produce_records(args, settings))
    asyncio.run(ensure_topics(settings))
    sent = asyncio.run(produce_json(settings, settings.topic("examples"), records))
    print(json.dumps({"sent": sent, "topic": settings.topic("examples")}))
    return 0


def produce_records(args: argparse.Namespace, settings: Settings) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(key, Example)`` records ``produce`` sends: from ``--file`` or ``--synthetic``, integer
    points or feature vectors as the stream is configured (or, for a stream the settings do not
    name, as the file or ``--class`` says)."""
    import numpy as np

    from privstream.learning.hypothesis_classes import parse_class_spec
    from privstream.stream_app.sources.files import read_examples, read_vector_stream_file
    from privstream.stream_app.sources.synthetic import (
        random_target,
        random_target_of,
        synthetic_examples,
        synthetic_vectors,
        vector_dimension,
    )

    stream = settings.stream(args.stream)
    if stream is None and settings.streams:  # the worker would dead-letter every one of them
        from privstream.stream_app.suggestions import unknown_name

        raise UserError(unknown_name("stream", args.stream, [s.name for s in settings.streams]))
    if stream is not None and stream.encoder is not None:  # a tabular stream: rows, by column name
        if args.file is None:
            raise UserError(f"stream {args.stream} is tabular: send its rows from a file (--file rows.csv)")
        from privstream.stream_app.sources.rows import read_row_file

        rows = read_row_file(args.file, stream.encoder, stream.classes)
        return ((args.stream, {"stream_id": args.stream, **row}) for row in rows)
    if args.file is not None:
        holds_vectors = stream.kind == "vector" if stream is not None else _holds_vectors(args.file)
        if holds_vectors:
            X, ys, _ = read_vector_stream_file(
                args.file, stream.feature_labels if stream else None, stream.classes if stream else 2
            )
            if stream is not None and X.shape[1] != stream.features:
                raise ValueError(
                    f"{args.file}: {X.shape[1]} features, the stream {args.stream} has {stream.features}"
                )
            return (
                (args.stream, {"stream_id": args.stream, "x": x, "y": int(y)})
                for x, y in zip(X.tolist(), ys.tolist(), strict=True)
            )
        xs, ys = read_examples(args.file)
        if stream is not None:
            _check_domain(args.file, xs, stream.hypothesis_class or "")
        return (
            (args.stream, {"stream_id": args.stream, "x": int(x), "y": int(y)})
            for x, y in zip(xs, ys, strict=True)
        )
    spec = args.class_spec
    if spec is None and stream is not None:
        spec = stream.hypothesis_class or f"halfspaces:{stream.features}"
    if not spec:
        raise ValueError("--synthetic needs --class SPEC (a class, or halfspaces:D for feature vectors)")
    d = vector_dimension(spec)
    if stream is not None and (d is None) != (stream.kind == "class"):
        takes = "integer points" if stream.kind == "class" else "feature vectors"
        raise ValueError(f"stream {args.stream} takes {takes}, not {spec}")
    if stream is not None and d is None and _canonical(spec) != _canonical(stream.hypothesis_class or ""):
        raise UserError(f"--class {spec}: the stream {args.stream} is of {stream.hypothesis_class}")
    target_seed = target_seed_of(args.stream, args.seed)
    if d is not None:
        if stream is not None and d != stream.features:
            raise ValueError(f"{spec}: the stream {args.stream} has {stream.features} features")
        bounds = stream.feature_bounds if stream is not None else None
        classes = stream.classes if stream is not None else 2
        normal = random_target_of(d, classes, np.random.default_rng(target_seed))
        vectors = synthetic_vectors(
            d, args.synthetic, bounds, args.label_noise, args.seed, args.margin, normal, classes
        )
        return ((args.stream, e) for e in vectors.messages(args.stream))
    if args.margin is not None:
        raise ValueError("--margin applies to feature vectors (--class halfspaces:D)")
    target = random_target(parse_class_spec(spec), np.random.default_rng(target_seed))
    batch = synthetic_examples(spec, args.synthetic, args.label_noise, args.seed, target=target)
    return ((args.stream, e) for e in batch.messages(args.stream))


def example_key(partition_by: str, stream_id: str, message: dict[str, Any]) -> str | None:
    """The Kafka key of an example: its stream's name (one partition), its ``id``, or its
    ``user_id`` (a user's examples on one partition), as the stream's ``partition_by`` says. An
    example without an id goes to a partition at random (key None); one without a user where the
    stream is partitioned by user is refused.

    >>> example_key("stream", "s", {"x": 1, "y": 0}), example_key("example", "s", {"id": "e7"})
    ('s', 'e7')
    >>> example_key("example", "s", {"x": 1}) is None, example_key("user", "s", {"user_id": "u1"})
    (True, 'u1')
    """
    if partition_by == "stream":
        return stream_id
    if partition_by == "example":
        example_id = message.get("id")
        return None if example_id is None else str(example_id)
    user = message.get("user_id")
    if user is None:
        raise UserError(f"stream {stream_id} is partitioned by user: every example needs a user_id")
    return str(user)


def keyed(
    settings: Settings, stream_id: str, records: Iterator[tuple[str, dict[str, Any]]]
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """``records`` with the keys the stream's ``partition_by`` gives them."""
    stream = settings.stream(stream_id)
    partition_by = stream.partition_by if stream is not None else "stream"
    for _, message in records:
        yield example_key(partition_by, stream_id, message), message


def target_seed_of(stream_id: str, seed: int | None) -> int:
    """The seed of a synthetic stream's target, fixed by the stream's name and ``--seed``: runs of
    ``produce`` without ``--seed`` all label by the same target (a second run with a new target
    would make a realizable stream non-realizable for good). Not the seed of the points, so the
    target is independent of them.

    >>> target_seed_of("clicks", None) == target_seed_of("clicks", None) != target_seed_of("views", None)
    True
    >>> target_seed_of("clicks", 7) != target_seed_of("clicks", None)
    True
    """
    tag = f"privstream-produce-target:{stream_id}:{'' if seed is None else seed}"
    return int.from_bytes(hashlib.sha256(tag.encode()).digest()[:8], "big")


def _canonical(spec: str) -> str:
    """A class spec in one spelling (``thresholds:2^16`` is ``thresholds:65536``)."""
    from privstream.learning.hypothesis_classes import parse_class_spec

    return str(parse_class_spec(spec).spec)


def _check_domain(path: Path, xs: Any, class_spec: str) -> None:
    """Refuse a file whose points lie outside the stream's domain (the worker would dead-letter them)."""
    from privstream.learning.hypothesis_classes import parse_class_spec

    domain = parse_class_spec(class_spec).domain_size
    bad = next((int(x) for x in xs if not 0 <= int(x) < domain), None)
    if bad is not None:
        raise UserError(f"{path}: x={bad} is outside the domain {{0, ..., {domain - 1}}} of {class_spec}")


def _holds_vectors(path: Path) -> bool:
    """Whether an example file holds feature vectors: JSON lines whose first ``x`` is a list, or a CSV
    whose header is not exactly ``x,y``."""
    from privstream.stream_app.sources.files import ExampleFileError

    try:
        first = next(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except (OSError, UnicodeDecodeError, StopIteration):
        return False  # the reader reports what is wrong with the file
    if first.lstrip().startswith("{"):
        try:
            return isinstance(json.loads(first).get("x"), list)
        except (json.JSONDecodeError, AttributeError):
            return False
    columns = {c.strip().lower() for c in first.split(",")}
    if "y" not in columns:
        raise ExampleFileError(f"{path}: the CSV's header must name the label column y")
    return columns != {"x", "y"}
