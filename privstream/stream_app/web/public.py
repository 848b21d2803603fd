"""The public listener's pages: configuration, ledger figures and published releases only.

Everything here is a DP output charged to the ledger or a function of public configuration: what
any subscriber may see. The pages read the stream configurations and the ledger through
:class:`PublicLedger`, nothing else of the worker.

**A release is public from its scheduled time.** Every read of :class:`PublicLedger` asks the
ledger for the charges scheduled by now only (the ledger's ``visible_at``: a release's deadline,
when it is published), so the pages count and show a release from its deadline on, never from when
its charge or its computation happened, which can depend on how long a learner ran on the data.
Releases are named by their public ledger entry id (stream, node, product), never by the ledger's
internal counter, whose order follows every stream's learners.

| path | what |
|---|---|
| ``/streams`` | the configured streams, their release configuration, status and lifetime figures |
| ``/streams/{id}`` | one stream, the same |
| ``/streams/{id}/budget`` | the stream's lifetime figures alone (:func:`lifetime`) |
| ``/streams/{id}/releases/latest`` | the latest published hypothesis release, as on the topic, signed |
| ``/streams/{id}/releases/best`` | the newest of the tree's highest level (the SDK's default), signed |
| ``/streams/{id}/sanitized/latest`` | the latest published sanitized release, signed |
| ``/keys`` | the public keys that sign the releases (``privstream.stream_app.signing``) |

The ``latest`` pages carry the release's signature in the headers ``Privstream-Key-Id`` and
``Privstream-Signature``, as the Kafka records do.

**Lifetime accounting.** Each example (or user) lies in one node per level of the release tree,
so its lifetime cost is the sum of the charges of the nodes covering its window, for ever; there
is no draining total. The figures separate three things (:func:`lifetime`): the *budget* (the
configured bound), what the release plan *commits* each example to over its life (the sum of the
levels' ε; at most the budget by configuration), and what the most exposed example has *spent* so
far (it reaches the committed ε once a top-level node covering it is released; examples of later
windows start again from 0, so a stream keeps releasing with its budget fully committed). They
depend on the public schedule only (which nodes were charged, at which ε), never on which windows
held data.

**The worker comes first.** Ledger reads run on one thread of their own, never on the event loop
that ingests examples; concurrent requests for the same figures share one read, and a read is
reused for ``cache_seconds`` (:class:`PublicReads`). Pages of releases are bounded (``limit``).

The page for people (``page/``: ``/``, ``/stream/{id}``, ``/streams/{id}/releases``) is served by
the same listener.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from aiohttp import web

from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.signing import KEY_ID_HEADER, SIGNATURE_HEADER, KeySet, Signer
from privstream.stream_app.web.listener import Route
from privstream.stream_app.web.public_ledger import (
    LIFETIME_RULES,
    LedgerReader,
    PublicLedger,
    StreamFigures,
    budget,
    lifetime,
    stream_overview,
    streams_overview,
)

#: The pages, and the ledger's view they read (from :mod:`~privstream.stream_app.web.public_ledger`).
__all__ = [
    "LIFETIME_RULES",
    "LedgerReader",
    "PublicLedger",
    "PublicReads",
    "PublicStreams",
    "Signatures",
    "StreamFigures",
    "budget",
    "lifetime",
    "no_releases",
    "public_routes",
    "signature_headers",
    "stream_overview",
    "streams_overview",
    "unsigned_yet",
]

T = TypeVar("T")


class PublicReads:
    """Runs :class:`PublicLedger` reads for the pages: on one thread of its own (never on the event
    loop), one read at a time for identical requests, each result reused for ``cache_seconds``.

    >>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
    >>> reads = PublicReads(SqliteLedger.open(":memory:", budgets={"s": (2.0, 0.0)}))
    >>> asyncio.run(reads.get(("figures", "s"), lambda public: public.figures("s").refusals))
    0
    """

    def __init__(
        self,
        ledger: LedgerReader | PublicLedger,
        cache_seconds: float = 1.0,
        max_cached: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.public = ledger if isinstance(ledger, PublicLedger) else PublicLedger(ledger)
        self.cache_seconds = cache_seconds
        self.max_cached = max_cached
        self.clock = clock
        self.ledger_reads = 0  # reads made (the other requests were answered from the cache or a shared read)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="privstream-public-reads")
        self._cache: OrderedDict[tuple[Any, ...], tuple[float, Any]] = OrderedDict()
        self._pending: dict[tuple[Any, ...], asyncio.Future[Any]] = {}

    async def get(self, key: tuple[Any, ...], read: Callable[[PublicLedger], T]) -> T:
        """``read(public ledger)``, cached under ``key``."""
        cached = self._cache.get(key)
        if cached is not None and cached[0] > self.clock():
            return cached[1]
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().run_in_executor(self._executor, read, self.public)
            self.ledger_reads += 1
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._settled(key, done))
        # A client that goes away does not cancel the read the others wait for.
        return await asyncio.shield(pending)

    def _settled(self, key: tuple[Any, ...], done: asyncio.Future[Any]) -> None:
        self._pending.pop(key, None)
        if done.cancelled() or done.exception() is not None or self.cache_seconds <= 0:
            return
        self._cache[key] = (self.clock() + self.cache_seconds, done.result())
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)


class Signatures(Protocol):
    """Signatures the worker computed (:class:`~privstream.stream_app.store.signatures.ReleaseSignatures`)."""

    def lookup(self, release: bytes) -> tuple[str, str] | None: ...


def signature_headers(
    signer: Signer | None, release: bytes, signatures: Signatures | None = None
) -> dict[str, str] | None:
    """The HTTP headers that carry a release's signature: the worker's stored one (None if it is
    not stored yet), else made with ``signer``, else none."""
    if signatures is not None:
        found = signatures.lookup(release)
        if found is None:
            return None
        key, signature = found
    elif signer is not None:
        key, signature = signer.sign(release)
    else:
        return {}
    return {KEY_ID_HEADER: key, SIGNATURE_HEADER: signature}


def unsigned_yet(stream_id: str) -> web.Response:
    """The worker has not stored the release's signature yet (another worker published it a moment
    ago): try again shortly, rather than get it unsigned."""
    body = {"error": f"the signature of stream {stream_id!r}'s newest release is not written yet; retry"}
    return web.json_response(body, status=503, headers={"Retry-After": "5"})


class PublicStreams:
    """The configured streams and the ledger reads behind their pages, shared by the JSON pages and
    the page for people. A page is built whole (read, summarised, serialised) on the reads' thread
    and its body reused while it is cached: a crowd asking for the same page costs one build."""

    def __init__(self, streams: Sequence[StreamConfig], reads: PublicReads | None):
        self.streams = list(streams)
        self.by_name = {s.name: s for s in streams}
        self.reads = reads

    def releasing(self, stream_id: str) -> StreamConfig | None:
        """The configured stream if it has private releases (and a ledger to read them from)."""
        stream = self.by_name.get(stream_id)
        return stream if stream is not None and stream.release is not None and self.reads else None

    async def page(self, key: tuple[Any, ...], build: Callable[[PublicLedger | None], Any]) -> web.Response:
        """A JSON page: ``build(ledger)`` serialised, cached under ``key``."""
        if self.reads is None:  # no ledger: nothing to read, the page is configuration only
            return web.Response(body=_json(build(None)), content_type="application/json")
        body = await self.reads.get(key, lambda public: _json(build(public)))
        return web.Response(body=body, content_type="application/json")


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def no_releases(stream_id: str) -> web.Response:
    return web.json_response({"error": f"stream {stream_id!r} has no private releases"}, status=404)


def public_routes(
    streams: Sequence[StreamConfig] | PublicStreams,
    ledger: LedgerReader | None = None,
    *,
    signer: Signer | None = None,
    published_keys: KeySet | None = None,
    key_document: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
    signatures: Signatures | None = None,
) -> list[Route]:
    """The public listener's routes over these streams and this ledger (or the ``PublicStreams``
    shared with the page), with the worker's ``signatures`` (else signing with ``signer``);
    ``/keys`` serves ``key_document`` (the deployment's keys and rotation statements:
    :func:`~..key_rotation.key_document`), else lists the signer's key and ``published_keys``;
    a callable ``key_document`` is read again on every request (the worker rewrites it when
    the deployment's key is rotated)."""
    public = (
        streams
        if isinstance(streams, PublicStreams)
        else PublicStreams(streams, PublicReads(ledger) if ledger is not None else None)
    )
    keys = KeySet([signer.public_entry()] if signer else []).merged(published_keys or KeySet())

    def keys_body() -> bytes:
        if callable(key_document):
            return json.dumps(key_document()).encode()
        return (keys.to_json() if key_document is None else json.dumps(key_document)).encode()

    fixed_body = None if callable(key_document) else keys_body()

    async def streams_page(request: web.Request) -> web.Response:
        return await public.page(
            ("streams",), lambda ledger: {"streams": streams_overview(public.streams, ledger)}
        )

    async def stream_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        stream = public.by_name.get(stream_id)
        if stream is None:
            return web.json_response({"error": f"no stream {stream_id[:200]!r}"}, status=404)
        return await public.page(("stream", stream_id), lambda ledger: stream_overview(stream, ledger))

    async def lifetime_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        stream = public.releasing(stream_id)
        if stream is None:
            return no_releases(stream_id[:200])
        return await public.page(("budget", stream_id), lambda ledger: lifetime(stream, ledger))

    def latest(prefix: str) -> Any:
        def signed(public_ledger: PublicLedger, stream_id: str) -> tuple[bytes, dict[str, str] | None] | None:
            charge = public_ledger.latest(stream_id, prefix)
            return (
                None
                if charge is None
                else (charge.release, signature_headers(signer, charge.release, signatures))
            )

        async def page(request: web.Request) -> web.Response:
            stream_id = request.match_info["stream_id"]
            if public.releasing(stream_id) is None or public.reads is None:
                return no_releases(stream_id[:200])
            found = await public.reads.get(("latest", stream_id, prefix), lambda p: signed(p, stream_id))
            if found is None:
                missing = {"error": f"stream {stream_id!r} has no such release yet"}
                return web.json_response(missing, status=404)
            body, headers = found
            if headers is None:
                return unsigned_yet(stream_id[:200])
            return web.Response(body=body, content_type="application/json", headers=headers)

        return page

    async def best_page(request: web.Request) -> web.Response:
        stream_id = request.match_info["stream_id"]
        stream = public.releasing(stream_id)
        if stream is None or stream.release is None or public.reads is None:
            return no_releases(stream_id[:200])

        def signed(public_ledger: PublicLedger) -> tuple[bytes, dict[str, str] | None] | None:
            charge = public_ledger.best(stream_id)
            return (
                None
                if charge is None
                else (charge.release, signature_headers(signer, charge.release, signatures))
            )

        found = await public.reads.get(("best", stream_id), signed)
        if found is None:
            return web.json_response({"error": f"stream {stream_id!r} has no such release yet"}, status=404)
        body, headers = found
        if headers is None:
            return unsigned_yet(stream_id[:200])
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def keys_page(request: web.Request) -> web.Response:
        body = fixed_body if fixed_body is not None else await asyncio.to_thread(keys_body)
        return web.Response(body=body, content_type="application/json")

    return [
        ("GET", "/streams", streams_page),
        ("GET", "/streams/{stream_id}", stream_page),
        ("GET", "/streams/{stream_id}/budget", lifetime_page),
        ("GET", "/streams/{stream_id}/releases/latest", latest("learner:")),
        ("GET", "/streams/{stream_id}/releases/best", best_page),
        ("GET", "/streams/{stream_id}/sanitized/latest", latest("sanitizer:")),
        ("GET", "/keys", keys_page),
    ]
