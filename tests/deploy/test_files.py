"""The deployment files parse and hold what the service needs (no Docker or cluster required).

Checked: the Dockerfile (multi-stage, non-root user, healthcheck on /healthz, entrypoint), the
compose file (services, loopback-only ports, shared ledger/state volume, provisioning mounts), the
Kubernetes manifests (probes, enableServiceLinks false, resources, non-root, Secret for the
password), the Grafana dashboard and provisioning (fixed uid, datasource by uid), the Prometheus
configuration and alert rules (structure, balanced expressions, metric names only from the known
sources). With ``promtool`` on PATH, rules and every dashboard expression also go through
``promtool check rules``; without it (CI has no promtool) the structural checks here are the check.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .deploy_files import (
    ALERTS,
    COMPOSE,
    DASHBOARD,
    DEPLOY,
    DOCKERFILE,
    PROMETHEUS,
    ROOT,
    alert_rules,
    balanced,
    compose_env,
    dashboard,
    dashboard_exprs,
    dashboard_panels,
    k8s_documents,
    load_yaml,
    metric_names,
    plain_promql,
)

# --- Dockerfile ------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[str]]:
    """Instructions per stage (comment lines dropped first, as Docker does, then continuations joined)."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.strip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_dockerfile_is_multi_stage_slim_and_installs_the_wheel_from_the_builder():
    builder, final = dockerfile_stages()
    assert builder[0].startswith("FROM python:3.11-slim AS builder")
    assert any(i.startswith("RUN pip wheel") and i.rstrip().endswith(".") for i in builder)
    assert final[0] == "FROM python:3.11-slim"
    assert any(i.startswith("COPY --from=builder /wheels") for i in final)
    install = next(i for i in final if "pip install" in i)
    assert "--no-index" in install and "--no-cache-dir" in install and "rm -rf /wheels" in install
    # No compilers and no source tree in the final image.
    assert not any("build-essential" in i or "gcc" in i for i in final)
    assert not any(i.startswith(("COPY privstream", "COPY . ")) for i in final)


def test_dockerfile_runs_as_a_non_root_user_with_healthcheck_and_worker_entrypoint():
    final = dockerfile_stages()[-1]
    users = [i.split(None, 1)[1] for i in final if i.startswith("USER ")]
    assert users, "the final stage must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    env = " ".join(i for i in final if i.startswith("ENV"))
    assert "PRIVSTREAM_PUBLIC_HOST=0.0.0.0" in env and "PRIVSTREAM_OPERATOR_HOST=0.0.0.0" in env
    assert "PRIVSTREAM_OPERATOR_TOKEN" not in env  # a secret: given at run time, never baked in
    assert any(i.startswith("VOLUME") and "/var/lib/privstream/data" in i for i in final)
    health = next(i for i in final if i.startswith("HEALTHCHECK"))
    assert "/healthz" in health and "urllib.request" in health and "curl" not in health
    assert "PRIVSTREAM_OPERATOR_PORT" in health  # the probe is on the operator listener
    entrypoint = json.loads(next(i for i in final if i.startswith("ENTRYPOINT")).split(None, 1)[1])
    command = json.loads(next(i for i in final if i.startswith("CMD")).split(None, 1)[1])
    assert entrypoint + command == ["privstream", "worker"]


def test_dockerignore_keeps_the_build_context_small_and_secret_free():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", "tests", "var", ".env"} <= ignored
    assert not {"privstream", "pyproject.toml", "README.md"} & ignored  # what the build copies


# --- docker compose --------------------------------------------------------------------------


def compose_services() -> dict:
    return load_yaml(COMPOSE)["services"]


def test_compose_has_kafka_kraft_workers_producer_prometheus_grafana_and_exporter():
    services = compose_services()
    assert {"broker", "worker-1", "worker-2", "producer", "prometheus", "grafana", "kafka-exporter"} <= set(
        services)
    broker = services["broker"]
    assert broker["image"].startswith("apache/kafka:")
    assert broker["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    producer = services["producer"]
    assert "privstream produce" in " ".join(producer["command"]) and "--synthetic" in " ".join(
        producer["command"])
    assert producer["healthcheck"] == {"disable": True}


def test_compose_publishes_ports_on_loopback_only():
    published = []
    for name, service in compose_services().items():
        for port in service.get("ports", []):
            published.append(name)
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), f"{name}: {port!r}"
    assert {"worker-1", "worker-2", "grafana", "prometheus"} <= set(published)


