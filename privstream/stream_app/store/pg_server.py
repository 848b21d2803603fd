"""A throwaway PostgreSQL server on 127.0.0.1, for the tests and ``privstream bench ledger``.

Not a way to run production: it lives in a temporary directory and is deleted when stopped.
It uses the server binaries installed on the machine (Debian's ``postgresql`` package puts them
in ``/usr/lib/postgresql/<version>/bin``; ``$PRIVSTREAM_PG_BINDIR`` overrides the search):

* ``initdb`` makes a cluster whose superuser ``privstream`` has a random password; connections over
  TCP need it (``scram-sha-256``), so the clients exercise the same password path as in production;
* ``postgres`` listens on 127.0.0.1 and a free port, as a child process that gets SIGINT (a fast
  shutdown) when its parent dies (if started from the main thread);
* PostgreSQL refuses to run as root: as root, the server runs as an unprivileged user
  (``$PRIVSTREAM_PG_OS_USER``, else ``postgres`` if it exists, else ``nobody``) that owns the
  temporary directory.

>>> with PostgresServer() as server:                 # doctest: +SKIP
...     url = server.create_database("ledger_test")
...     print(url, server.password)
postgresql://privstream@127.0.0.1:40123/ledger_test 3f1c...
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from privstream.learning.errors import InvariantError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
SUPERUSER = "privstream"
BINDIR_ENV = "PRIVSTREAM_PG_BINDIR"
OS_USER_ENV = "PRIVSTREAM_PG_OS_USER"
_PR_SET_PDEATHSIG = 1


class PostgresUnavailableError(RuntimeError):
    """The server binaries are missing or the server would not start (the message says which)."""


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``postgres``, or :class:`PostgresUnavailableError`."""
    candidates: list[Path] = []
    if override := os.environ.get(BINDIR_ENV):
        candidates.append(Path(override))
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", path)) or (0,)

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    candidates.append(Path("/usr/local/pgsql/bin"))
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise PostgresUnavailableError(
        "PostgreSQL server binaries (initdb, postgres) not found: install them "
        f"(apt-get install postgresql) or set {BINDIR_ENV} to their directory"
    )


