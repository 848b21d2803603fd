"""Release signing keys: loading, ids, key sets with retired keys, verification of Kafka headers."""

from __future__ import annotations

import base64
import json
import stat
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from privstream.stream_app.signing import (
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    KeySet,
    PublicKeyEntry,
    Signer,
    SigningKeyError,
    load_signer,
)


def test_the_default_key_is_created_once_private_and_reused(tmp_path) -> None:
    path = tmp_path / "data" / "signing_key.pem"
    with pytest.raises(SigningKeyError, match="does not exist"):
        load_signer(None, None, path)  # created only when asked (with a new ledger)
    first = load_signer(None, None, path, create=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_signer(None, None, path, create=True).key_id == first.key_id  # the same key next start
    path.chmod(0o644)  # loosened by a copy or a restore: tightened again on load
    assert load_signer(None, None, path).key_id == first.key_id
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_signer(path.read_text(), None, tmp_path / "unused.pem")  # the same PEM as a setting
    assert again.key_id == first.key_id and not (tmp_path / "unused.pem").exists()
    assert load_signer(None, path, tmp_path / "unused.pem").key_id == first.key_id
    assert "PRIVATE" not in repr(first) and first.key_id in repr(first)


def test_signatures_are_deterministic_so_a_republication_carries_the_same_one() -> None:
    signer = Signer.generate()
    assert signer.headers(b"release") == signer.headers(b"release")
    assert dict(signer.headers(b"release"))[KEY_ID_HEADER] == signer.key_id.encode()


@pytest.mark.parametrize(
    "text, match",
    [
        ("not a key", "not an unencrypted PEM private key"),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "not an unencrypted PEM"),
    ],
)
def test_an_unreadable_signing_key_is_one_clear_error(tmp_path, text: str, match: str) -> None:
    with pytest.raises(SigningKeyError, match=match):
        load_signer(text, None, tmp_path / "x.pem")
    with pytest.raises(SigningKeyError, match="cannot read signing_key_file"):
        load_signer(None, tmp_path / "missing.pem", tmp_path / "x.pem")


def test_a_key_set_reads_json_pem_and_base64_and_checks_key_ids() -> None:
    signer = Signer.generate()
    pem = signer.public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    raw = signer.public_entry().to_dict()["public_key"]
    for text in (KeySet([signer.public_entry()]).to_json(), pem, pem + pem, raw):
        assert KeySet.from_text(text).key_ids == [signer.key_id]
    wrong = {"keys": [{**signer.public_entry().to_dict(), "key_id": "0" * 16}]}
    with pytest.raises(SigningKeyError, match="does not match its public key"):
        KeySet.from_json(json.dumps(wrong))
    with pytest.raises(SigningKeyError):
        KeySet.from_text(base64.b64encode(b"short").decode())


def test_a_retired_key_verifies_what_it_signed_before_its_end_and_nothing_after() -> None:
    old, new = Signer.generate(), Signer.generate()
    retired_at = datetime(2026, 3, 1, tzinfo=UTC)
    keys = KeySet([PublicKeyEntry(old.key_id, old.public_key, retired_at), new.public_entry()])
    keys = KeySet.from_json(keys.to_json())  # as a subscriber reads it from /keys
    before = int(datetime(2026, 2, 1, tzinfo=UTC).timestamp() * 1000)
    after = int(datetime(2026, 4, 1, tzinfo=UTC).timestamp() * 1000)
    data = b"release bytes"
    assert keys.header_problem(data, old.headers(data), before) is None
    assert keys.header_problem(data, old.headers(data), after) == "retired_key"
    assert keys.header_problem(data, new.headers(data), after) is None
    assert keys.header_problem(data, [], after) == "unsigned"
    assert keys.header_problem(data, Signer.generate().headers(data)) == "unknown_key"
    forged = [(KEY_ID_HEADER, new.key_id.encode()), (SIGNATURE_HEADER, b"!!not base64")]
    assert keys.header_problem(data, forged) == "bad_signature"


def test_the_key_set_shown_in_the_security_guide_is_a_valid_key_set() -> None:
    import re
    from pathlib import Path

    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "security.md"
    (example,) = re.findall(r"```json\n(.*?)```", guide.read_text(), re.S)
    keys = KeySet.from_json(example)  # the ids match their keys, or this raises
    assert len(keys) == 2 and keys.to_dict()["keys"][1]["not_after"].startswith("2026-03-01")
