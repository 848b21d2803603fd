"""A worker's ledger and publisher, fenced by its partition leases (:mod:`.store.leases`).

The release agent keeps its plain :class:`~privstream.agents.ledger_port.PrivacyLedger` and
``publish`` function; the service hands it these wrappers instead, so that a worker that lost a
partition (and does not know it yet) gets :class:`~privstream.agents.interfaces.LeaseLostError`
from a charge or a reservation (checked inside its transaction) or a publication (checked just before it)
for any stream whose examples came from that partition.

>>> import tempfile, pathlib
>>> from privstream.stream_app.store.leases import SqliteLeases
>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite3"
>>> plain = SqliteLedger.open(path, create_if_missing=True, budgets={"s": (1.0, 0.0)})
>>> leases = SqliteLeases(path, "examples", owner="me")
>>> ledger = FencedLedger(plain, leases, partitions_of=lambda stream_id: {0})
>>> ledger.charge("s", "w0", "laplace", 0.5, 0.0, b"r")
Traceback (most recent call last):
...
privstream.agents.interfaces.LeaseLostError: me holds no lease on partitions [0] of examples
>>> leases.take({0})
{0: 1}
>>> ledger.charge("s", "w0", "laplace", 0.5, 0.0, b"r").entry_id, ledger.spent("s").epsilon
(1, 0.5)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from privstream.agents.ledger_port import Charge, ChargeReceipt
from privstream.agents.releases import Publisher
from privstream.stream_app.store.leases import Leases

#: ``publish(topic, stream_id, release_bytes, timestamp_ms=...)``, as
#: :class:`privstream.agents.releases.Publisher`.


class FencedLedger:
    """``ledger`` whose every charge runs the leases' fence for the stream's source partitions;
    every other call passes through."""

    def __init__(self, ledger: Any, leases: Leases, partitions_of: Callable[[str], set[int]]) -> None:
        self._ledger = ledger
        self._leases = leases
        self._partitions_of = partitions_of

    def charge(
        self,
        stream_id: str,
        window_id: str,
        mechanism: str,
        epsilon: float,
        delta: float,
        release_bytes: bytes | Callable[[ChargeReceipt], bytes],
    ) -> Charge:
        fence = self._leases.fence(self._partitions_of(stream_id))
        return self._ledger.charge(
            stream_id, window_id, mechanism, epsilon, delta, release_bytes, fence=fence
        )

    def reserve(self, stream_id: str, *args: Any, **kwargs: Any) -> Any:
        # The release path (reserve, then complete): the fence runs inside reserve's transaction,
        # as in charge(). complete() is not fenced: it writes the bytes fixed by the reservation's
        # seed and the node's stored data, the same a new owner computes, and the first bytes win.
        fence = self._leases.fence(self._partitions_of(stream_id))
        return self._ledger.reserve(stream_id, *args, fence=fence, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    def __repr__(self) -> str:
        return f"FencedLedger({self._ledger!r}, owner={self._leases.owner!r})"


def fenced_publisher(
    publish: Publisher, leases: Leases, partitions_of: Callable[[str], set[int]]
) -> Publisher:
    """``publish``, after checking that this worker still holds the stream's partitions."""

    async def fenced(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        await asyncio.to_thread(leases.check, partitions_of(stream_id))
        await publish(topic, stream_id, release, timestamp_ms=timestamp_ms)

    return fenced
