"""Signed releases: the worker signs every release it publishes; subscribers verify before trusting.

Anyone who can write to the public ``hypotheses`` or ``sanitized`` topic could otherwise put a
release of their own there (a constant hypothesis, a certificate with any ε). Each release the
worker publishes therefore carries an **Ed25519 signature over the exact bytes of the release**
(the bytes stored in the privacy ledger), in two Kafka record headers:

* ``privstream-key-id``: which key signed it (:func:`key_id`: the first 16 hex digits of the
  SHA-256 of the raw public key);
* ``privstream-signature``: the 64-byte signature, base64.

The public listener serves the same pair as HTTP headers on ``/streams/{id}/releases/latest``
and the worker's public keys as a key set on ``/keys``. Ed25519 signatures are deterministic: a
release re-published from the ledger's outbox after a crash carries the same signature as the
first time (under the same key).

**Keys.** The worker signs with one private key (a :class:`Signer`); the public keys of a
deployment are a :class:`KeySet`, the JSON document ``{"keys": [...]}`` that the public listener
serves on ``/keys`` (the key statement of the release specification).

**Rotation.** A key set lists public keys with an optional ``not_after`` (ISO 8601): a retired
key still verifies the releases it signed before that time, and nothing later. The time checked
is the Kafka record's timestamp, which the producer sets: ``not_after`` catches a forgotten
worker still signing with a retired key, not a thief holding it. A deployment replaces its key
with a :class:`RotationStatement`: the new key, signed by the key it replaces (and countersigned
by the new one, which proves it is held). The key set ``/keys`` serves lists them under
``rotations``; a subscriber that pinned the old key follows them with :meth:`KeySet.following`
and so trusts the new key without trusting the network path to the listener: a statement that
does not verify under a key it already trusts adds nothing.

>>> signer = Signer.generate()
>>> keys = KeySet([signer.public_entry()])
>>> release = b'{"stream_id": "s"}'
>>> key, signature = signer.sign(release)
>>> keys.problem(release, key, signature) is None
True
>>> keys.problem(release + b" ", key, signature)
'bad_signature'
>>> KeySet.from_json(keys.to_json()).key_ids == [signer.key_id]
True
>>> new = Signer.generate()
>>> rotation = RotationStatement.sign(signer, new, "ledger-1", datetime(2026, 12, 1, tzinfo=UTC))
>>> followed = keys.following([rotation])
>>> followed.problem(release, *new.sign(release)) is None, len(keys.following([]))
(True, 1)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

#: The Kafka record headers (and, capitalised alike, HTTP response headers) of a signed release.
KEY_ID_HEADER = "privstream-key-id"
SIGNATURE_HEADER = "privstream-signature"
ALGORITHM = "Ed25519"

#: Why :meth:`KeySet.problem` refuses a record (subscribers count skipped records by these).
VERIFY_PROBLEMS = ("unsigned", "unknown_key", "retired_key", "bad_signature")
#: Why :meth:`RotationStatement.problem` refuses a rotation statement.
ROTATION_PROBLEMS = ("unknown_key", "retired_key", "bad_signature", "bad_countersignature", "wrong_type")
#: The ``type`` of a rotation statement's signed bytes.
ROTATION_TYPE = "privstream-key-rotation/1"
#: The ``type`` of a deployment statement (``/keys``'s ``deployment``).
DEPLOYMENT_TYPE = "privstream-deployment/1"


class SigningKeyError(ValueError):
    """A signing or public key that cannot be read (a ValueError: the CLI prints one line, exit 2)."""


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's id: 16 hex digits of the SHA-256 of its 32 raw bytes (short, and fixed by the key).

    >>> key_id(Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key())
    '139e3940e64b5491'
    """
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class PublicKeyEntry:
    """One public key of a key set: its id, the key, and when it was retired (None: current)."""

    key_id: str
    public_key: Ed25519PublicKey
    not_after: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        raw = self.public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {
            "key_id": self.key_id,
            "algorithm": ALGORITHM,
            "public_key": base64.b64encode(raw).decode(),
            "not_after": None if self.not_after is None else self.not_after.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PublicKeyEntry:
        """Read one entry; the id is recomputed from the key and must match the one given."""
        if not isinstance(data, Mapping):
            raise SigningKeyError(f"a key set entry must be an object, got {data!r}")
        if data.get("algorithm", ALGORITHM) != ALGORITHM:
            raise SigningKeyError(f"unsupported key algorithm {data.get('algorithm')!r} (only {ALGORITHM})")
        public_key = public_key_from_text(str(data.get("public_key", "")))
        given, actual = data.get("key_id"), key_id(public_key)
        if given is not None and given != actual:
            raise SigningKeyError(f"key id {given!r} does not match its public key (whose id is {actual!r})")
        not_after = data.get("not_after")
        return cls(actual, public_key, None if not_after is None else _utc(str(not_after)))


def _utc(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SigningKeyError(f"not_after must be an ISO 8601 time, got {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def public_key_from_text(text: str) -> Ed25519PublicKey:
    """A public key from PEM (``openssl pkey -pubout``) or base64 of its 32 raw bytes."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise SigningKeyError(f"not an {ALGORITHM} public key: {type(key).__name__}")
            return key
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except SigningKeyError:
        raise
    except (ValueError, binascii.Error) as exc:
        raise SigningKeyError(f"not an {ALGORITHM} public key (PEM, or base64 of 32 bytes): {exc}") from None


class KeySet:
    """The public keys a subscriber trusts (or a worker publishes), by key id."""

    def __init__(self, entries: Iterable[PublicKeyEntry] = ()):
        self._entries: dict[str, PublicKeyEntry] = {}
        for entry in entries:
            self._entries.setdefault(entry.key_id, entry)  # the first listing of a key wins

    @property
    def key_ids(self) -> list[str]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def merged(self, other: KeySet) -> KeySet:
        return KeySet([*self._entries.values(), *other._entries.values()])

    def to_dict(self) -> dict[str, Any]:
        return {"keys": [entry.to_dict() for entry in self._entries.values()]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes) -> KeySet:
        """A key set document (``{"keys": [...]}``, as ``/keys`` serves it; its ``rotations``
        are :func:`rotation_statements`')."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SigningKeyError(f"a key set must be JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise SigningKeyError('a key set is a JSON object {"keys": [...]}')
        return cls(PublicKeyEntry.from_dict(entry) for entry in data["keys"])

    @classmethod
    def from_text(cls, text: str) -> KeySet:
        """A key set document, or one or more PEM public keys, or one base64 raw key per line."""
        stripped = text.strip()
        if stripped.startswith("{"):
            return cls.from_json(stripped)
        if "-----BEGIN" in stripped:
            blocks = [b for b in stripped.split("-----END PUBLIC KEY-----") if b.strip()]
            keys = [public_key_from_text(b + "-----END PUBLIC KEY-----") for b in blocks]
        else:
            keys = [public_key_from_text(line) for line in stripped.splitlines() if line.strip()]
        return cls(PublicKeyEntry(key_id(k), k) for k in keys)

    @classmethod
    def from_file(cls, path: Path | str) -> KeySet:
        """A key set (or PEM public keys) from a file."""
        try:
            return cls.from_text(Path(path).read_text())
        except OSError as exc:
            raise SigningKeyError(f"cannot read the key set {path}: {exc.strerror or exc}") from None

    def entry(self, key_id: str) -> PublicKeyEntry | None:
        """The key with this id, if the set has it."""
        return self._entries.get(key_id)

    def following(self, statements: Iterable[RotationStatement]) -> KeySet:
        """This (pinned) key set, with every key a chain of valid rotation statements leads to
        from it: a statement whose old key the set trusts (current at the statement's time) and
        whose signature and countersignature verify adds its new key and retires the old one at
        that time. Statements that do not verify add nothing (forged, or from another chain)."""
        keys = dict(self._entries)
        pending = list(statements)
        followed = True
        while followed:  # a chain may be listed in any order
            followed = False
            for statement in list(pending):
                if statement.problem(KeySet(keys.values())) is not None:
                    continue
                old = keys[statement.old_key_id]
                retired = statement.at if old.not_after is None else min(old.not_after, statement.at)
                keys[old.key_id] = replace(old, not_after=retired)
                keys.setdefault(statement.new_key.key_id, statement.new_key)
                pending.remove(statement)
                followed = True
        return KeySet(keys.values())

    def problem(
        self,
        data: bytes,
        key: bytes | str | None,
        signature: bytes | str | None,
        timestamp_ms: int | None = None,
    ) -> str | None:
        """None if ``signature`` (base64) by key ``key`` verifies ``data``, else why not (one of
        :data:`VERIFY_PROBLEMS`). ``timestamp_ms`` (the Kafka record's) is checked against a
        retired key's ``not_after``."""
        if not key or not signature:
            return "unsigned"
        entry = self._entries.get(key.decode(errors="replace") if isinstance(key, bytes) else key)
        if entry is None:
            return "unknown_key"
        if (
            entry.not_after is not None
            and timestamp_ms is not None
            and datetime.fromtimestamp(timestamp_ms / 1000, UTC) > entry.not_after
        ):
            return "retired_key"
        try:
            entry.public_key.verify(base64.b64decode(signature, validate=True), data)
        except (InvalidSignature, ValueError, binascii.Error):
            return "bad_signature"
        return None

    def header_problem(
        self, data: bytes, headers: Sequence[tuple[str, bytes]] | None, timestamp_ms: int | None = None
    ) -> str | None:
        """:meth:`problem` for a Kafka record's ``headers``."""
        found = dict(headers or ())
        return self.problem(data, found.get(KEY_ID_HEADER), found.get(SIGNATURE_HEADER), timestamp_ms)


class Signer:
    """The worker's private key: signs release bytes."""

    def __init__(self, private_key: Ed25519PrivateKey):
        self._private_key = private_key
        self.public_key = private_key.public_key()
        self.key_id = key_id(self.public_key)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, pem: bytes, where: str = "the signing key") -> Signer:
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(f"{where} is not an unencrypted PEM private key: {exc}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"{where} is not an {ALGORITHM} key but {type(key).__name__}")
        return cls(key)

    def private_pem(self) -> bytes:
        return self._private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def sign(self, data: bytes) -> tuple[str, str]:
        """``(key id, base64 signature)`` of ``data``."""
        return self.key_id, base64.b64encode(self._private_key.sign(data)).decode()

    def headers(self, data: bytes) -> list[tuple[str, bytes]]:
        """The Kafka record headers that sign ``data``."""
        key, signature = self.sign(data)
        return [(KEY_ID_HEADER, key.encode()), (SIGNATURE_HEADER, signature.encode())]

    def public_entry(self) -> PublicKeyEntry:
        return PublicKeyEntry(self.key_id, self.public_key)

    def __repr__(self) -> str:  # never the private key
        return f"Signer(key_id={self.key_id!r})"


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class RotationStatement:
    """A deployment's key replaced: the new key (``new_key``), at ``at``, signed by the old key
    (``signature``) and by the new one (``countersignature``), both over :meth:`signed_bytes`."""

    ledger_id: str
    old_key_id: str
    new_key: PublicKeyEntry
    at: datetime
    signature: str
    countersignature: str

    @staticmethod
    def bytes_for(ledger_id: str, old_key_id: str, new_key: PublicKeyEntry, at: datetime) -> bytes:
        """What both keys sign: canonical JSON (sorted keys, no spaces) of the statement's fields."""
        return _canonical(
            {
                "type": ROTATION_TYPE,
                "ledger_id": ledger_id,
                "old_key_id": old_key_id,
                "new_key_id": new_key.key_id,
                "new_public_key": new_key.to_dict()["public_key"],
                "at": at.isoformat(),
            }
        )

    def signed_bytes(self) -> bytes:
        return self.bytes_for(self.ledger_id, self.old_key_id, self.new_key, self.at)

    @classmethod
    def sign(cls, old: Signer, new: Signer, ledger_id: str, at: datetime) -> RotationStatement:
        """The statement by which ``old`` hands the deployment over to ``new``."""
        entry = new.public_entry()
        data = cls.bytes_for(ledger_id, old.key_id, entry, at)
        return cls(ledger_id, old.key_id, entry, at, old.sign(data)[1], new.sign(data)[1])

    def problem(self, trusted: KeySet) -> str | None:
        """None if a subscriber trusting ``trusted`` may follow this statement, else why not (one
        of :data:`ROTATION_PROBLEMS`)."""
        old = trusted.entry(self.old_key_id)
        if old is None:
            return "unknown_key"
        if old.not_after is not None and self.at > old.not_after:
            return "retired_key"
        data = self.signed_bytes()
        if KeySet([old]).problem(data, old.key_id, self.signature) is not None:
            return "bad_signature"
        if KeySet([self.new_key]).problem(data, self.new_key.key_id, self.countersignature) is not None:
            return "bad_countersignature"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": ROTATION_TYPE,
            "ledger_id": self.ledger_id,
            "old_key_id": self.old_key_id,
            "new_key": {**self.new_key.to_dict(), "not_after": None},
            "at": self.at.isoformat(),
            "signature": self.signature,
            "countersignature": self.countersignature,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RotationStatement:
        if not isinstance(data, Mapping):
            raise SigningKeyError(f"a rotation statement must be an object, got {data!r}")
        if data.get("type") != ROTATION_TYPE:
            raise SigningKeyError(
                f"not a rotation statement: type {data.get('type')!r} (expected {ROTATION_TYPE})"
            )
        try:
            new_key = PublicKeyEntry.from_dict(data["new_key"])
            return cls(
                str(data["ledger_id"]),
                str(data["old_key_id"]),
                replace(new_key, not_after=None),
                _utc(str(data["at"])),
                str(data["signature"]),
                str(data["countersignature"]),
            )
        except KeyError as exc:
            raise SigningKeyError(f"a rotation statement lacks {exc.args[0]!r}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> RotationStatement:
        try:
            return cls.from_dict(json.loads(text))
        except ValueError as exc:
            if isinstance(exc, SigningKeyError):
                raise
            raise SigningKeyError(f"a rotation statement must be JSON: {exc}") from None


def rotation_statements(text: str | bytes, *, strict: bool = True) -> list[RotationStatement]:
    """The rotation statements of a key set document (``rotations``; none if it has none); not
    ``strict``, a statement that cannot be read is left out (it could only be refused)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SigningKeyError(f"a key set must be JSON: {exc}") from None
    found = data.get("rotations", []) if isinstance(data, dict) else []
    if not isinstance(found, list):
        raise SigningKeyError('a key set\'s "rotations" must be a list')
    statements = []
    for statement in found:
        try:
            statements.append(RotationStatement.from_dict(statement))
        except SigningKeyError:
            if strict:
                raise
    return statements


@dataclass(frozen=True)
class DeploymentStatement:
    """The deployment's ledger id, signed by one of its keys (``/keys`` states it as
    ``deployment``): a subscriber that was given no ledger id takes it from a statement that
    verifies under the keys it trusts, instead of from the first release it reads.

    >>> signer = Signer.generate()
    >>> statement = DeploymentStatement.sign(signer, "5f0c3e9a7b2d4e61")
    >>> statement.problem(KeySet([signer.public_entry()])), statement.problem(KeySet())
    (None, 'unknown_key')
    >>> DeploymentStatement.from_dict(statement.to_dict()) == statement
    True
    """

    ledger_id: str
    key_id: str
    signature: str

    @staticmethod
    def bytes_for(ledger_id: str, key_id: str) -> bytes:
        """What the key signs: canonical JSON (sorted keys, no spaces) of the statement's fields."""
        return _canonical({"type": DEPLOYMENT_TYPE, "ledger_id": ledger_id, "key_id": key_id})

    @classmethod
    def sign(cls, signer: Signer, ledger_id: str) -> DeploymentStatement:
        key, signature = signer.sign(cls.bytes_for(ledger_id, signer.key_id))
        return cls(ledger_id, key, signature)

    def problem(self, trusted: KeySet) -> str | None:
        """None if a key of ``trusted`` signed this statement, else why not (:data:`VERIFY_PROBLEMS`)."""
        return trusted.problem(self.bytes_for(self.ledger_id, self.key_id), self.key_id, self.signature)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": DEPLOYMENT_TYPE,
            "ledger_id": self.ledger_id,
            "key_id": self.key_id,
            "signature": self.signature,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeploymentStatement:
        if not isinstance(data, Mapping) or data.get("type") != DEPLOYMENT_TYPE:
            raise SigningKeyError(f"not a deployment statement (type {DEPLOYMENT_TYPE} expected)")
        try:
            return cls(str(data["ledger_id"]), str(data["key_id"]), str(data["signature"]))
        except KeyError as exc:
            raise SigningKeyError(f"a deployment statement lacks {exc.args[0]!r}") from None


def deployment_ledger_id(text: str | bytes, trusted: KeySet) -> str | None:
    """The ledger id a key set document's deployment statement states, if a key of ``trusted``
    signed it (None: no statement, or one that does not verify, which decides nothing)."""
    try:
        data = json.loads(text)
        statement = DeploymentStatement.from_dict(data["deployment"])
    except (ValueError, KeyError, TypeError):
        return None
    return statement.ledger_id if statement.problem(trusted) is None else None
