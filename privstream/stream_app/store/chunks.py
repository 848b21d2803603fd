"""A chunk of count-window rows: one partition's consecutive examples stored as one value.

A stream with count windows appends every example it learns before the batch's offsets are
committed. Stored one table row per example, that write cost the ingest path more than the
learning itself (three B-tree inserts and a bound tuple per example); stored as one chunk per
append, a batch of 5,000 feature vectors is one insert of a few hundred kilobytes. The value is
a small JSON header (the count, the vectors' dimension, the users if any) followed by the points
(little-endian float64 vectors, or int64 points) and the labels (int16), read back with numpy
without a copy per example.

>>> data = encode_chunk([[0.5, 1.0], [0.25, 0.0]], [1, 0], [None, None])
>>> xs, ys, users = decode_chunk(data)
>>> xs.tolist(), ys.tolist(), users.tolist()
([[0.5, 1.0], [0.25, 0.0]], [1, 0], [None, None])
>>> decode_chunk(encode_chunk([3, 9], [0, 1], ["u", None]))[0].tolist()
[3, 9]
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["decode_chunk", "encode_chunk", "fits_a_chunk"]

_HEADER = struct.Struct("<I")


def fits_a_chunk(xs: Sequence[Any]) -> bool:
    """Whether rows with these points can be stored as a chunk: feature vectors, or integer
    points within int64 (SQLite's integers; anything else stays one row per example).

    >>> fits_a_chunk([[0.5], [1.0]]), fits_a_chunk([3, 4]), fits_a_chunk([2**70]), fits_a_chunk([])
    (True, True, False, False)
    """
    if not xs:
        return False
    if isinstance(xs[0], list | tuple | np.ndarray):
        return True
    return (
        all(type(x) is int or isinstance(x, np.integer) for x in xs)
        and -(2**63) <= min(xs) <= max(xs) < 2**63
    )


def encode_chunk(
    xs: Sequence[Any] | np.ndarray, ys: Sequence[int] | np.ndarray, users: Sequence[str | None] | np.ndarray
) -> bytes:
    """The stored value of rows with points ``xs`` (vectors of one length, or integers: see
    :func:`fits_a_chunk`), labels ``ys`` and users (None where there is none)."""
    n = len(ys)
    if isinstance(xs[0], list | tuple | np.ndarray):
        points = np.asarray(xs, dtype="<f8")
        if points.ndim != 2 or points.shape[0] != n:
            raise ValueError("a chunk's feature vectors must all have one length")
        dim = int(points.shape[1])
    else:
        points, dim = np.asarray(xs, dtype="<i8"), 0
    named = None if all(u is None for u in users) else list(users)
    header = json.dumps({"n": n, "dim": dim, "users": named}).encode()
    return b"".join(
        [_HEADER.pack(len(header)), header, points.tobytes(), np.asarray(ys, dtype="<i2").tobytes()]
    )


def decode_chunk(
    data: bytes, start: int = 0, stop: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points (float64 vectors n x dim, or int64 points), labels (int64) and users (objects,
    None where there is none) of rows ``start .. stop`` of an :func:`encode_chunk` value (the
    others are not decoded: a capped node reads its first rows only).

    >>> decode_chunk(encode_chunk([[1.0], [2.0], [3.0]], [0, 1, 1], [None] * 3), 1, 2)[0].tolist()
    [[2.0]]
    """
    view = memoryview(data)
    (length,) = _HEADER.unpack_from(view)
    header = json.loads(bytes(view[_HEADER.size : _HEADER.size + length]))
    n, dim, offset = int(header["n"]), int(header["dim"]), _HEADER.size + length
    stop = n if stop is None else max(start, min(stop, n))
    count = stop - start
    width = 8 * max(dim, 1)
    xs = np.frombuffer(view, "<f8" if dim else "<i8", count * max(dim, 1), offset + width * start)
    xs = xs.reshape(count, dim).astype(np.float64) if dim else xs.astype(np.int64)
    ys = np.frombuffer(view, "<i2", count, offset + width * n + 2 * start).astype(np.int64)
    users = header["users"][start:stop] if header["users"] is not None else [None] * count
    return xs, ys, np.array(users, dtype=object)
