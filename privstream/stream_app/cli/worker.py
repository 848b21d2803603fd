"""Service commands: ``worker`` (the service) and ``broker`` (the embedded broker alone)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from privstream.stream_app.cli.common import UserError, add_config_option, load_settings
from privstream.stream_app.logs import configure_logging

if TYPE_CHECKING:
    from privstream.stream_app.settings import Settings

log = logging.getLogger(__name__)


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


def run_worker(args: argparse.Namespace) -> int:

    from privstream.agents.ledger_port import LedgerError
    from privstream.stream_app.embedded.broker import (
        EmbeddedBroker,
        on_embedded_broker,
        runs_embedded_broker,
        with_embedded_timings,
    )
    from privstream.stream_app.kafka.clients import ensure_topics
    from privstream.stream_app.service import build_service
    from privstream.stream_app.shutdown import PromptWorker, exit_without_finalizing
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
        if service.ledger is not None:
            send_missing_rotations(settings)
        # override_logging=False: mode would replace our handlers (and the JSON format) with its own.
        worker = PromptWorker(
            service.app,
            loglevel=settings.log_level,
            quiet=True,
            redirect_stdouts=False,
            override_logging=False,
        )
        worker.spinner = None  # its terminal codes would land in the log
        # A replaced examples log the worker may not read (kafka/log_marks.py): a graceful stop,
        # then one line and exit status 2, as for the refusals at start.
        service.ingest.stop_worker = lambda: os.kill(os.getpid(), signal.SIGTERM)
        # mode's Worker handles SIGINT/SIGTERM with a graceful stop (commit, close) and exits;
        # PromptWorker without its two seconds of fixed waits at the end.
        worker.execute_from_commandline()
    except SystemExit as exc:
        status = int(exc.code or 0)  # mode's Worker always ends with SystemExit
    finally:
        if broker is not None:
            broker.stop()
    if service.ingest.refused is not None:
        print(f"privstream worker: error: {service.ingest.refused}", file=sys.stderr)
        status = 2
    # The service stopped cleanly, everything committed and closed: exit without the
    # interpreter's finalization, seconds of garbage collection (Ctrl-C stops in well under 2 s).
    exit_without_finalizing(status)


def send_missing_rotations(settings: Settings) -> list[str]:
    """Send to the keys topic the rotations the ledger records that it lacks (one made while
    Kafka was down, or before the embedded broker restarted empty); the new key ids sent. A
    failure is a WARNING line, not a refusal: the ledger keeps the statements, ``/keys`` serves
    them, and the next start sends them."""
    from privstream.stream_app.kafka.rotation_log import publish_missing
    from privstream.stream_app.store import factory

    try:
        with factory.open_ledger(settings, create=False) as ledger:
            recorded = ledger.signing_keys()
        return publish_missing(settings, recorded)
    except Exception as exc:  # Kafka or the ledger unreachable: the statements stay in the ledger
        log.warning(
            "could not send the ledger's key rotations to %s (%s: %s); the next start tries again",
            settings.topic("keys"),
            type(exc).__name__,
            exc,
        )
        return []


def run_broker(args: argparse.Namespace) -> int:
    from privstream.stream_app.embedded.broker import LOOPBACK, BrokerError, EmbeddedBroker
    from privstream.stream_app.startup import port_problem

    why = None if args.port is None else port_problem(LOOPBACK, args.port)
    if why is not None:
        raise UserError(f"--port {args.port} on {LOOPBACK} {why}: choose a free port, or omit --port for one")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    broker = EmbeddedBroker(port=args.port)
    try:
        broker.start()
    except BrokerError as exc:  # taken between the check and the broker's bind
        raise UserError(str(exc)) from None
    try:
        print(broker.bootstrap, flush=True)
        print(
            f"embedded broker (pid {broker.pid}) listening on {broker.bootstrap}; Ctrl-C stops it",
            file=sys.stderr,
        )
        while not stop.wait(0.5):
            if broker.process is None or broker.process.poll() is not None:
                print("privstream broker: the broker process exited", file=sys.stderr)
                return 1
    finally:
        broker.stop()
    return 0
