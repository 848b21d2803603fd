"""Lazily generated per-cell randomness from a secret key: HMAC-SHA256 as a pseudorandom function.

A learner on a huge partition needs independent randomness for *every* cell (empty ones included),
but may only touch the cells it is asked about. A keyed PRF gives each cell its own stream,
computed on demand and identical every time it is recomputed, so lazily generated values equal
those of a dense implementation that drew every cell up front with the same key.

* :class:`CellStream`: a :class:`~privstream.learning.randomness.RandomSource` whose bits are
  HMAC-SHA256(key, "cell" ‖ id ‖ counter) in counter mode; every exact sampler of the random
  source (``bernoulli_exp``, ``discrete_laplace``, ...) runs on it unchanged.
* :func:`coin_bits`: one fair bit per cell id, 256 cells per HMAC call (bit ``id mod 256`` of
  HMAC(key, "coin" ‖ ⌊id/256⌋)), vectorised, for dense tables of millions of cells.

The two uses are domain-separated, so a cell's coin is independent of its stream. The key is drawn
from the caller's :class:`RandomSource` (the OS CSPRNG by default) once per release and is a
*secret*: anyone holding it can recompute every cell's noise. Security rests on HMAC-SHA256 being
a PRF (Bellare 2006); with an ideal PRF the outputs are exactly independent uniform bits.

>>> from privstream.learning.randomness import seeded
>>> key = new_key(seeded(1))
>>> CellStream(key, 7).getrandbits(64) == CellStream(key, 7).getrandbits(64)
True
>>> coin_bits(key, np.array([0, 1, 300])).tolist() == coin_bits(key, np.array([0, 1, 300])).tolist()
True
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

from privstream.learning.randomness import RandomSource

__all__ = ["KEY_BYTES", "CellStream", "coin_bits", "coin_table", "new_key"]

KEY_BYTES = 32
_COINS_PER_BLOCK = 256  # bits of one SHA-256 output


def new_key(rng: RandomSource) -> bytes:
    """A fresh 256-bit PRF key from ``rng``."""
    return rng.getrandbits(8 * KEY_BYTES).to_bytes(KEY_BYTES, "big")


def _id_bytes(cell: int) -> bytes:
    # length-prefixed so that distinct ids never give the same message
    raw = int(cell).to_bytes((int(cell).bit_length() + 7) // 8 or 1, "big")
    return len(raw).to_bytes(4, "big") + raw


class CellStream(RandomSource):
    """The random bit stream of one cell: HMAC-SHA256(key, b"cell" ‖ id ‖ counter), counter mode."""

    def __init__(self, key: bytes, cell: int) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"PRF key must be {KEY_BYTES} bytes")
        self._mac = hmac.new(key, b"cell" + _id_bytes(cell), hashlib.sha256)
        self._counter = 0
        self._pool = 0  # buffered bits (as an int) and how many
        self._have = 0

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            return 0
        while self._have < k:
            mac = self._mac.copy()
            mac.update(self._counter.to_bytes(8, "big"))
            self._counter += 1
            self._pool = (self._pool << 256) | int.from_bytes(mac.digest(), "big")
            self._have += 256
        self._have -= k
        out = self._pool >> self._have
        self._pool &= (1 << self._have) - 1
        return out


def coin_bits(key: bytes, cells: np.ndarray) -> np.ndarray:
    """The fair coin (uint8 0/1) of each cell id in ``cells`` (int64 or Python-int object array)."""
    cells = np.asarray(cells)
    out = np.zeros(cells.shape[0], dtype=np.uint8)
    if cells.size == 0:
        return out
    blocks = cells // _COINS_PER_BLOCK
    offsets = (cells % _COINS_PER_BLOCK).astype(np.int64)
    if blocks.dtype != object and blocks.max() == 0:  # small grids: one HMAC call
        return _block(key, 0)[offsets]
    uniq, inverse = np.unique(blocks, return_inverse=True)
    table = np.stack([_block(key, int(b)) for b in uniq])
    return table[inverse.reshape(-1), offsets]


def coin_table(key: bytes, num_cells: int) -> np.ndarray:
    """The coins of cells ``0 .. num_cells-1`` (the dense form of :func:`coin_bits`)."""
    num_blocks = -(-num_cells // _COINS_PER_BLOCK)
    raw = b"".join(_digest(key, b) for b in range(num_blocks))
    return np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[:num_cells]


def _digest(key: bytes, block: int) -> bytes:
    return hmac.new(key, b"coin" + _id_bytes(block), hashlib.sha256).digest()


def _block(key: bytes, block: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(_digest(key, block), dtype=np.uint8), bitorder="little")
