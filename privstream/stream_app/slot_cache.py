"""Slot measurements remembered per workload and machine, so that a start need not time them again.

A publication slot is derived from how long a node's fits take on public inputs
(:mod:`privstream.stream_app.publication`). The measurement is a function of the workload (the
learner, its parameters, the public inputs: all of it in :func:`workload_key`) and the machine, so
it is kept in a small JSON file under a key of both, and of the library's version; a change of any
of them misses the cache and is measured again. Nothing in it depends on the data, so the file is
the machine's (:func:`cache_path`): a worker started with a fresh data directory, or a second
worker, finds what another start measured.

>>> import tempfile, pathlib
>>> cache = SlotCache(pathlib.Path(tempfile.mkdtemp()) / "slots.json")
>>> key = workload_key([("a public workload", 1)])
>>> cache.get(key) is None
True
>>> cache.put(key, 1.25)
>>> SlotCache(cache.path).get(key)
1.25
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import pickle
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

from privstream import __version__

log = logging.getLogger(__name__)

#: The cache file's name (in the machine's cache directory, or the worker's data directory).
CACHE_FILE = "slot-measurements.json"


def cache_path(configured: Path | None, data_dir: Path) -> Path:
    """Where slot measurements are remembered: ``configured`` (the ``slot_cache_file`` setting),
    else the user's cache directory (``$XDG_CACHE_HOME/privstream``, by default
    ``~/.cache/privstream``), shared by every worker and data directory of the machine (a key
    holds the machine and the workload, never the data), else, where that cannot be written,
    the worker's data directory.

    >>> import pathlib
    >>> cache_path(pathlib.Path("/etc/slots.json"), pathlib.Path("var"))
    PosixPath('/etc/slots.json')
    """
    if configured is not None:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    shared = Path(base) / "privstream"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            return shared / CACHE_FILE
    except OSError:  # no home, a read-only one: the data directory keeps them
        pass
    return data_dir / CACHE_FILE


@functools.cache
def code_digest() -> str:
    """A digest of this library's installed source files (names, sizes, modification times): two
    checkouts or an edit of the same version never share a measurement.

    >>> code_digest() == code_digest() and len(code_digest()) == 16
    True
    """
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def machine() -> str:
    """What a measurement's figure depends on besides the workload: the host, its processors, the
    interpreter and numpy, and this library's version and code (:func:`code_digest`).

    >>> len(machine()) > 10
    True
    """
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "|".join(
        [
            platform.node(),
            platform.machine(),
            model,
            str(os.cpu_count()),
            sys.version.split()[0],
            np.__version__,
            __version__,
            code_digest(),
        ]
    )


def workload_key(workload: Any) -> str:
    """A digest of a slot's workload (the fits it times, their inputs and parameters, pickled as they
    are sent to the learner process) and of the machine: equal for two streams configured alike,
    whatever their names.

    >>> workload_key([1, 2]) == workload_key([1, 2]) != workload_key([2, 1])
    True
    """
    digest = hashlib.sha256(pickle.dumps(workload, protocol=5))
    digest.update(machine().encode())
    return digest.hexdigest()


class SlotCache:
    """Measured slot seconds by :func:`workload_key`, in a JSON file (written whole, atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, float] = {}
        try:
            loaded = json.loads(path.read_text())
            self._entries = {str(k): float(v) for k, v in loaded.get("measured_seconds", {}).items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError, TypeError) as exc:  # unreadable: measured again
            log.warning("slot measurements %s not read (%s): measuring again", path, exc)

    def get(self, key: str) -> float | None:
        return self._entries.get(key)

    def put(self, key: str, seconds: float) -> None:
        self._entries[key] = seconds
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"measured_seconds": self._entries}, indent=1))
            temporary.replace(self.path)
        except OSError as exc:  # a cache it could not write costs the next start a measurement
            log.warning("slot measurements not saved to %s: %s", self.path, exc)
