"""The releases' signatures and the key statement, computed by the worker, for the public listener.

The public listener runs in a process of its own that anyone may talk to; it must not hold the
signing key (nor any other secret). So the worker, which signs every release once as it
publishes it, also writes the signature here, keyed by the SHA-256 of the release bytes, and the
public key statement its ``/keys`` serves; the listener's process only reads this file. Ed25519
is deterministic: the signature stored is the one on the Kafka record.

The file (``data_dir/release_signatures.sqlite3``, ``0600``) holds public values only and can be
deleted: the worker signs again, at its start and every few seconds, the releases the listener
serves (each stream's latest and best), including those other workers of the deployment
published.

>>> import tempfile
>>> from privstream.stream_app.signing import KeySet, Signer
>>> signer = Signer.generate()
>>> store = ReleaseSignatures(Path(tempfile.mkdtemp()) / "release_signatures.sqlite3")
>>> store.lookup(b"release") is None
True
>>> store.put(b"release", *signer.sign(b"release"))
>>> store.lookup(b"release") == signer.sign(b"release")
True
>>> store.put_keys(KeySet([signer.public_entry()]))
>>> store.keys().key_ids == [signer.key_id]
True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privstream.stream_app.signing import KeySet
from privstream.stream_app.store.private_files import private_database_file, private_directory

__all__ = ["SIGNATURES_FILE", "ReleaseSignatures"]

#: The file's name in ``data_dir``.
SIGNATURES_FILE = "release_signatures.sqlite3"
#: The signatures kept: the newest ones (what the listener serves is among the newest).
KEEP = 10_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS signatures (row_id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, "
    "key_id TEXT NOT NULL, signature TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS key_statement (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL)",
)


class ReleaseSignatures:
    """Signatures by release digest, and the key statement (the module docstring). One
    connection, used under a lock from any thread; ``readonly`` for the listener's process."""

    def __init__(self, path: Path, *, readonly: bool = False):
        self.path = path
        if readonly:
            self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
        else:
            private_directory(path.parent)
            private_database_file(str(path))
            self._db = sqlite3.connect(path, timeout=5.0, check_same_thread=False)
            with self._db:
                for statement in _SCHEMA:
                    self._db.execute(statement)
        self._lock = threading.Lock()
        self._puts = 0

    @staticmethod
    def digest(release: bytes) -> str:
        return hashlib.sha256(release).hexdigest()

    def put(self, release: bytes, key_id: str, signature: str) -> None:
        """Keep the signature of ``release`` (again: nothing changes)."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO signatures (digest, key_id, signature) VALUES (?, ?, ?) "
                "ON CONFLICT (digest) DO UPDATE SET key_id = excluded.key_id, signature = excluded.signature",
                (self.digest(release), key_id, signature),
            )
            self._puts += 1
            if self._puts % 1000 == 0:
                self._db.execute(
                    "DELETE FROM signatures WHERE row_id <= (SELECT MAX(row_id) FROM signatures) - ?", (KEEP,)
                )

    def lookup(self, release: bytes) -> tuple[str, str] | None:
        """``(key id, signature)`` of ``release``, or None if the worker has not signed it (yet)."""
        with self._lock:
            row = self._db.execute(
                "SELECT key_id, signature FROM signatures WHERE digest = ?", (self.digest(release),)
            ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def put_keys(self, keys: KeySet | Mapping[str, Any]) -> None:
        """Keep the key statement ``/keys`` serves (a key set, or the whole document: the keys and
        their rotation statements, :func:`~..key_rotation.key_document`)."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO key_statement (id, body) VALUES (1, ?) "
                "ON CONFLICT (id) DO UPDATE SET body = excluded.body",
                (keys.to_json() if isinstance(keys, KeySet) else json.dumps(keys),),
            )

    def keys(self) -> KeySet:
        """The key statement the worker wrote (empty if none)."""
        with self._lock:
            row = self._db.execute("SELECT body FROM key_statement WHERE id = 1").fetchone()
        return KeySet() if row is None else KeySet.from_json(row[0])

    def key_document(self) -> dict[str, Any]:
        """The key statement the worker wrote, as a JSON object (no keys if none)."""
        with self._lock:
            row = self._db.execute("SELECT body FROM key_statement WHERE id = 1").fetchone()
        return {"keys": []} if row is None else dict(json.loads(row[0]))

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
