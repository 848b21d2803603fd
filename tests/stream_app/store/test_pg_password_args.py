"""PostgreSQL passwords never appear in a process's arguments (``ps``, ``/proc/PID/cmdline``): not
the embedded server's (``initdb`` takes a password file), not the public listener's process of a
worker on PostgreSQL (its password comes on its standard input), and a ``--url`` carrying one is
refused before any process sees it."""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from privstream.stream_app.cli import main
from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.store import pg_server
from privstream.stream_app.store.pg_server import PostgresServer, PostgresUnavailableError
from privstream.stream_app.store.postgres_ledger import PostgresConfig, PostgresLedger
from privstream.stream_app.web import public_process

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    )
]


def cmdlines(pid: int) -> list[bytes]:
    """The arguments of ``pid`` and of every process below it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            out.append(Path(f"/proc/{p}/cmdline").read_bytes())
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        todo += [int(c) for c in children]
    return out


def test_the_embedded_server_never_gets_its_password_as_an_argument(monkeypatch) -> None:
    started: list[list[str]] = []
    run, popen = subprocess.run, subprocess.Popen

    def recording_run(args: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append([str(a) for a in args])
        return run(args, *rest, **kwargs)

    def recording_popen(args: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append([str(a) for a in args])
        return popen(args, *rest, **kwargs)

    monkeypatch.setattr(pg_server.subprocess, "run", recording_run)
    monkeypatch.setattr(pg_server.subprocess, "Popen", recording_popen)
    server = PostgresServer(durable=False)
    try:
        server.start()
    except PostgresUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        with server.connect() as conn:  # a backend serving a client, its title set
            conn.execute("SELECT 1")
            running = cmdlines(server.pid or 0)
        assert any("initdb" in a[0] for a in started) and any("postgres" in a[0] for a in started)
        assert [a for a in started if any(server.password in part for part in a)] == []
        assert len(running) > 1 and [c for c in running if server.password.encode() in c] == []
    finally:
        server.stop()


@pytest.mark.live  # starts the public listener's process (a server)
async def test_the_public_listener_of_a_worker_on_postgresql_reads_its_password_from_stdin(
    pg_server: PostgresServer, tmp_path
) -> None:
    url = pg_server.create_database("t_public_listener_password")
    PostgresLedger.open(
        PostgresConfig(url, password=pg_server.password, pool_size=1),
        create_if_missing=True,
        budgets={"clicks": (3.0, 0.0)},
    ).close()
    settings = Settings(
        kafka_bootstrap="127.0.0.1:1",
        data_dir=tmp_path,
        streams=STREAMS,
        store_url=url,
        store_password=SecretStr(pg_server.password),
        _env_file=None,
        **free_listener_ports(),
    )
    service = public_process.PublicListenerProcess(settings)
    await service.start()
    try:
        child = service.process
        assert child is not None
        held = Path(f"/proc/{child.pid}/environ").read_bytes() + b"".join(cmdlines(child.pid))
        assert pg_server.password.encode() not in held
        # it reads the ledger with the password it got on its standard input
        url_budget = f"http://127.0.0.1:{settings.public_port}/streams/clicks/budget"
        with await asyncio.to_thread(urllib.request.urlopen, url_budget, None, 10) as response:
            assert response.status == 200
    finally:
        await service.stop()


def test_a_url_with_a_password_is_refused_before_any_process_sees_it(capsys) -> None:
    code = main(
        ["bench", "ledger", "--store", "postgresql", "--url", "postgresql://u:hunter2@127.0.0.1:1/db"]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and "store_password" in err and "hunter2" not in err and len(err.strip().splitlines()) == 1
    )
