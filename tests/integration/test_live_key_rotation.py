"""A key rotation on a real broker: releases signed by the old key, ``privstream keys rotate``,
releases signed by the new key. A subscriber that pinned the old key and names ``keys_url``
follows the rotation statement and yields all of them, as does one that reads the statement from
the keys topic (``keys_topic=True``); one that only pins yields the old key's;
a ``/keys`` that serves a forged rotation (a thief's key swapped in) makes the thief's releases
no more trusted than before."""

from __future__ import annotations

import json
import threading
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from privstream_client.signing import RotationStatement

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.key_rotation import rotate
from privstream.stream_app.sdk import subscribe
from privstream.stream_app.signing import KeySet, Signer

from .conftest import consume_all, run, start_worker, wait_until
from .test_live_releases import releasing_stream, stream_records
from .test_live_signed_releases import write

pytestmark = pytest.mark.live


async def read(settings, **keys) -> tuple[list, object]:
    subscription = subscribe("s", settings=settings, level="all", until_caught_up=True, **keys)
    return [r async for r in subscription], subscription


def serve(document: bytes) -> ThreadingHTTPServer:
    """A key set at a URL of our own (what a tampered /keys would serve)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_pinned_subscriber_follows_a_rotation_and_no_forged_one(unique_settings, tmp_path):
    settings = unique_settings.model_copy(
        update={"streams": [releasing_stream("s", 500, 0.5, 1.0, levels=1)], "ledger_create_if_missing": True}
    )
    run(ensure_topics(settings))
    _, records = stream_records("s", 2000, seed=7)
    worker = start_worker(settings, tmp_path)
    try:
        run(produce_json(settings, settings.topic("examples"), records[:1000]))
        budget = f"{worker.public_url}/streams/s/budget"
        wait_until(lambda: (fetch_json(budget) or {}).get("releases") == 3, 120, what="3 releases")
        with urllib.request.urlopen(f"{worker.public_url}/keys", timeout=10) as response:
            pinned = KeySet.from_json(response.read())  # the old key, as a subscriber pins it
    finally:
        assert worker.stop() == 0
    [old] = pinned.key_ids

    # The documented procedure: workers stopped, rotate, workers started.
    done = rotate(settings, reason="the live test rotates", who="test")
    assert done.old_key_id == old
    restarted = start_worker(settings.model_copy(update=free_listener_ports()), tmp_path)
    try:
        run(produce_json(settings, settings.topic("examples"), records[1000:]))
        budget = f"{restarted.public_url}/streams/s/budget"
        wait_until(lambda: (fetch_json(budget) or {}).get("releases") == 6, 120, what="6 releases")
        keys_url = f"{restarted.public_url}/keys"
        with urllib.request.urlopen(keys_url, timeout=10) as response:
            served = json.loads(response.read())
        assert [k["key_id"] for k in served["keys"]] == [old, done.new_key_id]
        assert served["keys"][0]["not_after"] is not None and len(served["rotations"]) == 1

        followed, subscription = run(read(settings, trusted_keys=pinned, keys_url=keys_url))
        assert len(followed) == 6 and subscription.skipped == {}
        pinned_only, subscription = run(read(settings, trusted_keys=pinned))
        assert len(pinned_only) == 3 and subscription.skipped == {"unknown_key": 3}
        # No URL: the statement the restarted worker sent to the keys topic.
        from_topic, subscription = run(read(settings, trusted_keys=pinned, keys_topic=True))
        assert len(from_topic) == 6 and subscription.skipped == {}

        # A thief's releases, and a /keys whose rotation names the thief's key: not followed.
        thief = Signer.generate()
        genuine = RotationStatement.from_dict(served["rotations"][0])
        forged = replace(genuine, new_key=thief.public_entry())
        tampered = {**served, "keys": [served["keys"][0]], "rotations": [forged.to_dict()]}
        first = run(consume_all(settings, settings.topic("hypotheses"), 6))[0].value
        run(write(settings, [(first, thief.headers(first))]))
        server = serve(json.dumps(tampered).encode())
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/keys"
            releases, subscription = run(read(settings, trusted_keys=pinned, keys_url=url))
        finally:
            server.shutdown()
        assert len(releases) == 3 and subscription.skipped == {"unknown_key": 4}
        # The forged statement on the keys topic: the thief's release is still refused.
        run(produce_json(settings, settings.topic("keys"), [(None, forged.to_json().encode())]))
        releases, subscription = run(read(settings, trusted_keys=pinned, keys_topic=True))
        assert len(releases) == 6 and subscription.skipped == {"unknown_key": 1}
    finally:
        assert restarted.stop() == 0
