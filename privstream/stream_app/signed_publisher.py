"""Publishing a release's bytes to its public topic, signed. The rule: the signature is stored before
the release is published, and the record's timestamp is the release's deadline, never the moment
it was sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from privstream.schemas.releases import RELEASE_SCHEMA_VERSION
from privstream.stream_app.kafka.ingest import IngestService
from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import KeyWatch, Signer
from privstream.stream_app.store.signatures import ReleaseSignatures


def publisher(
    ingest: IngestService,
    settings: Settings,
    signer: Signer,
    signatures: ReleaseSignatures | None = None,
    *,
    watch: KeyWatch | None = None,
) -> Any:
    """Publish a release's bytes to its public topic, signed, and wait until Kafka has them; the
    record's timestamp is the release's deadline (its scheduled time), never the moment it was sent.

    The signature covers exactly the bytes the ledger stores; Ed25519 is deterministic, so a
    re-publication from the outbox carries the same signature. It is stored in ``signatures``
    first, for the public listener, before the release is published (and so before the ledger
    marks it published, which is when the listener may serve it). With ``watch``, nothing is
    published once the deployment's key was rotated away from ``signer``'s (:class:`KeyWatch`)."""

    async def publish(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        if watch is not None:
            watch.refuse()
        if signatures is not None:
            await asyncio.to_thread(signatures.put, release, *signer.sign(release))
        header = ("schema_version", str(RELEASE_SCHEMA_VERSION).encode())
        await ingest.publish(
            settings.topic(topic),
            stream_id.encode(),
            release,
            [header, *signer.headers(release)],
            timestamp_ms=timestamp_ms,
        )

    return publish
