"""Service commands: ``worker``, ``broker``, ``produce`` and ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privstream.stream_app.cli.common import add_config_option, load_settings
from privstream.stream_app.logs import configure_logging

if TYPE_CHECKING:
    from privstream.stream_app.sdk import Release
    from privstream.stream_app.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    worker = subparsers.add_parser(
        "worker",
        help="run the service (starts the embedded broker if no Kafka is configured)",
        description="Run the service: ingest, the online learners, the private releases and the two "
        "HTTP listeners. Settings come from the options below, PRIVSTREAM_* environment variables and "
        "the settings file, in that order; every setting is in the configuration reference "
        "(docs/guide/configuration.md, on the site: User guide > Configuration reference). Check a "
        "file first, creating nothing: privstream config check FILE. For editors: privstream config "
        "schema prints the file's JSON Schema. The first start of a deployment creates its privacy "
        "ledger with PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true (once).",
    )
    add_config_option(worker)
    worker.add_argument("--public-port", type=int, help="override PRIVSTREAM_PUBLIC_PORT (public listener)")
    worker.add_argument(
        "--operator-port",
        type=int,
        help="override PRIVSTREAM_OPERATOR_PORT (operator listener: /metrics, probes)",
    )
    worker.set_defaults(handler=run_worker)

    broker = subparsers.add_parser("broker", help="run only the embedded broker; prints its address")
    broker.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    broker.set_defaults(handler=run_broker)

    produce = subparsers.add_parser("produce", help="send examples from a file or a synthetic source")
    add_config_option(produce)
    produce.add_argument("--stream", required=True, help="stream_id of the examples")
    source = produce.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--file",
        type=Path,
        help="CSV with a header (x,y; or feature columns by name and y) or JSON lines ({x, y}; x a list "
        "for feature vectors)",
    )
    source.add_argument("--synthetic", type=int, metavar="N", help="N examples labelled by a random target")
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
    produce.add_argument("--seed", type=int, help="seed of the synthetic source")
    produce.set_defaults(handler=run_produce)

    subscribe = subparsers.add_parser("subscribe", help="print a stream's private releases as they arrive")
    add_config_option(subscribe)
    subscribe.add_argument("stream", help="stream_id")
    subscribe.add_argument("--latest", action="store_true", help="only releases published from now on")
    subscribe.add_argument(
        "--level",
        type=level_choice,
        default="best",
        help="'best' (default): the newest release of the highest completed level of the release tree; "
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
        "--no-verify",
        dest="verify",
        action="store_false",
        help="accept unsigned releases (anyone who can write to the topic can then feed you theirs)",
    )
    subscribe.set_defaults(handler=run_subscribe)

    bench = subparsers.add_parser("bench", help="benchmarks of the running service")
    bench_kinds = bench.add_subparsers(dest="bench", metavar="KIND", required=True)
    ingest = bench_kinds.add_parser("ingest", help="ingestion rate vs the raw Kafka client, and latency")
    add_config_option(ingest)
    ingest.add_argument("--examples", type=int, default=100_000, help="messages per measurement")
    ingest.add_argument("--batch-size", type=int, default=1000, help="examples per ExampleBatch message")
    ingest.add_argument("--latency-seconds", type=float, default=10.0, help="length of the latency run")
    ingest.add_argument(
        "--invalid-ratio",
        type=float,
        default=0.0,
        metavar="R",
        help="R > 0 adds a flood after the clean messages: N valid messages mixed with "
        "R*N hostile ones, then N hostile ones alone, each part's rate as a ratio to "
        "the raw consumer's on the same messages (mix_ratio, flood_ratio)",
    )
    ingest.add_argument("--json", action="store_true", help="print the result as one JSON line")
    ingest.set_defaults(handler=run_bench_ingest)
    startup = bench_kinds.add_parser(
        "startup",
        help="seconds from a worker's start to listening, store ready, partitions assigned and its "
        "first prediction: on its own embedded broker, on a running one, and restarted",
    )
    startup.add_argument("--json", action="store_true", help="print the result as one JSON line")
    startup.set_defaults(handler=run_bench_startup)
    ledger = bench_kinds.add_parser(
        "ledger", help="charges per second of the SQLite and PostgreSQL ledgers, 1/4/16 writers"
    )
    add_config_option(ledger)
    ledger.add_argument(
        "--store",
        action="append",
        choices=("sqlite", "postgresql"),
        help="a backend to measure (repeatable; default: both, side by side)",
    )
    ledger.add_argument(
        "--url",
        help="postgresql://USER@HOST:PORT/DB of a server where the bench may "
        "create and drop privstream_bench_* databases (password, TLS: the store_* "
        "settings); default: a throwaway local server",
    )
    ledger.add_argument("--writers", default="1,4,16", help="concurrent writer processes (1,4,16)")
    ledger.add_argument("--seconds", type=float, default=3.0, help="length of each measurement (3)")
    ledger.add_argument(
        "--users",
        default="10000,100000,1000000",
        help="users per user-level release for the per-user measurement (10^4,10^5,10^6)",
    )
    ledger.add_argument(
        "--user-releases", type=int, default=2, help="user-level releases per measurement (2)"
    )
    ledger.add_argument("--json", action="store_true", help="print the result as one JSON line")
    ledger.set_defaults(handler=run_bench_ledger)
    faults = bench_kinds.add_parser(
        "faults",
        help="workers on a shared store, killed every 20 s and cut from the database once: "
        "nothing lost, released twice or charged twice",
    )
    faults.add_argument("--workers", type=int, default=3, help="worker processes (3)")
    faults.add_argument(
        "--store",
        choices=("sqlite", "postgresql"),
        default="postgresql",
        help="the shared store: SQLite files on this host, or a throwaway PostgreSQL server",
    )
    faults.add_argument("--examples", type=int, default=200_000, help="examples produced (200000)")
    faults.add_argument("--streams", type=int, default=12, help="streams, each on its own partition (12)")
    faults.add_argument("--window", type=int, default=2000, help="count window size (2000)")
    faults.add_argument("--rate", type=float, default=2500.0, help="examples per second produced (2500)")
    faults.add_argument("--kill-every", type=float, default=20.0, help="seconds between SIGKILLs (20)")
    faults.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds to wait, after the producer, for every window (900)",
    )
    faults.add_argument("--json", action="store_true", help="print the result as one JSON line")
    faults.set_defaults(handler=run_bench_faults)

    scale = bench_kinds.add_parser(
        "scale",
        help="one stream's rate with private releases on next to online only, in one run: the ratio, "
        "RSS over time, the backlog, releases published by their deadlines",
    )
    add_config_option(scale)
    scale.add_argument("--examples", type=int, default=200_000, help="examples per phase (200000)")
    scale.add_argument(
        "--full", action="store_true", help="the full-size run: 1,000,000 examples (overrides --examples)"
    )
    scale.add_argument("--features", type=int, default=16, help="features per example (16)")
    scale.add_argument("--window", type=int, default=50_000, help="count window size (50000)")
    scale.add_argument("--top-level", type=int, default=2, help="the release tree's top level (2)")
    scale.add_argument(
        "--online-learner", default="auto", help="the stream's online learner (auto; e.g. perceptron)"
    )
    scale.add_argument("--producers", type=int, default=2, help="producer processes (2)")
    scale.add_argument(
        "--release-timeout",
        type=float,
        default=600.0,
        help="seconds to wait, after the last example, for the releases still due (600)",
    )
    scale.add_argument("--json", action="store_true", help="print the result as one JSON line")
    scale.set_defaults(handler=run_bench_scale)

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


def run_worker(args: argparse.Namespace) -> int:
    import faust

    from privstream.agents.ledger_port import LedgerError
    from privstream.stream_app.embedded.broker import (
        EmbeddedBroker,
        on_embedded_broker,
        runs_embedded_broker,
        with_embedded_timings,
    )
    from privstream.stream_app.kafka.clients import ensure_topics
    from privstream.stream_app.service import build_service
    from privstream.stream_app.startup import check_before_start, ledger_startup_error

    settings = load_settings(args, public_port=args.public_port, operator_port=args.operator_port)
    configure_logging(settings.log_level, settings.log_format)
    check_before_start(settings)  # ports and directories: one line naming the setting, before anything runs
    broker = None
    if settings.kafka_bootstrap is None:
        broker = EmbeddedBroker().start()
        settings = on_embedded_broker(settings, broker)
        print(f"privstream worker: started the embedded broker at {broker.bootstrap}", file=sys.stderr)
    try:
        asyncio.run(ensure_topics(settings))
        if broker is None and asyncio.run(runs_embedded_broker(settings)):
            settings = with_embedded_timings(settings)  # e.g. `privstream broker`'s
        try:
            service = build_service(settings)
        except LedgerError as exc:
            raise ledger_startup_error(exc, settings) from None
        # override_logging=False: mode would replace our handlers (and the JSON format) with its own.
        worker = faust.Worker(
            service.app,
            loglevel=settings.log_level,
            quiet=True,
            redirect_stdouts=False,
            override_logging=False,
        )
        worker.spinner = None  # its terminal codes would land in the log
        # mode's Worker handles SIGINT/SIGTERM with a graceful stop (commit, close) and exits.
        worker.execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        if broker is not None:
            broker.stop()


def run_broker(args: argparse.Namespace) -> int:
    from privstream.stream_app.embedded.broker import EmbeddedBroker

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedBroker(port=args.port) as broker:
        print(broker.bootstrap, flush=True)
        print(
            f"embedded broker (pid {broker.pid}) listening on {broker.bootstrap}; Ctrl-C stops it",
            file=sys.stderr,
        )
        while not stop.wait(0.5):
            if broker.process is None or broker.process.poll() is not None:
                print("privstream broker: the broker process exited", file=sys.stderr)
                return 1
    return 0


def run_produce(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    if settings.kafka_bootstrap is None:
        raise ValueError("set PRIVSTREAM_KAFKA_BOOTSTRAP (e.g. the address `privstream broker` prints)")

    from privstream.stream_app.kafka.clients import ensure_topics, produce_json

    records = produce_records(args, settings)
    asyncio.run(ensure_topics(settings))
    sent = asyncio.run(produce_json(settings, settings.topic("examples"), records))
    print(json.dumps({"sent": sent, "topic": settings.topic("examples")}))
    return 0


def produce_records(args: argparse.Namespace, settings: Settings) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(key, Example)`` records ``produce`` sends: from ``--file`` or ``--synthetic``, integer
    points or feature vectors as the stream is configured (or, for a stream the settings do not
    name, as the file or ``--class`` says)."""
    from privstream.stream_app.sources.files import read_examples, read_vector_stream_file
    from privstream.stream_app.sources.synthetic import (
        synthetic_examples,
        synthetic_vectors,
        vector_dimension,
    )

    stream = settings.stream(args.stream)
    if args.file is not None:
        holds_vectors = stream.kind == "vector" if stream is not None else _holds_vectors(args.file)
        if holds_vectors:
            X, ys, _ = read_vector_stream_file(args.file, stream.feature_labels if stream else None)
            if stream is not None and X.shape[1] != stream.features:
                raise ValueError(
                    f"{args.file}: {X.shape[1]} features, the stream {args.stream} has {stream.features}"
                )
            return (
                (args.stream, {"stream_id": args.stream, "x": x, "y": int(y)})
                for x, y in zip(X.tolist(), ys.tolist(), strict=True)
            )
        xs, ys = read_examples(args.file)
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
    if d is not None:
        if stream is not None and d != stream.features:
            raise ValueError(f"{spec}: the stream {args.stream} has {stream.features} features")
        bounds = stream.feature_bounds if stream is not None else None
        vectors = synthetic_vectors(d, args.synthetic, bounds, args.label_noise, args.seed, args.margin)
        return ((args.stream, e) for e in vectors.messages(args.stream))
    if args.margin is not None:
        raise ValueError("--margin applies to feature vectors (--class halfspaces:D)")
    batch = synthetic_examples(spec, args.synthetic, args.label_noise, args.seed)
    return ((args.stream, e) for e in batch.messages(args.stream))


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
        until_caught_up=args.until_caught_up,
    )

    async def follow() -> None:
        async for release in subscription:
            print(release.to_json() if args.json else describe_release(release), flush=True)
            if args.count is not None and subscription.yielded >= args.count:
                break

    with contextlib.suppress(TimeoutError):  # --timeout ends a subscription normally
        asyncio.run(asyncio.wait_for(follow(), args.timeout) if args.timeout else follow())
    skipped = sum(subscription.skipped.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(subscription.skipped.items()))
    summary = f"{subscription.yielded} releases; {skipped} records skipped" + (
        f" ({reasons})" if skipped else ""
    )
    if subscription.caught_up:
        print(f"caught up: {summary}", file=sys.stderr, flush=True)
    elif skipped:
        print(summary, file=sys.stderr, flush=True)
    return 0


