"""A real Prometheus scraping a live worker with the shipped configuration, recording rules and
alerts: the target is up, every expression of every dashboard panel returns data, and a killed
worker makes the PrivstreamWorkerDown alert go pending.

The load is the demo's workload at 1,000 examples a second for 20 s (ten releases); Prometheus
scrapes and evaluates every second, so the rules' 1m and 15m rates have samples by then.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.deploy.deploy_files import dashboard_panels, plain_promql
from tests.integration.conftest import wait_until

from .deployment import OPERATOR_TOKEN, LiveDeployment
from .programs import require
from .prometheus import INTERVAL_SECONDS, Prometheus, finite_samples, live_config

pytestmark = [pytest.mark.ops, pytest.mark.live]

LOAD_SECONDS = 20
RATE = 1000.0


@pytest.fixture(scope="module")
def prometheus(deployment: LiveDeployment, tmp_path_factory) -> Iterator[Prometheus]:
    binary = require("prometheus")
    deployment.running()
    workdir = tmp_path_factory.mktemp("prometheus")
    token_file = workdir / "operator_token"
    token_file.write_text(OPERATOR_TOKEN)
    server = Prometheus(binary, workdir).start(live_config(deployment.operator_address, token_file))
    try:
        yield server
    finally:
        server.stop()


def panel_expr(expr: str, range_seconds: float) -> str:
    """A panel's expression as Grafana would send it: ``$__rate_interval`` is four scrape
    intervals (its minimum), ``$__range`` the queried range, ``$stream`` every stream."""
    return plain_promql(
        expr.replace("$__rate_interval", f"{4 * INTERVAL_SECONDS}s").replace(
            "$__range", f"{int(range_seconds)}s"
        )
    )


def test_the_worker_is_up_and_every_panel_returns_data(prometheus, deployment):
    deployment.running()
    wait_until(lambda: prometheus.query('up{job="privstream"} == 1'), 30, what="the worker's target to be up")
    started = time.time()
    releases_before = released(prometheus)
    deployment.load(int(LOAD_SECONDS * RATE), RATE)
    wait_until(
        lambda: released(prometheus) >= releases_before + LOAD_SECONDS * RATE // 2000 - 1,
        60,
        what="the load's releases in Prometheus",
    )
    time.sleep(3 * INTERVAL_SECONDS)  # a last scrape and evaluation of the rules
    end = time.time()

    (target,) = [t for t in prometheus.api("targets")["activeTargets"] if t["labels"]["job"] == "privstream"]
    assert target["health"] == "up" and target["scrapeUrl"] == f"{deployment.operator_url}/metrics", target

    empty, checked = [], 0
    for panel in dashboard_panels():
        for query in panel.get("targets", []):
            expr = panel_expr(query["expr"], end - started)
            series = prometheus.query_range(expr, started, end, INTERVAL_SECONDS)
            checked += 1
            if not finite_samples(series):
                empty.append(f"{panel['title']!r}: {query['legendFormat']!r} ({expr})")
    assert checked >= 30
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_a_killed_worker_makes_the_worker_down_alert_pending(prometheus, deployment):
    deployment.running()
    wait_until(lambda: prometheus.query('up{job="privstream"} == 1'), 30, what="the worker's target to be up")
    assert not down_alerts(prometheus)
    deployment.kill_worker()
    (alert,) = wait_until(lambda: down_alerts(prometheus), 30, what="PrivstreamWorkerDown to be pending")
    assert alert["state"] == "pending"  # for: 2m, then firing
    assert alert["labels"]["instance"] == deployment.operator_address
    assert alert["labels"]["severity"] == "critical"


def released(prometheus: Prometheus) -> float:
    result = prometheus.query("sum(privstream_releases_total)")
    return float(result[0]["value"][1]) if result else 0.0


def down_alerts(prometheus: Prometheus) -> list[dict]:
    return [a for a in prometheus.alerts() if a["labels"]["alertname"] == "PrivstreamWorkerDown"]
