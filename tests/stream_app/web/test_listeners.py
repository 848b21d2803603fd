"""The two listeners: public pages on one port, operator pages on another, the token guard."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.web.listener import HttpListener, bearer_token_guard
from privstream.stream_app.web.operator import PROBE_PATHS, operator_routes
from privstream.stream_app.web.public import public_routes

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    ),
    StreamConfig(name="online", hypothesis_class="thresholds:16"),
]


class Probes:
    def health(self) -> tuple[bool, str]:
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        return False, "no partitions of the examples topic assigned yet"


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
async def listeners():
    ledger = SqliteLedger.open(":memory:", budgets={"clicks": (3.0, 0.0)})
    charge = ledger.charge("clicks", "w0", "learner:generic", 1.0, 0.0, b'{"release": 0}')
    ledger.mark_published(charge.entry_id)
    public = HttpListener("public", "127.0.0.1", free_port(), public_routes(STREAMS, ledger))
    operator = HttpListener(
        "operator",
        "127.0.0.1",
        free_port(),
        operator_routes(lambda: b"privstream_up 1\n", Probes(), lambda: {"received": 7}),
        middlewares=[bearer_token_guard("s3cret", open_paths=PROBE_PATHS)],
    )
    await public.start()
    await operator.start()
    try:
        yield f"http://127.0.0.1:{public.port}", f"http://127.0.0.1:{operator.port}"
    finally:
        await operator.stop()
        await public.stop()
        ledger.close()


async def test_public_listener_serves_releases_and_budgets_only(listeners):
    import asyncio

    public, _ = listeners
    status, body = await asyncio.to_thread(get, f"{public}/streams/clicks/releases/latest")
    assert (status, body) == (200, b'{"release": 0}')  # the stored bytes, as on the topic
    status, body = await asyncio.to_thread(get, f"{public}/streams/clicks/budget")
    assert status == 200 and json.loads(body)["releases"] == 1
    assert json.loads(body)["lifetime_epsilon_spent"] == 1.0
    status, body = await asyncio.to_thread(get, f"{public}/streams/online/budget")
    assert status == 404
    status, body = await asyncio.to_thread(get, f"{public}/streams/clicks")
    assert status == 200 and json.loads(body)["lifetime"]["releases_per_level"] == {"0": 1}
    status, body = await asyncio.to_thread(get, f"{public}/streams/online")
    assert status == 200 and json.loads(body)["status"] == "online only"
    assert (await asyncio.to_thread(get, f"{public}/streams/nope"))[0] == 404
    for operator_path in ("/metrics", "/status", "/healthz", "/readyz"):
        status, _ = await asyncio.to_thread(get, f"{public}{operator_path}")
        assert status == 404, f"{operator_path} must not be on the public listener"


async def test_operator_listener_refuses_requests_without_the_token(listeners):
    import asyncio

    _, operator = listeners
    for path in ("/metrics", "/status"):
        status, body = await asyncio.to_thread(get, f"{operator}{path}")
        assert status == 401 and b"Bearer" in body
        status, _ = await asyncio.to_thread(get, f"{operator}{path}", token="wrong")
        assert status == 401
    status, body = await asyncio.to_thread(get, f"{operator}/metrics", token="s3cret")
    assert (status, body) == (200, b"privstream_up 1\n")
    status, body = await asyncio.to_thread(get, f"{operator}/status", token="s3cret")
    assert status == 200 and json.loads(body) == {"received": 7}
    # probes stay open (a kubelet has no secret) and carry no figures
    status, body = await asyncio.to_thread(get, f"{operator}/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok", "reason": "ok"}
    status, body = await asyncio.to_thread(get, f"{operator}/readyz")
    assert status == 503
    status, _ = await asyncio.to_thread(get, f"{operator}/streams")
    assert status in (401, 404)  # public pages are not on the operator listener


async def test_the_latest_release_is_signed_and_the_keys_are_served() -> None:
    import asyncio

    from privstream.stream_app.signing import KEY_ID_HEADER, SIGNATURE_HEADER, KeySet, Signer

    signer, retired = Signer.generate(), Signer.generate()
    ledger = SqliteLedger.open(":memory:", budgets={"clicks": (3.0, 0.0)})
    charge = ledger.charge("clicks", "w0", "learner:generic", 1.0, 0.0, b'{"release": 0}')
    ledger.mark_published(charge.entry_id)
    routes = public_routes(STREAMS, ledger, signer=signer, published_keys=KeySet([retired.public_entry()]))
    public = HttpListener("public", "127.0.0.1", free_port(), routes)
    await public.start()
    base = f"http://127.0.0.1:{public.port}"

    def fetch(path: str) -> tuple[bytes, dict[str, str]]:
        with urllib.request.urlopen(base + path, timeout=5) as response:
            return response.read(), dict(response.headers)

    try:
        body, headers = await asyncio.to_thread(fetch, "/streams/clicks/releases/latest")
        keys_body, _ = await asyncio.to_thread(fetch, "/keys")
        keys = KeySet.from_json(keys_body)
        assert keys.key_ids == [signer.key_id, retired.key_id]
        found = {k.lower(): v for k, v in headers.items()}
        assert found[KEY_ID_HEADER] == signer.key_id
        assert keys.problem(body, found[KEY_ID_HEADER], found[SIGNATURE_HEADER]) is None
        assert keys.problem(body + b" ", found[KEY_ID_HEADER], found[SIGNATURE_HEADER]) == "bad_signature"
    finally:
        await public.stop()
        ledger.close()