def run_bench_ingest(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.ingest_rate import run_ingest_benchmark

    result = run_ingest_benchmark(
        args.examples,
        args.batch_size,
        args.latency_seconds,
        load_settings(args),
        invalid_ratio=args.invalid_ratio,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24} {value}")
    return 0


def run_bench_scale(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.scale import run_scale_benchmark

    n = 1_000_000 if args.full else args.examples
    for name in ("features", "window", "producers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1")
    if n < args.window:
        raise ValueError(f"--examples ({n}) must hold at least one window ({args.window})")
    result = run_scale_benchmark(
        n,
        features=args.features,
        window=args.window,
        top_level=args.top_level,
        online_learner=args.online_learner,
        producers=args.producers,
        settings=load_settings(args),
        release_timeout=args.release_timeout,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:16} {value}")
    return 0


def run_bench_startup(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.startup import run_startup_benchmark

    result = run_startup_benchmark()
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:16} {value}")
    return 0


def run_bench_ledger(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.ledger_rate import run_ledger_benchmark

    settings = load_settings(args)
    try:
        writers = [int(n) for n in args.writers.split(",")]
    except ValueError:
        raise ValueError(f"--writers takes numbers separated by commas, got {args.writers!r}") from None
    result = run_ledger_benchmark(
        args.store or ["sqlite", "postgresql"],
        url=args.url,
        password=settings.store_password_value() if args.url else None,
        sslmode=settings.store_sslmode if args.url else None,
        sslrootcert=str(settings.store_sslrootcert) if args.url and settings.store_sslrootcert else None,
        writers=writers,
        seconds=args.seconds,
        users_per_release=[int(n) for n in args.users.split(",") if n],
        user_releases=args.user_releases,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for store, workloads in result["results"].items():
            for workload, rates in workloads.items():
                line = ", ".join(f"{n} writers {rate:,.0f}/s" for n, rate in rates.items())
                print(f"{store:10} {workload:18} {line}")
        for store, by_users in result["per_user"].items():
            for users, figures in by_users.items():
                first = figures["first_release_users_per_second"]
                later = figures["later_releases_users_per_second"]
                print(
                    f"{store:10} {users:>8} users per release: first {first:,.0f} users/s, "
                    f"later {later:,.0f} users/s"
                )
    return 0


def run_bench_faults(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.faults import Options, run_faults_benchmark, targets_met

    result = run_faults_benchmark(
        Options(
            workers=args.workers,
            store=args.store,
            examples=args.examples,
            streams=args.streams,
            window=args.window,
            rate=args.rate,
            kill_every=args.kill_every,
            timeout=args.timeout,
        )
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0 if targets_met(result) else 1


def run_demo(args: argparse.Namespace) -> int:
    from privstream.stream_app.embedded.demo import Demo, summary_text

    settings = load_settings(args)
    summary = Demo(settings, args).run()
    print(json.dumps(summary, separators=(",", ":")) if args.json else summary_text(summary))
    return 0 if summary["processed"] == summary["examples"] else 1
