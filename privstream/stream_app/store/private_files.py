"""Files only the worker's user may read: the ledger (every release's secret seed, from which its
noise is derived), the state store (raw examples) and the folders that hold them.

Whatever the umask, a SQLite file is created ``0600`` before SQLite opens it, and an existing one
(and its ``-wal``, ``-shm`` and ``-journal`` files) is set to ``0600``: SQLite creates those
companions with the main file's mode, so they follow. The data folder and the state store's
per-stream folder are ``0700``.

>>> import os, stat, tempfile
>>> folder = Path(tempfile.mkdtemp()) / "data"
>>> private_directory(folder)
>>> private_database_file(str(folder / "ledger.sqlite3"))
>>> [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (folder, folder / "ledger.sqlite3")]
['0o700', '0o600']
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

__all__ = ["DIRECTORY_MODE", "FILE_MODE", "private_database_file", "private_directory"]

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
#: The files SQLite keeps beside a database, created with the database's own mode.
COMPANIONS = ("-wal", "-shm", "-journal")


def private_directory(path: Path) -> None:
    """Create ``path`` (and its parents) if missing and make it ``0700`` (where this user owns it)."""
    path.mkdir(parents=True, exist_ok=True, mode=DIRECTORY_MODE)
    with contextlib.suppress(PermissionError):  # another user's folder: its owner decides
        path.chmod(DIRECTORY_MODE)


def private_database_file(target: str) -> None:
    """Before SQLite opens ``target`` (a path or a ``file:`` URI; ``":memory:"`` is left alone):
    create the file ``0600`` if SQLite may create it (not with ``mode=ro`` or ``mode=rw``), else
    set an existing one and its companions to ``0600``."""
    if target == ":memory:" or not target:
        return
    may_create = True
    if target.startswith("file:"):
        parsed = urlparse(target)
        mode = parse_qs(parsed.query).get("mode", ["rwc"])[0]
        may_create = mode == "rwc"
        if mode == "memory" or not parsed.path:
            return
        target = unquote(parsed.path)
    path = Path(target)
    if may_create and not path.exists():
        with contextlib.suppress(FileExistsError):  # another process created it first
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
    for file in (path, *(Path(f"{path}{suffix}") for suffix in COMPANIONS)):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            file.chmod(FILE_MODE)