def _server_os_user() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as when we are root; None when we are not root."""
    if os.geteuid() != 0:
        return None
    names = [os.environ.get(OS_USER_ENV), "postgres", "nobody"]
    for name in filter(None, names):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailableError(
        f"running as root, and no unprivileged user to run PostgreSQL as (set {OS_USER_ENV})"
    )


def free_port(host: str = LOOPBACK) -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    # Runs in the child after it changed its user (a credential change would clear the setting).
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory; ``start()``/``stop()`` or a context manager.

    ``stop(keep=True)`` stops the server and keeps its data, so ``start()`` brings the same
    databases back on the same port (the tests use it to cut the ledger off its database).
    """

    def __init__(self, startup_timeout: float = 60.0, *, durable: bool = True) -> None:
        """``durable=False`` (the tests' server): no ``fsync``, in initdb or the server. A killed
        server process still loses nothing it acknowledged (its writes are in the kernel's cache);
        only a crash of the machine could, which a throwaway server does not outlive anyway. Its
        stop takes a second instead of tens of seconds of flushing on a busy disk."""
        self.startup_timeout = startup_timeout
        self.durable = durable
        self.password = secrets.token_hex(16)
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._bindir: Path | None = None
        self._dir: Path | None = None
        self._user: pwd.struct_passwd | None = None

    # ----------------------------------------------------------------- addresses

    def url(self, database: str = "postgres") -> str:
        """The server's URL for ``database`` (without the password: see :attr:`password`)."""
        if self.port is None:
            raise PostgresUnavailableError("the PostgreSQL server is not started")
        return f"postgresql://{SUPERUSER}@{LOOPBACK}:{self.port}/{database}"

    def connect(self, database: str = "postgres", **kwargs: Any) -> Any:
        """An autocommit psycopg connection as the superuser (for setting up tests)."""
        import psycopg

        return psycopg.connect(self.url(database), password=self.password, autocommit=True, **kwargs)

    def create_database(self, name: str) -> str:
        """Create an empty database (dropping one of that name first); its URL."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    # ----------------------------------------------------------------- lifetime

    def start(self) -> Self:
        if self.process is not None:
            return self
        self._bindir = self._bindir or find_bindir()
        if self._dir is None:
            self._init_cluster()
        if self._dir is None:
            raise InvariantError("invariant broken: the cluster directory exists after initdb")
        for _attempt in range(3):  # a free port can be taken between choosing and binding it
            port = self.port or free_port()
            self._launch(port)
            if self._wait_ready(port):
                self.port = port
                log.info("PostgreSQL ready at %s:%d (pid %d)", LOOPBACK, port, self.pid)
                return self
            exited = self._exited()
            self._terminate()
            if not exited:
                break
        tail = self._log_tail()
        self.stop()
        raise PostgresUnavailableError(f"PostgreSQL did not start: {tail}")

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def _run_as_server_user(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=120, **self._as_user(), **kwargs)

    def _as_user(self) -> dict[str, Any]:
        if self._user is None:
            return {}
        return {
            "user": self._user.pw_uid,
            "group": self._user.pw_gid,
            "extra_groups": [],
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
        }

    def _init_cluster(self) -> None:
        if self._bindir is None:
            raise InvariantError("invariant broken: the PostgreSQL binaries are found before initdb")
        self._user = _server_os_user()
        self._dir = Path(tempfile.mkdtemp(prefix="privstream-pg-"))
        pwfile = self._dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._user is not None:
            os.chown(self._dir, self._user.pw_uid, self._user.pw_gid)
            os.chown(pwfile, self._user.pw_uid, self._user.pw_gid)
        pwfile.chmod(0o600)
        done = self._run_as_server_user(
            [
                str(self._bindir / "initdb"),
                "-D",
                str(self._dir / "data"),
                "-U",
                SUPERUSER,
                "--pwfile",
                str(pwfile),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-instructions",
                *([] if self.durable else ["--no-sync"]),
            ]
        )
        pwfile.unlink()
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip()
            self.stop()
            raise PostgresUnavailableError(f"initdb failed: {message}")

    def _launch(self, port: int) -> None:
        if self._bindir is None or self._dir is None:
            raise InvariantError("invariant broken: initdb ran before the server is launched")
        log_file = self._dir / "server.log"
        with open(log_file, "ab") as out:
            if self._user is not None:
                os.chown(log_file, self._user.pw_uid, self._user.pw_gid)
            self.process = subprocess.Popen(
                [
                    str(self._bindir / "postgres"),
                    "-D",
                    str(self._dir / "data"),
                    "-p",
                    str(port),
                    "-c",
                    f"listen_addresses={LOOPBACK}",
                    "-c",
                    f"unix_socket_directories={self._dir}",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=32MB",
                    *([] if self.durable else ["-c", "fsync=off"]),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # The kernel ties the parent-death signal to the *thread* that started the child:
                # from another thread, the server would stop when that thread ends.
                preexec_fn=_die_with_parent
                if threading.current_thread() is threading.main_thread()
                else None,
                **self._as_user(),
            )

    def _wait_ready(self, port: int) -> bool:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                psycopg.connect(
                    f"postgresql://{SUPERUSER}@{LOOPBACK}:{port}/postgres",
                    password=self.password,
                    connect_timeout=2,
                ).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        return False

    def _log_tail(self) -> str:
        if self._dir is None or not (self._dir / "server.log").exists():
            return "no server log"
        return " | ".join((self._dir / "server.log").read_text(errors="replace").strip().splitlines()[-5:])

    def _terminate(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, disconnect, checkpoint), then SIGKILL."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash: its backends exit; the data is kept for ``start()``)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(30)
            # The backends notice the dead postmaster and exit; wait until the port is free.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self._postmaster_pid_file_alive():
                time.sleep(0.05)

    def _postmaster_pid_file_alive(self) -> bool:
        if self._dir is None:
            return False
        try:
            pid = int((self._dir / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return False
        return True

    def stop(self, *, keep: bool = False) -> None:
        """Stop the server (idempotent); delete its directory unless ``keep``."""
        self._terminate()
        if not keep and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            self.port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
