"""The page for people's routes on a listener, without a browser (tests/ops/test_page.py drives
it in headless Chromium): the HTML and assets it serves, and the releases over time it reads."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from importlib import resources

import pytest

from privstream.agents.ledger_port import NodeRange
from privstream.stream_app.embedded.broker import free_port
from privstream.stream_app.settings import StreamConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.web.listener import HttpListener
from privstream.stream_app.web.page import asset, page_routes
from privstream.stream_app.web.public import PublicLedger, public_routes

STREAMS = [
    StreamConfig(
        name="clicks", hypothesis_class="thresholds:16", release={"epsilon": 1.0, "epsilon_budget": 3.0}
    ),
    StreamConfig(name="online", hypothesis_class="thresholds:16"),
]


def release(entry: int, window: str) -> bytes:
    return json.dumps(
        {
            "stream_id": "clicks",
            "hypothesis": {"kind": "runs", "domain": 16, "first": 0, "changes": [entry]},
            "certificate": {
                "epsilon": 1.0,
                "delta": 0.0,
                "ledger_entry_id": str(entry),
                "epsilon_budget_remaining": 3.0 - entry,
                "window": {"window_id": window, "kind": "count"},
            },
        }
    ).encode()


def fetch(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


async def get(url: str) -> tuple[int, str, bytes]:
    """GET in a thread: the listener runs on this test's event loop."""
    return await asyncio.to_thread(fetch, url)


@pytest.fixture
async def page():
    ledger = SqliteLedger.open(":memory:", budgets={"clicks": (3.0, 0.0)})
    for entry, window in ((1, "w0"), (2, "w1")):
        charge = ledger.charge(
            "clicks", window, "learner:generic", 1.0, 0.0, lambda r, e=entry, w=window: release(e, w)
        )
        ledger.mark_published(charge.entry_id)
    ledger.charge("clicks", "w2", "learner:generic", 1.0, 0.0, release(3, "w2"))  # charged, not yet published
    listener = HttpListener("public", "127.0.0.1", free_port(), page_routes(STREAMS, ledger))
    await listener.start()
    try:
        yield f"http://127.0.0.1:{listener.port}"
    finally:
        await listener.stop()
        ledger.close()


async def test_the_pages_and_their_assets_are_served_with_their_types(page):
    status, kind, body = await get(f"{page}/")
    assert status == 200 and kind.startswith("text/html") and b'data-page="index"' in body
    status, kind, body = await get(f"{page}/stream/clicks")
    assert status == 200 and kind.startswith("text/html") and b'data-page="stream"' in body
    status, kind, body = await get(f"{page}/assets/page.js")
    assert status == 200 and kind.startswith("text/javascript") and b"PrivstreamPage" in body
    status, kind, _ = await get(f"{page}/assets/uPlot.iife.min.js")
    assert status == 200 and kind.startswith("text/javascript")
    for name in ("NOTICE", "..%2F__init__.py", ".hidden.js", "missing.js"):
        assert (await get(f"{page}/assets/{name}"))[0] == 404, name


def test_every_asset_the_pages_reference_is_served_from_the_package():
    """No CDN and no broken link: every src/href of the HTML is one of the package's assets."""
    folder = resources.files("privstream.stream_app.web.page").joinpath("assets")
    for html in ("index.html", "stream.html"):
        refs = re.findall(r'(?:src|href)="([^"]+)"', folder.joinpath(html).read_text())
        local = [r for r in refs if r.startswith("/assets/")]
        assert local and all(asset(r.removeprefix("/assets/")) is not None for r in local), refs
        assert not [r for r in refs if r.startswith(("http:", "https:", "//"))], refs


async def test_the_releases_over_time_are_the_published_certificates_oldest_first(page):
    status, _, body = await get(f"{page}/streams/clicks/releases")
    answer = json.loads(body)
    assert status == 200 and answer["stream_id"] == "clicks"
    # public ids (stream, node, product); not the unpublished third release
    assert [r["ledger_entry_id"] for r in answer["releases"]] == [
        "clicks/w0/learner:generic",
        "clicks/w1/learner:generic",
    ]
    first = answer["releases"][0]
    assert first["product"] == "hypotheses" and first["window_id"] == "w0" and first["epsilon"] == 1.0
    assert first["epsilon_budget_remaining"] == 2.0 and first["level"] is None
    assert isinstance(first["published_at"], float)
    figures = answer["lifetime"]
    assert figures["lifetime_epsilon_spent"] == 3.0 and figures["lifetime_epsilon_budget"] == 3.0
    assert figures["releases"] == 3 and figures["releases_per_level"] == {"0": 3}
    assert (await get(f"{page}/streams/online/releases"))[0] == 404  # no private releases
    assert (await get(f"{page}/streams/nope/releases"))[0] == 404


