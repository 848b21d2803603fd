"""The Grafana dashboard, built from a table of operators' concerns (stdlib only).

    python3 deploy/grafana/dashboard.py > deploy/grafana/dashboards/privstream.json

One row per concern, each panel a question an operator asks, each target the PromQL that answers
it. This table is the mapping from concern to metric: when a metric changes, change it here and
regenerate. ``tests/deploy`` checks that the JSON file is this script's output, and
``tests/ops/test_live_prometheus.py`` runs every target against a real Prometheus scraping a live
worker and names the panels that return no data. Names with colons are recording rules
(``deploy/prometheus/rules.yml``). Labels are bounded: stream, reason, learner, instance, feature,
partition, store, operation, version, level (the release tree's, 0..20) (never one value per
example, user or window).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
STREAM = 'stream=~"$stream"'


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str  # a Grafana unit id, or "suffix: ..." for a custom one
    targets: list[tuple[str, str]]  # (PromQL, legend)
    description: str
    kind: str = "timeseries"  # or "stat"
    width: int = 12
    max: float | None = None


@dataclass(frozen=True)
class Row:
    title: str
    panels: list[Panel] = field(default_factory=list)


ROWS = [
    Row(
        "Ingest: rate against capacity",
        [
            Panel(
                "Examples learned per second, and the capacity",
                "suffix: ex/s",
                [
                    ("sum(instance:privstream_examples_learned:rate1m)", "learned (all workers)"),
                    (
                        "sum(instance:privstream_examples_learned:rate1m"
                        " / (instance:privstream_ingest_busy:rate1m > 0))",
                        "capacity (learned per busy second)",
                    ),
                ],
                "The rate at which the workers learn valid examples, against what they would learn if their "
                "ingest loops were busy all the time (examples learned per second spent handling batches).",
                width=10,
            ),
            Panel(
                "Ingest loop busy",
                "percentunit",
                [
                    ("instance:privstream_ingest_busy:rate1m", "{{instance}}"),
                ],
                "Share of the time each worker's ingest loop spends on polled batches (validate, learn, "
                "publish, commit). Near 100%, the worker runs at its capacity and bursts become lag.",
                width=7,
                max=1,
            ),
            Panel(
                "Consumer lag (messages)",
                "short",
                [
                    (
                        "sum by (instance, partition) (privstream_consumer_lag_messages)",
                        "{{instance}} partition {{partition}}",
                    ),
                ],
                "Messages of the examples topic not handled yet, per partition of each worker (Kafka's "
                "high watermark from the worker's own fetches, minus the next offset it will handle).",
                width=7,
            ),
        ],
    ),
    Row(
        "Workers",
        [
            Panel(
                "Workers up",
                "short",
                [('sum(up{job="privstream"})', "workers up")],
                "Workers whose /metrics answered Prometheus's last scrape.",
                kind="stat",
                width=6,
            ),
            Panel(
                "Time since each worker last handled a message",
                "s",
                [
                    (
                        "time() - max by (instance) (privstream_last_progress_timestamp_seconds)",
                        "{{instance}}",
                    ),
                ],
                "Grows while no message arrives; with messages waiting it means a stalled worker "
                "(the PrivstreamWorkerStalled alert).",
                width=12,
            ),
            Panel(
                "Versions running",
                "short",
                [("count by (version) (privstream_build_info)", "{{version}}")],
                "Workers per privstream version (a rolling upgrade shows two).",
                kind="stat",
                width=6,
            ),
        ],
    ),
    Row(
        "Dead letters",
        [
            Panel(
                "Messages received and dead-lettered per second, by reason",
                "suffix: msg/s",
                [
                    ("sum(instance:privstream_examples_received:rate1m)", "received"),
                    ("reason:privstream_examples_invalid:rate1m", "invalid: {{reason}}"),
                    (
                        "sum(rate(privstream_dead_letters_published_total[$__rate_interval]))",
                        "published to examples.dlq",
                    ),
                    (
                        "sum(rate(privstream_examples_repeated_total[$__rate_interval]))",
                        "repeats of an id dropped",
                    ),
                    (
                        "sum(rate(privstream_example_ids_forgotten_total[$__rate_interval]))",
                        "ids forgotten early",
                    ),
                    (
                        "sum(rate(privstream_outputs_refused_total[$__rate_interval]))",
                        "refused by Kafka (size)",
                    ),
                ],
                "Messages consumed from the examples topic; messages and rows of batch messages rejected "
                "by validation, by reason; dead letters published to the dead-letter topic (with the "
                "reason in their headers); examples dropped as repeats of an id, and ids forgotten before"
                " their horizon because a stream's memory of ids was full; records Kafka refused for "
                "their size (sent to the dead-letter topic as references instead).",
                width=16,
            ),
            Panel(
                "Share of messages dead-lettered",
                "percentunit",
                [
                    (
                        "sum(rate(privstream_dead_letters_published_total[$__rate_interval])) "
                        "/ sum(rate(privstream_examples_received_total[$__rate_interval]))",
                        "dead-lettered",
                    ),
                ],
                "The PrivstreamDeadLetterRate alert fires above 5% for 10 minutes.",
                width=8,
                max=1,
            ),
        ],
    ),
    Row(
        "Online learning (trusted zone)",
        [
            Panel(
                "SOA mistakes against the bound, per stream",
                "short",
                [
                    (f"sum by (stream) (privstream_soa_mistakes_total{{{STREAM}}})", "mistakes {{stream}}"),
                    (
                        f"max by (stream) (privstream_soa_mistake_bound{{{STREAM}}})",
                        "bound (Ldim) {{stream}}",
                    ),
                ],
                "On a realizable stream the SOA makes at most Ldim mistakes; more proves the stream is not "
                "realizable by its class.",
                width=10,
            ),
            Panel(
                "Examples learned per second, per stream",
                "suffix: ex/s",
                [
                    (f"stream:privstream_examples_learned:rate1m{{{STREAM}}}", "{{stream}}"),
                ],
                "Valid examples predicted and learned by each stream's online learner (the SOA, or a "
                "feature-vector stream's Perceptron or other configured learner).",
                width=9,
            ),
            Panel(
                "Realizable",
                "bool_yes_no",
                [
                    (f"min by (stream) (privstream_stream_realizable{{{STREAM}}})", "{{stream}}"),
                ],
                "No once a stream has proven itself not realizable by its class (feature vectors: once "
                "its Perceptron's mistakes passed (R/γ)², so no halfspace has margin γ on it).",
                kind="stat",
                width=5,
            ),
            Panel(
                "Feature-vector streams: online mistakes against the margin bound",
                "short",
                [
                    (
                        f"sum by (stream) (privstream_online_mistakes_total{{{STREAM}}})",
                        "mistakes {{stream}}",
                    ),
                    (
                        f"max by (stream) (privstream_online_margin_mistakes{{{STREAM}}})",
                        "Perceptron mistakes {{stream}}",
                    ),
                    (
                        f"max by (stream) (privstream_online_margin_bound{{{STREAM}}})",
                        "bound (R/γ)² {{stream}}",
                    ),
                    (
                        f"sum by (stream) (privstream_feature_values_clipped_total{{{STREAM}}})",
                        "values clipped to the bounds {{stream}}",
                    ),
                ],
                "The online learner's mistakes (predictions made before the label). On a stream separable "
                "with the configured margin γ the Perceptron makes at most (R/γ)² mistakes, R = sqrt(d+1) on "
                "the features scaled to [-1, 1] by their public bounds; more proves that no halfspace has "
                "margin γ on the stream. The averaged Perceptron's test counts its inner Perceptron's. "
                "Values outside a feature's public bounds are clipped to them: many clipped values mean "
                "the bounds are too narrow for the data.",
                width=24,
            ),
        ],
    ),
    Row(
        "Private releases (public zone)",
        [
            Panel(
                "Releases, refusals and failures in the dashboard's time range",
                "short",
                [
                    (
                        f"sum by (stream) (increase(privstream_releases_total{{{STREAM}}}[$__range]))",
                        "released {{stream}}",
                    ),
                    (
                        "sum by (stream) "
                        f"(increase(privstream_release_refusals_total{{{STREAM}}}[$__range]))",
                        "refused (budget spent) {{stream}}",
                    ),
                    (
                        "sum by (stream) "
                        f"(increase(privstream_release_failures_total{{{STREAM}}}[$__range]))",
                        "failed {{stream}}",
                    ),
                    (
                        "sum by (stream) "
                        f"(increase(privstream_release_guarantee_refusals_total{{{STREAM}}}[$__range]))",
                        "refused (algorithm above its charge) {{stream}}",
                    ),
                    (
                        f"sum by (stream) (increase(privstream_late_examples_total{{{STREAM}}}[$__range]))",
                        "late examples {{stream}}",
                    ),
                    (
                        "sum(increase(privstream_examples_log_replaced_total[$__range]))",
                        "examples partitions replaced (read as new)",
                    ),
                ],
                "Windows released, refused for lack of budget, or failed (retried after a restart); "
                "releases refused because the algorithm's guarantee exceeded what the ledger charged; "
                "examples that came after their time window was released; partitions of the examples "
                "topic whose log was replaced (the broker restarted without its data) and read anew.",
                kind="stat",
                width=8,
            ),
            Panel(
                "Releases and refusals in the last 15 minutes",
                "short",
                [
                    (
                        f"sum by (stream) (increase(privstream_releases_total{{{STREAM}}}[15m]))",
                        "released {{stream}}",
                    ),
                    (
                        f"sum by (stream) (increase(privstream_release_refusals_total{{{STREAM}}}[15m]))",
                        "refused {{stream}}",
                    ),
                ],
                "How often windows close and are released, over time.",
                width=8,
            ),
            Panel(
                "Time since the last release",
                "s",
                [
                    (
                        f"time() - max by (stream) (privstream_last_release_timestamp_seconds{{{STREAM}}})",
                        "{{stream}}",
                    ),
                ],
                "The PrivstreamNoReleaseForTooLong alert fires after an hour while budget is left.",
                width=8,
            ),
        ],
    ),
    Row(
        "Release timing (operators only: the public sees each release at its deadline)",
        [
            Panel(
                "Deadlines missed and defaults released, last 15 minutes",
                "short",
                [
                    (
                        "sum by (stream) "
                        f"(increase(privstream_release_deadlines_missed_total{{{STREAM}}}[15m]))",
                        "deadline missed {{stream}}",
                    ),
                    (
                        "sum by (stream, reason) "
                        f"(increase(privstream_release_defaults_total{{{STREAM}}}[15m]))",
                        "default: {{reason}} {{stream}}",
                    ),
                ],
                "A missed deadline: a release went out after its deadline (the worker is overloaded or "
                "the slot is too short; PrivstreamReleaseDeadlineMissed fires). A default: the fit was "
                "unfinished at the deadline, failed, or its process died, and the data-independent default "
                "went out.",
                width=12,
            ),
            Panel(
                "Publication slot and lateness",
                "s",
                [
                    (
                        f"max by (stream) (privstream_release_publish_delay_seconds{{{STREAM}}})",
                        "slot {{stream}}",
                    ),
                    (
                        f"max by (stream) (privstream_release_lateness_seconds{{{STREAM}}})",
                        "last missed deadline, late by {{stream}}",
                    ),
                    (
                        "histogram_quantile(0.99, sum by (le, learner) "
                        "(rate(privstream_learner_run_seconds_bucket[15m])))",
                        "learner p99 {{learner}}",
                    ),
                ],
                "The slot (publish_delay_seconds) must stay well above the learners' run time on the "
                "input cap; lateness is how late the last release that missed its deadline went out.",
                width=12,
            ),
        ],
    ),
    Row(
        "Lifetime privacy budget",
        [
            Panel(
                "Lifetime ε budget used, per stream",
                "percentunit",
                [
                    (
                        f"max by (stream) (privstream_privacy_lifetime_epsilon_spent{{{STREAM}}}) "
                        f"/ max by (stream) (privstream_privacy_lifetime_epsilon_budget{{{STREAM}}})",
                        "{{stream}}",
                    ),
                ],
                "The largest lifetime ε of an example (or user), over the lifetime budget (privacy ledger): "
                "the sum of the charges of the release-tree nodes covering its window. It reaches the "
                "configured sum over the levels once the top level has released and stays there: new "
                "windows start fresh, so a valid configuration never runs out.",
                width=7,
                max=1,
            ),
            Panel(
                "Lifetime ε per example: spent and budget",
                "none",
                [
                    (
                        f"max by (stream) (privstream_privacy_lifetime_epsilon_spent{{{STREAM}}})",
                        "spent {{stream}}",
                    ),
                    (
                        f"max by (stream) (privstream_privacy_lifetime_epsilon_budget{{{STREAM}}})",
                        "budget {{stream}}",
                    ),
                ],
                "The ledger's figures, in units of ε.",
                width=6,
            ),
            Panel(
                "Releases per level in the dashboard's time range",
                "short",
                [
                    (
                        "sum by (stream, level) "
                        f"(increase(privstream_releases_by_level_total{{{STREAM}}}[$__range]))",
                        "{{stream}} level {{level}}",
                    ),
                ],
                "Level 0 releases every window, level j every node of 2^j windows once complete.",
                kind="stat",
                width=4,
            ),
            Panel(
                "Users excluded by the individual privacy filter",
                "short",
                [
                    (
                        "sum by (stream) "
                        f"(increase(privstream_filter_excluded_users_total{{{STREAM}}}[$__range]))",
                        "{{stream}}",
                    ),
                ],
                "User-level streams: users left out of a release because their lifetime budget would be "
                "passed (their examples still feed the SOA). Private: operators only.",
                kind="stat",
                width=4,
            ),
            Panel(
                "Budget exhausted",
                "bool_yes_no",
                [
                    (f"max by (stream) (privstream_privacy_budget_exhausted{{{STREAM}}})", "{{stream}}"),
                ],
                "Yes once the ledger refused a release: the configuration costs more than the lifetime "
                "budget (a lowered budget, or a ledger shared with an older configuration).",
                kind="stat",
                width=3,
            ),
        ],
    ),
    Row(
        "Learners",
        [
            Panel(
                "Learner run time per window (p50, p95, p99, mean)",
                "s",
                [
                    (
                        "histogram_quantile(0.5, learner_le:privstream_learner_run_seconds_bucket:rate15m)",
                        "p50 {{learner}}",
                    ),
                    (
                        "histogram_quantile(0.95, learner_le:privstream_learner_run_seconds_bucket:rate15m)",
                        "p95 {{learner}}",
                    ),
                    (
                        "histogram_quantile(0.99, learner_le:privstream_learner_run_seconds_bucket:rate15m)",
                        "p99 {{learner}}",
                    ),
                    (
                        "sum by (learner) (rate(privstream_learner_run_seconds_sum[15m])) "
                        "/ sum by (learner) (rate(privstream_learner_run_seconds_count[15m]))",
                        "mean {{learner}}",
                    ),
                ],
                "Time a private learner or sanitizer took on one window (in the worker's learner process), "
                "over the last 15 minutes.",
                width=12,
            ),
            Panel(
                "Examples per window (p50, p95)",
                "short",
                [
                    (
                        "histogram_quantile(0.5, learner_le:privstream_window_size_examples_bucket:rate15m)",
                        "p50 {{learner}}",
                    ),
                    (
                        "histogram_quantile(0.95, learner_le:privstream_window_size_examples_bucket:rate15m)",
                        "p95 {{learner}}",
                    ),
                ],
                "Examples in the windows handed to each learner, over the last 15 minutes (bucket bounds).",
                width=12,
            ),
        ],
    ),
    Row(
        "Stores: the privacy ledger and the state store",
        [
            Panel(
                "Store latency (p50, p99), by operation",
                "s",
                [
                    (
                        "histogram_quantile(0.5, "
                        "store_operation_le:privstream_store_operation_seconds_bucket:rate1m)",
                        "p50 {{store}}.{{operation}}",
                    ),
                    (
                        "histogram_quantile(0.99, "
                        "store_operation_le:privstream_store_operation_seconds_bucket:rate1m)",
                        "p99 {{store}}.{{operation}}",
                    ),
                ],
                "Time one call of the ledger or the state store takes. The ingest path appends to the state "
                "store and saves the SOA on every batch; each release charges the ledger.",
                width=12,
            ),
            Panel(
                "Store calls per second, by operation",
                "suffix: calls/s",
                [
                    (
                        "sum by (store, operation) "
                        "(rate(privstream_store_operation_seconds_count[$__rate_interval]))",
                        "{{store}}.{{operation}}",
                    ),
                ],
                "How often each operation of the stores runs.",
                width=12,
            ),
        ],
    ),
]


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict:
    defaults: dict = {"unit": panel.unit}
    if panel.max is not None:
        defaults.update(min=0, max=panel.max)
    out: dict = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": 8},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(panel.targets)
        ],
    }
    if panel.kind == "stat":
        out["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "textMode": "value_and_name",
        }
    else:
        out["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    return out


def dashboard() -> dict:
    panels, panel_id, y = [], 1, 0
    for row in ROWS:
        panels.append(
            {
                "id": panel_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
                "panels": [],
            }
        )
        panel_id, y, x = panel_id + 1, y + 1, 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y = 0, y + 8
            panels.append(panel_json(panel, panel_id, x, y))
            panel_id, x = panel_id + 1, x + panel.width
        y += 8
    return {
        "uid": "privstream-overview",
        "title": "privstream",
        "description": "Online SOA learning and differentially-private releases "
        "(generated by deploy/grafana/dashboard.py)",
        "tags": ["privstream"],
        "schemaVersion": 39,
        "version": 2,
        "editable": False,
        "graphTooltip": 1,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "timezone": "browser",
        "templating": {
            "list": [
                {
                    "name": "stream",
                    "label": "stream",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": {
                        "query": "label_values(privstream_examples_learned_total, stream)",
                        "refId": "StandardVariableQuery",
                    },
                    "definition": "label_values(privstream_examples_learned_total, stream)",
                    "refresh": 2,
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
                    "sort": 1,
                }
            ]
        },
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