def test_compose_workers_share_ledger_and_state_but_not_data_dir():
    services = compose_services()
    mounts = {}
    for name in ("worker-1", "worker-2"):
        env = compose_env(services[name])
        volumes = dict(v.rsplit(":", 1)[::-1] for v in services[name]["volumes"])  # path -> source
        assert Path(env["PRIVSTREAM_LEDGER_PATH"]).parent == Path(env["PRIVSTREAM_STATE_PATH"]).parent
        shared_dir = str(Path(env["PRIVSTREAM_LEDGER_PATH"]).parent)
        mounts[name] = (volumes[shared_dir], volumes[env["PRIVSTREAM_DATA_DIR"]])
        assert env["PRIVSTREAM_LEDGER_CREATE_IF_MISSING"] == "true"  # demo only: see the comment
        assert "release" in json.loads(env["PRIVSTREAM_STREAMS"])[0]
    (shared_1, data_1), (shared_2, data_2) = mounts["worker-1"], mounts["worker-2"]
    assert shared_1 == shared_2 and data_1 != data_2
    volumes = load_yaml(COMPOSE)["volumes"]
    assert {shared_1, data_1, data_2} <= set(volumes)


def test_compose_mounts_prometheus_rules_and_grafana_provisioning_that_exist():
    services = compose_services()
    for name in ("prometheus", "grafana"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"
    grafana_env = services["grafana"]["environment"]
    # The dashboard shows operator figures (raw counts): no anonymous viewers (issue 16, finding 5).
    assert grafana_env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert "GF_AUTH_ANONYMOUS_ORG_ROLE" not in grafana_env
    job = load_yaml(PROMETHEUS)["scrape_configs"][0]
    assert sorted(job["static_configs"][0]["targets"]) == ["worker-1:9466", "worker-2:9466"]
    # The operator listener demands the token; Prometheus reads it from the compose secret.
    token_file = job["authorization"]["credentials_file"]
    assert token_file == "/run/secrets/operator_token"
    assert "operator_token" in services["prometheus"]["secrets"]
    worker_env = compose_env(services["worker-1"])
    assert worker_env["PRIVSTREAM_OPERATOR_TOKEN"].startswith("${PRIVSTREAM_OPERATOR_TOKEN:?")


# --- Grafana ---------------------------------------------------------------------------------


def test_dashboard_has_fixed_uid_schema_version_and_datasource_by_uid():
    dash = dashboard()
    assert dash["uid"] == "privstream-overview" and isinstance(dash["schemaVersion"], int)
    datasources = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yaml")["datasources"]
    uids = {d["uid"] for d in datasources}
    ids = [p["id"] for p in dashboard_panels()]
    assert len(ids) == len(set(ids))
    for panel in dashboard_panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] in uids, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in uids and target["expr"].strip()
    provider = load_yaml(DEPLOY / "grafana/provisioning/dashboards/privstream.yaml")["providers"][0]
    grafana = compose_services()["grafana"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"] if v.startswith(".")}
    assert (DEPLOY / mounted[provider["options"]["path"]] / DASHBOARD.name).is_file()


def test_dashboard_shows_what_operators_need():
    titles = " | ".join(p["title"].lower() for p in dashboard_panels())
    exprs = "\n".join(dashboard_exprs())
    for needle in ("privstream_examples_received_total", "privstream_examples_invalid_total",
                   "privstream_soa_mistakes_total", "privstream_soa_mistake_bound",
                   "privstream_releases_total", "privstream_release_refusals_total",
                   "privstream_privacy_epsilon_spent", "privstream_privacy_epsilon_remaining",
                   "time() - max by (stream) (privstream_last_release_timestamp_seconds",
                   "kafka_consumergroup_lag"):
        assert needle in exprs, needle
    assert re.search(r"histogram_quantile\(0\.99, sum by \(le, learner\) \(rate\("
                     r"privstream_learner_run_seconds_bucket", exprs)
    assert "consumer lag" in titles and "exporter" in titles


@pytest.mark.parametrize("expr", dashboard_exprs())
def test_dashboard_expressions_are_well_formed(expr):
    assert balanced(expr) and metric_names(expr), expr


# --- Prometheus ------------------------------------------------------------------------------


def test_alert_rules_have_expr_for_labels_and_annotations():
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert rule["expr"].strip() and balanced(rule["expr"]) and metric_names(rule["expr"]), rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0s")), rule["alert"]
    # The conditions the service promises to alert on.
    exprs = {r["alert"]: r["expr"] for r in rules}
    assert "privstream_privacy_epsilon_remaining" in exprs["PrivstreamPrivacyBudgetNearlySpent"]
    assert "privstream_privacy_budget_exhausted" in exprs["PrivstreamPrivacyBudgetExhausted"]
    assert "privstream_stream_realizable" in exprs["PrivstreamStreamNotRealizable"]
    assert "privstream_soa_mistake_bound" in exprs["PrivstreamStreamNotRealizable"]
    assert "privstream_dead_letters_published_total" in exprs["PrivstreamDeadLetterRate"]
    assert "privstream_last_release_timestamp_seconds" in exprs["PrivstreamNoReleaseForTooLong"]
    assert "privstream_last_progress_timestamp_seconds" in exprs["PrivstreamWorkerStalled"]
    assert 'up{job="privstream"}' in exprs["PrivstreamWorkerDown"]
    assert load_yaml(PROMETHEUS)["rule_files"] == ["/etc/prometheus/alerts.yml"]


def test_alert_unit_tests_name_existing_alerts():
    """deploy/prometheus/alerts_test.yml (run by promtool below) tests alerts that exist."""
    unit_tests = load_yaml(ALERTS.parent / "alerts_test.yml")
    assert unit_tests["rule_files"] == [ALERTS.name]
    tested = {case["alertname"] for test in unit_tests["tests"] for case in test["alert_rule_test"]}
    assert tested <= {r["alert"] for r in alert_rules()}
    assert {"PrivstreamPrivacyBudgetNearlySpent", "PrivstreamStreamNotRealizable",
            "PrivstreamWorkerStalled", "PrivstreamWorkerDown"} <= tested


def test_promtool_accepts_the_rules_and_every_dashboard_expression(tmp_path):
    """``promtool check rules`` on alerts.yml and on the dashboard's expressions as recording rules,
    and ``promtool test rules`` on the alert unit tests (alerts fire on example series, and only then).

    promtool is optional (Debian's ``prometheus`` package); CI does not install it. Without it this
    test asserts the structural checks above pass for the same files, and says so in its output.
    """
    promtool = shutil.which("promtool")
    if promtool is None:
        print("promtool not found: rules checked structurally only (test_alert_rules_..., "
              "test_dashboard_expressions_are_well_formed, test_alert_unit_tests_name_existing_alerts)")
        assert all(balanced(r["expr"]) and metric_names(r["expr"]) for r in alert_rules())
        assert all(balanced(e) and metric_names(e) for e in dashboard_exprs())
        return
    recording = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": plain_promql(e)}
        for i, e in enumerate(dashboard_exprs())]}]}
    dashboard_rules = tmp_path / "dashboard_rules.yml"
    dashboard_rules.write_text(json.dumps(recording))  # JSON is YAML
    commands = [["check", "rules", str(ALERTS)], ["check", "rules", str(dashboard_rules)],
                ["test", "rules", "alerts_test.yml"]]
    for command in commands:
        result = subprocess.run([promtool, *command], capture_output=True, text=True, timeout=60,
                                cwd=ALERTS.parent)
        assert result.returncode == 0, result.stdout + result.stderr