def test_a_tree_release_is_summarised_with_its_level_node_and_lifetime_bound():
    from datetime import UTC, datetime

    from privstream.agents.ledger_port import Charge, NodeRange
    from privstream.stream_app.web.page import release_summary

    lifetime = {
        "epsilon": 1.0,
        "delta": 0.0,
        "epsilon_budget": 1.0,
        "delta_budget": 0.0,
        "top_level": 2,
        "level_epsilon": [1 / 3] * 3,
        "rule": "parallel ...",
    }
    body = {
        "certificate": {
            "epsilon": 1 / 3,
            "delta": 0.0,
            "level": 2,
            "lifetime": lifetime,
            "window": {"window_id": "ab12-c4-L2-1", "kind": "count", "first_window": 4, "last_window": 7},
        }
    }
    charge = Charge(
        9,
        "clicks",
        "ab12-c4-L2-1",
        "learner:generic",
        1 / 3,
        0.0,
        json.dumps(body).encode(),
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=UTC),
        node=NodeRange.of(2, 1),
    )
    summary = release_summary(charge)
    assert (summary["level"], summary["first_window"], summary["last_window"]) == (2, 4, 7)
    assert summary["lifetime"] == lifetime and summary["epsilon_budget_remaining"] is None


async def test_a_release_is_shown_and_counted_only_from_its_scheduled_time():
    """A release completed and published ahead of its deadline (as a worker whose clock runs early
    could) is not on the public pages until then: not listed, not counted, not in the spend."""
    from privstream.agents.ledger_port import NodeRange
    from privstream.stream_app.web.public import lifetime, public_routes

    ledger = SqliteLedger.open(":memory:", budgets={"clicks": (3.0, 0.0)})
    soon = time.time() + 3600
    for window, scheduled in ((0, None), (1, soon)):
        reservation = ledger.reserve(
            "clicks",
            f"w{window}",
            "learner:generic",
            1.0,
            0.0,
            NodeRange.of(0, window),
            scheduled_at=scheduled,
        )
        ledger.complete(reservation.entry_id, release(window + 1, f"w{window}"))
        ledger.mark_published(reservation.entry_id)
    listener = HttpListener(
        "public", "127.0.0.1", free_port(), public_routes(STREAMS, ledger) + page_routes(STREAMS, ledger)
    )
    await listener.start()
    try:
        url = f"http://127.0.0.1:{listener.port}"
        history = json.loads((await get(f"{url}/streams/clicks/releases"))[2])
        budget = json.loads((await get(f"{url}/streams/clicks/budget"))[2])
        latest = json.loads((await get(f"{url}/streams/clicks/releases/latest"))[2])
        best = json.loads((await get(f"{url}/streams/clicks/releases/best"))[2])
    finally:
        await listener.stop()
    assert [r["window_id"] for r in history["releases"]] == ["w0"]
    assert budget["releases"] == 1 and budget["lifetime_epsilon_spent"] == 1.0
    assert latest["certificate"]["window"]["window_id"] == best["certificate"]["window"]["window_id"] == "w0"
    later = lifetime(
        STREAMS[0], PublicLedger(ledger, clock=lambda: soon)
    )  # from its scheduled time on: counted
    assert later is not None and later["releases"] == 2 and later["lifetime_epsilon_spent"] == 1.0
    ledger.close()


async def test_the_best_release_is_the_newest_of_the_highest_level_not_the_latest():
    def tree_release(entry: int, level: int, first: int, last: int) -> bytes:
        window = {"window_id": f"w{entry}", "kind": "count", "first_window": first, "last_window": last}
        certificate = {"epsilon": 0.5, "delta": 0.0, "ledger_entry_id": str(entry), "level": level}
        body = {
            "stream_id": "clicks",
            "hypothesis": {"kind": "runs", "domain": 16, "first": 0, "changes": [entry]},
        }
        return json.dumps({**body, "certificate": {**certificate, "window": window}}).encode()

    ledger = SqliteLedger.open(":memory:", budgets={"clicks": (3.0, 0.0)})
    # Windows 0 and 1 at level 0, their level-1 node, then window 2 at level 0 (the latest).
    for entry, (level, first, last) in enumerate([(0, 0, 0), (0, 1, 1), (1, 0, 1), (0, 2, 2)], start=1):
        reserved = ledger.reserve(
            "clicks", f"w{entry}", "learner:generic", 0.5, 0.0, NodeRange.of(level, first >> level)
        )
        charge = ledger.complete(reserved.entry_id, tree_release(reserved.entry_id, level, first, last))
        ledger.mark_published(charge.entry_id)
    listener = HttpListener("public", "127.0.0.1", free_port(), public_routes(STREAMS, ledger))
    await listener.start()
    try:
        base = f"http://127.0.0.1:{listener.port}"
        status, kind, body = await get(f"{base}/streams/clicks/releases/best")
        assert status == 200 and kind.startswith("application/json")
        assert json.loads(body)["certificate"]["ledger_entry_id"] == "3"  # level 1, not the latest (4)
        assert (await get(f"{base}/streams/online/releases/best"))[0] == 404  # no releases: online only
    finally:
        await listener.stop()
        ledger.close()
