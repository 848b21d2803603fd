"""The PRIVSTREAM_* settings that compose and the Kubernetes manifests pass are settings the
service reads, with values it accepts.

Each environment is loaded into :class:`privstream.stream_app.settings.Settings` exactly as a
worker would (only those variables in the environment), and every variable must map to a field:
pydantic-settings silently ignores an unknown ``PRIVSTREAM_*`` name, so a typo would otherwise
deploy a default.
"""

from __future__ import annotations

import pytest

from privstream.stream_app.settings import ENV_PREFIX, FAUST_ENV_PREFIX, Settings

from .deploy_files import COMPOSE, compose_env, k8s_documents, load_yaml


def load_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """Settings from exactly ``env`` (every other PRIVSTREAM_* variable removed)."""
    import os

    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)


def field_names(env: dict[str, str]) -> set[str]:
    """The Settings fields the PRIVSTREAM_* variables name; fails on a name that is none."""
    fields = set()
    for name in env:
        if not name.startswith(ENV_PREFIX) or name.startswith(FAUST_ENV_PREFIX):
            continue  # not ours, or faust's documented escape hatch
        field = name.removeprefix(ENV_PREFIX).lower()
        assert field in Settings.model_fields, f"{name} is not a privstream setting"
        fields.add(field)
    return fields


def privstream_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}


@pytest.mark.parametrize("service", ["worker-1", "worker-2", "worker-3", "producer"])
def test_compose_settings_are_read_by_the_service(monkeypatch, service):
    env = privstream_env(compose_env(load_yaml(COMPOSE)["services"][service]))
    fields = field_names(env)
    settings = load_settings(monkeypatch, env)
    assert fields <= settings.model_fields_set  # every variable was read
    assert settings.kafka_bootstrap == "broker:19092"
    if service.startswith("worker"):
        assert settings.public_host == "0.0.0.0" and settings.ledger_create_if_missing
        assert settings.operator_host == "0.0.0.0" and settings.operator_token is not None
        (stream,) = settings.streams
        assert stream.release is not None and stream.release.epsilon_budget >= stream.release.lifetime_cost[0]
        assert stream.release.top_level == 4  # a release tree: releases per level on the dashboard
        assert settings.store_backend == "postgresql" and settings.store_password_file is not None


def k8s_worker_env() -> dict[str, str]:
    """The worker container's environment: its ConfigMap and Secret (envFrom) plus its env list."""
    docs = k8s_documents()
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            (cm,) = [
                d
                for d in docs
                if d["kind"] == "ConfigMap" and d["metadata"]["name"] == source["configMapRef"]["name"]
            ]
            env.update(cm["data"])
        if "secretRef" in source:
            (secret,) = [
                d
                for d in docs
                if d["kind"] == "Secret" and d["metadata"]["name"] == source["secretRef"]["name"]
            ]
            env.update(secret["stringData"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    for e in container.get("env", []):
        if ref := e.get("valueFrom", {}).get("secretKeyRef"):
            (secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]]
            env[e["name"]] = secret["stringData"][ref["key"]]
    return env


def test_k8s_settings_are_read_by_the_service(monkeypatch):
    env = privstream_env(k8s_worker_env())
    fields = field_names(env)
    settings = load_settings(monkeypatch, env)
    assert fields <= settings.model_fields_set
    # SASL/SCRAM over TLS, the password from the Secret, the CA bundle mounted from a Secret.
    assert settings.kafka_security_protocol == "SASL_SSL"
    assert settings.kafka_sasl_mechanism.startswith("SCRAM-")
    assert settings.kafka_sasl_password is not None
    assert settings.topic_replication_factor == 3
    assert not settings.ledger_create_if_missing  # production: a missing ledger is an error
    assert settings.operator_token is not None  # the operator listener is reachable in the cluster
    # The shared store: PostgreSQL, its URL and password from a Secret, TLS verified against a CA.
    assert settings.store_backend == "postgresql" and settings.store_password is not None
    assert settings.store_sslmode == "verify-full"
    (deployment,) = [d for d in k8s_documents() if d["kind"] == "Deployment"]
    mounts = {m["mountPath"] for m in deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert str(settings.kafka_ssl_cafile.parent) in mounts
    assert str(settings.store_sslrootcert.parent) in mounts
    assert str(settings.data_dir) in mounts


def test_a_misspelt_setting_is_caught():
    with pytest.raises(AssertionError, match="PRIVSTREAM_KAFKA_BOOTSTRAPS is not a privstream setting"):
        field_names({"PRIVSTREAM_KAFKA_BOOTSTRAPS": "x:1"})