# --- Kubernetes ------------------------------------------------------------------------------


def k8s_objects(kind: str) -> list[dict]:
    return [d for d in k8s_documents() if d["kind"] == kind]


def test_k8s_manifests_load_and_are_listed_in_the_kustomization():
    kustomization = load_yaml(DEPLOY / "k8s/kustomization.yaml")
    listed = set(kustomization["resources"])
    files = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files
    for doc in k8s_documents():
        if doc["kind"] != "Kustomization":
            assert doc["apiVersion"] and doc["metadata"]["name"], doc


def test_k8s_worker_probes_security_resources_and_single_shared_volume():
    (sts,) = k8s_objects("StatefulSet")
    spec = sts["spec"]
    assert spec["replicas"] == 1  # the SQLite ledger must not be split across pods (see the manifest)
    pod = spec["template"]["spec"]
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probes = (("startupProbe", "/healthz"), ("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"))
    for probe, path in probes:
        http = container[probe]["httpGet"]
        assert http["path"] == path and ports[http["port"]] == 9466, probe  # operator listener
    assert container["livenessProbe"]["failureThreshold"] > container["readinessProbe"]["failureThreshold"]
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    (claim,) = spec["volumeClaimTemplates"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == claim["metadata"]["name"])
    config = next(c for c in k8s_objects("ConfigMap") if c["metadata"]["name"] == "privstream-settings")
    assert config["data"]["PRIVSTREAM_DATA_DIR"] == mount["mountPath"]  # ledger and state default there
    assert "PRIVSTREAM_LEDGER_PATH" not in config["data"] and "PRIVSTREAM_STATE_PATH" not in config["data"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_k8s_password_comes_from_a_secret_not_the_configmap():
    (sts,) = k8s_objects("StatefulSet")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    secret_refs = {e["secretRef"]["name"] for e in container["envFrom"] if "secretRef" in e}
    secrets = {s["metadata"]["name"]: s for s in k8s_objects("Secret")}
    assert any("PRIVSTREAM_KAFKA_SASL_PASSWORD" in secrets[name]["stringData"] for name in secret_refs)
    for config in k8s_objects("ConfigMap"):
        assert not any("PASSWORD" in key for key in config["data"])


def test_k8s_service_and_servicemonitor_scrape_the_operator_listener_with_its_token():
    (service,) = k8s_objects("Service")
    (monitor,) = k8s_objects("ServiceMonitor")
    (sts,) = k8s_objects("StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports[endpoint["port"]] == 9466  # the operator listener, not the public one
    secret = endpoint["authorization"]["credentials"]
    secrets = {s["metadata"]["name"]: s for s in k8s_objects("Secret")}
    assert secret["key"] in secrets[secret["name"]]["stringData"]
    # job="privstream" as the alerts expect.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "privstream"
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
