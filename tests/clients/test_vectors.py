"""The release specification's test vectors (clients/spec/vectors/) verify as they say.

Each case is a release's bytes, a key id, a signature and a record time; the client's verifier
must accept exactly the cases whose ``problem`` is null and refuse the others for that reason, and
the releases that verify must decode and predict as listed. The committed files are what the
generator writes from the service's own release models (Ed25519 is deterministic), so they stay
the wire format the worker publishes.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from privstream_client import KeySet, Release

from privstream.schemas import HypothesisRelease

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "clients" / "spec"
VECTORS = SPEC / "vectors"
STATEMENT = json.loads((VECTORS / "vectors.json").read_text())
CASES = STATEMENT["cases"]


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_vectors", SPEC / "generate_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_vectors_are_what_the_generator_writes() -> None:
    written = generator().vectors()
    assert sorted(written) == sorted(p.name for p in VECTORS.iterdir())
    for name, data in written.items():
        assert (VECTORS / name).read_bytes() == data, f"{name} differs: run clients/spec/generate_vectors.py"


def test_there_are_verifying_and_refused_cases_of_every_reason() -> None:
    problems = [case["problem"] for case in CASES]
    assert problems.count(None) >= 3
    assert {"bad_signature", "unknown_key", "retired_key"} <= set(problems)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_case_verifies_or_is_refused_as_stated(case: dict[str, Any]) -> None:
    keys = KeySet.from_file(VECTORS / STATEMENT["keys"])
    data = (VECTORS / case["release"]).read_bytes()
    assert keys.problem(data, case["key_id"], case["signature"], case["timestamp_ms"]) == case["problem"]
    if case["problem"] is None:
        release = Release.from_json(data)
        for point, label in case["predictions"]:
            assert release.predict(point) == label
        points = [p for p, _ in case["predictions"]]
        assert release.predict(np.asarray(points)).tolist() == [y for _, y in case["predictions"]]


@pytest.mark.parametrize("name", sorted(p.name for p in VECTORS.glob("*.release.json")))
def test_every_vector_release_follows_the_json_schema_and_the_service_reads_it(name: str) -> None:
    data = (VECTORS / name).read_bytes()
    schema = json.loads(
        resources.files("privstream.schemas").joinpath("json/hypothesis_release.schema.json").read_text()
    )
    jsonschema.validate(json.loads(data), schema)
    assert HypothesisRelease.model_validate_json(data).model_dump_json().encode() == data  # canonical bytes


def test_a_key_id_is_the_first_16_hex_digits_of_the_sha256_of_the_raw_key() -> None:
    for entry in json.loads((VECTORS / "keys.json").read_text())["keys"]:
        raw = base64.b64decode(entry["public_key"])
        assert len(raw) == 32 and entry["key_id"] == hashlib.sha256(raw).hexdigest()[:16]
        assert entry["algorithm"] == "Ed25519"


def test_a_verifier_that_skipped_any_check_would_fail_a_vector() -> None:
    """The vectors catch broken verifiers: each check removed accepts a refused case."""
    keys = KeySet.from_file(VECTORS / STATEMENT["keys"])
    by_name = {c["name"]: c for c in CASES}

    def accepted(case: dict[str, Any], *, check_signature: bool, check_time: bool) -> bool:
        data = (VECTORS / case["release"]).read_bytes()
        problem = keys.problem(
            data, case["key_id"], case["signature"], case["timestamp_ms"] if check_time else None
        )
        return problem is None or (not check_signature and problem == "bad_signature")

    assert accepted(by_name["forged"], check_signature=False, check_time=True)
    assert not accepted(by_name["forged"], check_signature=True, check_time=True)
    assert accepted(by_name["retired-key"], check_signature=True, check_time=False)
    assert not accepted(by_name["retired-key"], check_signature=True, check_time=True)


def test_the_specification_documents_every_release_and_certificate_field() -> None:
    page = (ROOT / "docs" / "reference" / "release-specification.md").read_text()
    schema = json.loads(
        resources.files("privstream.schemas").joinpath("json/hypothesis_release.schema.json").read_text()
    )
    fields = [*schema["properties"], *schema["$defs"]["Certificate"]["properties"]]
    for nested in ("WindowInfo", "LifetimeBound", "Publication"):
        fields += list(schema["$defs"][nested]["properties"])
    missing = [f for f in fields if f"`{f}`" not in page]
    assert not missing, f"the release specification does not mention {missing}"
    for name in ("vectors.json", "keys.json", *(p.name for p in VECTORS.glob("*.release.json"))):
        assert f"`{name}`" in page


ROTATIONS = json.loads((VECTORS / "rotations.json").read_text())


@pytest.mark.parametrize("case", ROTATIONS["cases"], ids=[c["name"] for c in ROTATIONS["cases"]])
def test_each_rotation_statement_is_followed_or_refused_as_stated(case: dict[str, Any]) -> None:
    from privstream_client.signing import RotationStatement

    pinned = KeySet.from_json(json.dumps(ROTATIONS["pinned"]))
    statement = RotationStatement.from_dict(case["statement"])
    assert statement.problem(pinned) == case["problem"]
    assert pinned.following([statement]).key_ids == case["follows_to"]


def test_the_key_statement_s_rotations_lead_a_pinned_subscriber_to_its_keys() -> None:
    from privstream_client.signing import rotation_statements

    pinned = KeySet.from_json(json.dumps(ROTATIONS["pinned"]))
    document = (VECTORS / "keys.json").read_text()
    followed = pinned.following(rotation_statements(document))
    assert sorted(followed.key_ids) == sorted(KeySet.from_json(document).key_ids)
    assert {"unknown_key", "bad_signature", "bad_countersignature"} <= {
        c["problem"] for c in ROTATIONS["cases"]
    }
