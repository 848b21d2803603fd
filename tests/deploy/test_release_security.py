"""The deployments' release security: one signing key shared by the workers, and Kafka ACLs under
which only the workers can write the topics subscribers read (compose overlay and Strimzi users)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from privstream.stream_app.settings import Settings

from .deploy_files import COMPOSE, DEPLOY, K8S, k8s_documents, load_yaml, load_yaml_all

ACLS_OVERLAY = DEPLOY / "docker-compose.acls.yml"
WORKERS = ("worker-1", "worker-2", "worker-3")
#: What subscribers read: the releases, and the signed key rotations (the keys topic).
PUBLIC_TOPICS = ("privstream.hypotheses", "privstream.sanitized", "privstream.keys")
WRITES = {"All", "Write", "Create", "Delete", "Alter", "AlterConfigs"}


def merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Compose's merge of a second file: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = (
            merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def stack() -> dict[str, Any]:
    return merged(load_yaml(COMPOSE), load_yaml(ACLS_OVERLAY))


def compose_acls() -> list[tuple[str, set[str], list[tuple[str, str, str]]]]:
    """(principal, operations, [(resource type, name, pattern)]) of every kafka-acls --add line."""
    command = " ".join(stack()["services"]["kafka-acls"]["command"])
    grants = []
    for statement in command.split(";"):
        if not statement.strip().startswith("$$acls"):
            continue
        words = shlex.split(statement.strip().replace("$$acls", "ADD"))
        pattern = "prefix" if "prefixed" in words else "literal"
        principal = words[words.index("--allow-principal") + 1].removeprefix("User:")
        operations = {words[i + 1] for i, w in enumerate(words) if w == "--operation"}
        resources = [
            (w[2:], words[i + 1], pattern) for i, w in enumerate(words) if w in ("--topic", "--group")
        ]
        grants.append((principal, operations, resources))
    return grants


def strimzi_acls() -> list[tuple[str, set[str], list[tuple[str, str, str]]]]:
    grants = []
    for user in load_yaml_all(K8S / "kafka-acls" / "kafka-users.yaml"):
        for acl in user["spec"]["authorization"]["acls"]:
            resource = acl["resource"]
            grants.append(
                (
                    user["metadata"]["name"],
                    set(acl["operations"]),
                    [(resource["type"], resource["name"], resource["patternType"])],
                )
            )
    return grants


def allowed(grants, principal: str, operation: str, topic: str) -> bool:
    """Whether the grants let ``principal`` do ``operation`` on ``topic`` (super users aside)."""
    for who, operations, resources in grants:
        if who != principal or not (operation in operations or "All" in operations):
            continue
        for kind, name, pattern in resources:
            if kind == "topic" and (topic == name if pattern == "literal" else topic.startswith(name)):
                return True
    return False


def test_the_compose_workers_share_one_signing_key_from_a_secret():
    services = load_yaml(COMPOSE)["services"]
    files = {services[w]["environment"]["PRIVSTREAM_SIGNING_KEY_FILE"] for w in WORKERS}
    assert files == {"/run/secrets/signing_key"}
    assert all("signing_key" in services[w]["secrets"] for w in WORKERS)
    assert load_yaml(COMPOSE)["secrets"]["signing_key"] == {"environment": "PRIVSTREAM_SIGNING_KEY"}


def test_the_acl_overlay_authenticates_every_listener_and_denies_what_no_acl_allows():
    broker = stack()["services"]["broker"]["environment"]
    listeners = dict(item.split(":") for item in broker["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners.values()) == {"SASL_PLAINTEXT"}
    names = {item.split("://")[0] for item in broker["KAFKA_LISTENERS"].split(",")}
    assert names == set(listeners) and all(
        f"KAFKA_LISTENER_NAME_{n}_PLAIN_SASL_JAAS_CONFIG" in broker for n in names
    )
    assert broker["KAFKA_AUTHORIZER_CLASS_NAME"].endswith("StandardAuthorizer")
    assert (
        broker["KAFKA_SUPER_USERS"] == "User:admin"
        and broker["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    )
    jaas = broker["KAFKA_LISTENER_NAME_BROKER_PLAIN_SASL_JAAS_CONFIG"]
    assert all(f"user_{u}=" in jaas for u in ("admin", "privstream", "producer", "subscriber"))


@pytest.mark.parametrize("grants", [compose_acls, strimzi_acls], ids=["compose", "strimzi"])
def test_only_the_workers_can_write_the_public_topics_and_subscribers_only_read_them(grants):
    acls = grants()
    worker = "privstream"
    subscriber = next(who for who, _, _ in acls if "subscriber" in who)
    producer = next(who for who, _, _ in acls if "producer" in who)
    for topic in PUBLIC_TOPICS:
        assert allowed(acls, worker, "Write", topic)
        assert allowed(acls, subscriber, "Read", topic) and allowed(acls, subscriber, "Describe", topic)
        for other in {who for who, _, _ in acls} - {worker}:
            assert not any(allowed(acls, other, op, topic) for op in WRITES), (other, topic)
    assert allowed(acls, producer, "Write", "privstream.examples")
    assert not allowed(acls, producer, "Read", "privstream.examples")
    assert not allowed(acls, subscriber, "Read", "privstream.examples")  # raw examples stay private
    assert not allowed(acls, subscriber, "Read", "privstream.predictions")
    for topic in ("privstream.examples", "privstream.predictions", "privstream.examples.dlq"):
        assert allowed(acls, worker, "Read", topic) and allowed(acls, worker, "Write", topic)


def test_the_acl_overlay_gives_the_clients_logins_that_settings_accept(monkeypatch):
    services = stack()["services"]
    for name, user in [(w, "privstream") for w in WORKERS] + [("producer", "producer")]:
        env = services[name]["environment"]
        assert (
            env["PRIVSTREAM_KAFKA_SASL_USERNAME"] == user and env["PRIVSTREAM_TOPIC_PREFIX"] == "privstream."
        )
        assert services[name]["depends_on"]["kafka-acls"]["condition"] == "service_completed_successfully"
        for key in [k for k in os.environ if k.startswith("PRIVSTREAM_")]:
            monkeypatch.delenv(key)
        for key, value in env.items():
            if key.startswith("PRIVSTREAM_"):
                monkeypatch.setenv(key, str(value))
        settings = Settings(_env_file=None)
        assert (
            settings.kafka_security_protocol == "SASL_PLAINTEXT" and settings.kafka_sasl_mechanism == "PLAIN"
        )
        assert settings.topic("hypotheses") == "privstream.hypotheses"


def test_the_k8s_workers_read_the_signing_key_from_a_mounted_secret_and_use_the_acl_prefix():
    docs = k8s_documents()
    (config,) = [d for d in docs if d.get("kind") == "ConfigMap"]
    key_file = Path(config["data"]["PRIVSTREAM_SIGNING_KEY_FILE"])
    assert config["data"]["PRIVSTREAM_TOPIC_PREFIX"] == "privstream."
    (deployment,) = [d for d in docs if d.get("kind") == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    (name,) = [n for n, path in mounts.items() if path == str(key_file.parent)]
    secret = volumes[name]["secret"]["secretName"]
    (stored,) = [d for d in docs if d.get("kind") == "Secret" and d["metadata"]["name"] == secret]
    assert key_file.name in stored["stringData"]
