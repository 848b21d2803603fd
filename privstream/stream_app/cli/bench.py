"""``privstream bench``: benchmarks of the running service (ingest, startup, ledger, faults, scale)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from privstream.stream_app.cli.common import add_config_option, load_settings

if TYPE_CHECKING:
    pass


def register(subparsers: argparse._SubParsersAction) -> None:
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
    faults.add_argument(
        "--partitioned",
        type=int,
        metavar="N",
        help="instead of --streams: one stream keyed by example id over N partitions, time windows",
    )
    faults.add_argument(
        "--window-seconds", type=float, default=10.0, help="--partitioned: time window length (10)"
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
    scale.add_argument(
        "--window", type=int, help="count window size (default: a twentieth of the examples: 20 windows)"
    )
    scale.add_argument("--top-level", type=int, default=2, help="the release tree's top level (2)")
    scale.add_argument(
        "--window-seconds",
        type=float,
        help="the release on time windows of so many seconds instead, each capped at --window examples",
    )
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
    scale.add_argument(
        "--partitioned",
        type=int,
        metavar="N",
        help="instead: one stream keyed by example id over N partitions, read by 1, 2 and 3 workers "
        "in turn (PostgreSQL): the rate per worker",
    )
    scale.add_argument(
        "--ready-streams",
        type=int,
        metavar="N",
        help="instead: how long a worker with N releasing streams takes to be ready, with no slot "
        "measurement remembered and with them remembered",
    )
    scale.add_argument("--json", action="store_true", help="print the result as one JSON line")
    scale.set_defaults(handler=run_bench_scale)


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
    if args.partitioned is not None:
        from privstream.stream_app.bench.spread_rate import run_spread_rate_benchmark

        spread = run_spread_rate_benchmark(args.partitioned, n)
        print(json.dumps(spread) if args.json else "\n".join(json.dumps(r) for r in spread["runs"]))
        return 0
    window = args.window if args.window is not None else max(1, n // 20)
    if args.ready_streams is not None:
        from privstream.stream_app.bench.ready import run_ready_benchmark

        ready = run_ready_benchmark(
            args.ready_streams, args.features, window, args.top_level, settings=load_settings(args)
        )
        print(json.dumps(ready) if args.json else "\n".join(f"{k:16} {v}" for k, v in ready.items()))
        return 0
    for name, value in (("features", args.features), ("window", window), ("producers", args.producers)):
        if value < 1:
            raise ValueError(f"--{name} must be at least 1")
    if n < window:
        raise ValueError(f"--examples ({n}) must hold at least one window ({window})")
    result = run_scale_benchmark(
        n,
        features=args.features,
        window=window,
        top_level=args.top_level,
        online_learner=args.online_learner,
        producers=args.producers,
        settings=load_settings(args),
        release_timeout=args.release_timeout,
        window_seconds=args.window_seconds,
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


def refuse_password_in_url(url: str, where: str) -> None:
    """A PostgreSQL URL given as an argument must not hold the password: every user of the machine
    can read a process's arguments (``ps``). The message does not repeat the URL.

    >>> refuse_password_in_url("postgresql://u@db/x", "--url")
    >>> refuse_password_in_url("postgresql://u:pw@db/x", "--url")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --url holds a password, which every user of this machine can read in the process list: ...
    """
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except Exception:
        raise ValueError(f"{where} is not a PostgreSQL URL") from None
    if params.get("password"):
        raise ValueError(
            f"{where} holds a password, which every user of this machine can read in the process list: "
            "give it in store_password or store_password_file (or PGPASSWORD) instead"
        )


def run_bench_ledger(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench.ledger_rate import run_ledger_benchmark

    settings = load_settings(args)
    if args.url:
        refuse_password_in_url(args.url, "--url")
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

    if args.partitioned is not None:
        return run_bench_partitioned(args)
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


def run_bench_partitioned(args: argparse.Namespace) -> int:
    from privstream.stream_app.bench import partitioned

    result = partitioned.run_partitioned_benchmark(
        partitioned.PartitionedOptions(
            partitions=args.partitioned,
            workers=args.workers,
            store=args.store,
            examples=args.examples,
            window_seconds=args.window_seconds,
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
    return 0 if partitioned.targets_met(result) else 1
