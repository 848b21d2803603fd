"""The dashboard and the alert rules use only metrics a live worker exports, and the dashboard
shows every metric the worker exports (or the metric is in :data:`DELIBERATELY_LEFT_OFF`).

A worker runs on the embedded broker with one stream that has a release config (small windows, a
budget for one release), so that the release metrics exist, including those that appear only after
a release (``privstream_last_release_timestamp_seconds``) or a refusal. Names are compared by
metric family: a counter is queried as ``<name>_total``, a histogram only as ``<name>_bucket``,
``_sum`` or ``_count``, a gauge by its name (``deploy_files.referenceable_names``).
"""

from __future__ import annotations

import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from privstream.stream_app.embedded.broker import free_listener_ports
from privstream.stream_app.kafka.clients import ensure_topics, produce_json
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.sources.synthetic import synthetic_examples
from tests.integration.conftest import run, start_worker, wait_until

from .deploy_files import (
    BOUNDED_LABELS,
    EXTERNAL_METRICS,
    alert_rules,
    dashboard_exprs,
    metric_names,
    recording_rules,
    referenceable_names,
)

#: Metric families the service exports that the dashboard deliberately does not show, with why.
#: Keep it honest: the test fails if a name here is not exported any more, or is on the dashboard.
DELIBERATELY_LEFT_OFF: dict[str, str] = {
    # Add "name": "reason" here, never silently.
    "privstream_listener_connections_refused": "refused and dropped connections of the listeners: "
    "an investigation figure (a crowd, a slowloris), read on /metrics beside the listener's log",
    "privstream_privacy_epsilon_spent": "the lifetime spend under its pre-tree name; the dashboard shows "
    "privstream_privacy_lifetime_epsilon_spent",
    "privstream_privacy_epsilon_remaining": "the lifetime budget minus the spend, under its pre-tree name; "
    "the dashboard shows the lifetime spend and budget",
    "privstream_shard_mistakes": "per partition shard of a partitioned stream (partition_by); the "
    "dashboard shows each stream's mistakes, which count every shard's",
    "privstream_shard_mistake_bound": "per partition shard of a partitioned stream; the dashboard shows "
    "each stream's bound, partitions x the class's",
}

WINDOW = 40
CLASS = "thresholds:256"


def source_names(exprs: list[str]) -> set[str]:
    """The metrics the expressions select, through the recording rules they use (rules.yml)."""
    records = {r["record"]: r["expr"] for r in recording_rules()}
    names: set[str] = set()
    for expr in exprs:
        for name in metric_names(expr):
            names |= metric_names(records[name]) if name in records else {name}
    return names


def dashboard_names() -> set[str]:
    return source_names(dashboard_exprs())


def alert_names() -> set[str]:
    return source_names([r["expr"] for r in alert_rules()])


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


@pytest.fixture(scope="module")
def live_metrics(broker, tmp_path_factory) -> str:
    """/metrics of a worker that has released two windows (shared by the tests
    of this module: one worker, unique app id, group and topics)."""
    tmp_path = tmp_path_factory.mktemp("metrics")
    run_id = uuid.uuid4().hex[:10]
    settings = Settings(
        app_id=f"privstream-deploy-{run_id}",
        topic_prefix=f"deploy-{run_id}.",
        kafka_bootstrap=broker.bootstrap,
        **free_listener_ports(),
        data_dir=tmp_path / "data",
        topic_partitions=2,
        kafka_session_timeout_seconds=6,  # a group join on the embedded broker waits half of it
        kafka_heartbeat_interval_seconds=2,
        ledger_create_if_missing=True,
        # ε = 1 per window, lifetime 1.5 per example: every window is released (parallel composition).
        streams=[
            StreamConfig(
                name="s",
                hypothesis_class=CLASS,
                release=ReleaseConfig(window=WindowConfig(size=WINDOW), epsilon=1.0, epsilon_budget=1.5),
            ),
            # A stream of feature vectors: its online learner's metrics (online predictions only).
            StreamConfig(name="v", features=2, feature_bounds=[(0.0, 1.0), (0.0, 1.0)]),
        ],
        _env_file=None,
    )
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        batch = synthetic_examples(CLASS, 2 * WINDOW, seed=3)
        records = [("s", m) for m in batch.messages("s")] + [("s", b"{not json")]
        records += [
            ("v", {"stream_id": "v", "x": [i / 100, 1 - i / 100], "y": int(i > 50)}) for i in range(100)
        ]
        run(produce_json(settings, settings.topic("examples"), records))
        url = f"{worker.operator_url}/metrics"

        def released() -> str | None:
            text = scrape(url)
            done = (
                sample(text, "privstream_releases_total", stream="s") == 2
                and sample(text, "privstream_release_refusals_total", stream="s") == 0
                and sample(text, "privstream_examples_learned_total", stream="v") == 100
            )
            return text if done else None

        return wait_until(released, 120, what="two releases in /metrics")
    finally:
        worker.stop()


@pytest.mark.live
def test_dashboard_and_alert_metrics_exist_on_a_live_worker(live_metrics):
    exported = referenceable_names(list(text_string_to_metric_families(live_metrics)))
    for source, names in (("dashboard", dashboard_names()), ("alert rules", alert_names())):
        missing = sorted(n for n in names if n not in exported and n not in EXTERNAL_METRICS)
        assert not missing, f"the {source} use metrics no worker exports: {missing}"
    # The release metrics really are there (the point of configuring a release).
    for name in (
        "privstream_last_release_timestamp_seconds",
        "privstream_learner_run_seconds_bucket",
        "privstream_privacy_epsilon_remaining",
    ):
        assert name in exported


@pytest.mark.live
def test_every_exported_metric_is_on_the_dashboard_or_deliberately_left_off(live_metrics):
    families = list(text_string_to_metric_families(live_metrics))
    exported = referenceable_names(families)
    shown = {exported[n] for n in dashboard_names() if n in exported}
    all_families = set(exported.values())
    assert all(name.startswith("privstream_") for name in all_families)
    for name in DELIBERATELY_LEFT_OFF:
        assert name in all_families, f"{name} is listed as left off but no longer exported"
        assert name not in shown, f"{name} is listed as left off but the dashboard shows it"
    missing = sorted(all_families - shown - set(DELIBERATELY_LEFT_OFF))
    assert not missing, f"exported but neither on the dashboard nor deliberately left off: {missing}"


@pytest.mark.live
def test_every_exported_label_is_bounded(live_metrics):
    """No series carries a label with one value per example, user or window."""
    labels = {
        label: family.name
        for family in text_string_to_metric_families(live_metrics)
        for sample in family.samples
        for label in sample.labels
    }
    assert {"stream", "reason", "learner", "partition", "store", "operation"} <= labels.keys()
    unbounded = {label: name for label, name in labels.items() if label not in BOUNDED_LABELS}
    assert not unbounded, f"labels outside deploy_files.BOUNDED_LABELS: {unbounded}"


def test_names_compare_by_family_not_by_suffix():
    text = (
        "# TYPE a counter\na_total 1.0\n"
        '# TYPE h histogram\nh_bucket{le="+Inf"} 1.0\nh_sum 1.0\nh_count 1.0\n'
        "# TYPE g_count gauge\ng_count 2.0\n"
    )
    names = referenceable_names(list(text_string_to_metric_families(text)))
    assert names == {
        "a_total": "a",
        "a_created": "a",
        "h_bucket": "h",
        "h_sum": "h",
        "h_count": "h",
        "h_created": "h",
        "g_count": "g_count",
    }
    assert "h" not in names and "a" not in names  # a bare histogram or counter name selects nothing
