"""The worker's release signing key; the signature and key-set formats are the client's.

Every release the worker publishes carries an Ed25519 signature over its exact bytes in the
Kafka record headers ``privstream-key-id`` and ``privstream-signature``
(:mod:`privstream_client.signing`, re-exported here: the worker signs and every subscriber
verifies with the same code).

**One key per deployment.** The privacy ledger records the deployment's signing key
(:meth:`~privstream.stream_app.store.ledger_governance.LedgerGovernance.signing_keys`): the key of
the first worker that starts on a new ledger. Every worker signs with that key
(:func:`worker_signer`) or refuses to start, in one line naming its key and the ledger's. A new
key is made only by ``privstream keys rotate`` (:mod:`.key_rotation`): the old key signs a
rotation statement for it, which the ledger records and ``/keys`` serves. The
key comes from the ``signing_key`` setting (PEM), the file ``signing_key_file`` (PEM, e.g. a
mounted secret; ``openssl genpkey -algorithm ed25519``), or, when neither is set,
``data_dir/signing_key.pem``, which is created only together with a new ledger: a missing key
file for a ledger that has signed before is refused, never replaced by a new key. A key file is
set to mode 0600 whenever it is loaded.

``published_keys_file`` lists further public keys the deployment vouches for (keys of the
deployment from before the ledger recorded them): they are served on ``/keys`` and verify the
public log, but no worker signs with them.

>>> signer = Signer.generate()
>>> KeySet([signer.public_entry()]).problem(b"release", *signer.sign(b"release")) is None
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from privstream_client.signing import (
    ALGORITHM,
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    VERIFY_PROBLEMS,
    KeySet,
    PublicKeyEntry,
    Signer,
    SigningKeyError,
    key_id,
    public_key_from_text,
)

from privstream.agents.interfaces import LeaseLostError

if TYPE_CHECKING:
    from privstream.agents.ledger_port import LedgerIdentity
    from privstream.stream_app.settings import Settings
    from privstream.stream_app.store.ledger_governance import RecordedKey

__all__ = [
    "ALGORITHM",
    "DEFAULT_KEY_FILE",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "VERIFY_PROBLEMS",
    "KeyLedger",
    "KeyRotatedError",
    "KeySet",
    "KeyWatch",
    "PublicKeyEntry",
    "Signer",
    "SigningKeyError",
    "deployment_keys",
    "existing_signer",
    "finish_rotation",
    "key_file",
    "key_id",
    "load_signer",
    "public_key_from_text",
    "raw_public_key",
    "read_key_file",
    "recorded_key_set",
    "shared_key_file",
    "staged_key_file",
    "worker_signer",
    "write_key_file",
]

log = logging.getLogger(__name__)

#: The default key file (in ``data_dir``) and the suffix of a key staged by a rotation.
DEFAULT_KEY_FILE = "signing_key.pem"
STAGED_SUFFIX = ".next"
KEY_FILE_MODE = 0o600


class KeyLedger(Protocol):
    """What :func:`worker_signer` needs of the privacy ledger (:class:`~.store.ledger.SqlLedger`)."""

    ledger_id: str

    @property
    def location(self) -> str: ...

    def identity(self) -> LedgerIdentity: ...

    def signing_keys(self) -> list[RecordedKey]: ...

    def record_first_key(self, key_id: str, public_key: str, *, who: str) -> RecordedKey: ...


def raw_public_key(signer: Signer) -> str:
    """The signer's public key as a key statement states it: base64 of its 32 raw bytes."""
    return str(signer.public_entry().to_dict()["public_key"])


def write_key_file(path: Path, signer: Signer) -> None:
    """Write ``signer``'s private key to a new file ``path``, mode 0600 whatever the umask, on
    disk before this returns (an existing file is never overwritten)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
    with os.fdopen(descriptor, "wb") as out:
        out.write(signer.private_pem())
        out.flush()
        os.fsync(out.fileno())


def read_key_file(path: Path, where: str) -> Signer:
    """The signer in the PEM file ``path``; a file others may read is set to mode 0600 (where
    this user may: a read-only mounted secret is its mount's to protect)."""
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"cannot read {where}: {exc.strerror or exc}") from None
    signer = Signer.from_pem(pem, where)
    with contextlib.suppress(OSError):
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(KEY_FILE_MODE)
    return signer


def load_signer(pem: str | None, path: Path | None, default_path: Path, *, create: bool = False) -> Signer:
    """The worker's signer: from ``pem`` (the ``signing_key`` setting), else the file ``path``
    (``signing_key_file``), else ``default_path``; that one is created (mode 0600) if it does not
    exist and ``create`` (a new ledger), else its absence is a :class:`SigningKeyError`."""
    if pem is not None:
        return Signer.from_pem(pem.encode(), "signing_key")
    if path is not None:
        return read_key_file(path, f"signing_key_file {path}")
    if default_path.exists():
        return read_key_file(default_path, str(default_path))
    if not create:
        raise SigningKeyError(f"the signing key {default_path} does not exist")
    signer = Signer.generate()
    write_key_file(default_path, signer)
    log.info(
        "created the release signing key %s (key id %s) with the new ledger", default_path, signer.key_id
    )
    return signer


def shared_key_file(path: Path) -> Path:
    """A new deployment key in the file ``path`` (mode 0600), for harnesses that start several
    workers of one deployment: each is given it as ``signing_key_file``, as a mounted secret."""
    write_key_file(path, Signer.generate())
    return path


def key_file(settings: Settings) -> Path | None:
    """The file the worker's key is in (None: the ``signing_key`` setting holds it)."""
    if settings.signing_key is not None:
        return None
    return settings.signing_key_file or settings.data_dir / DEFAULT_KEY_FILE


def staged_key_file(path: Path) -> Path:
    """Where ``privstream keys rotate`` stages the new key before it replaces ``path``."""
    return path.with_name(path.name + STAGED_SUFFIX)


def finish_rotation(path: Path, current_key_id: str) -> bool:
    """Put a staged key in place if it is the ledger's current key (a rotation interrupted after
    the ledger recorded it); True if it did."""
    staged = staged_key_file(path)
    if not staged.exists():
        return False
    if read_key_file(staged, str(staged)).key_id != current_key_id:
        log.warning("ignoring %s: its key is not the deployment's current key %s", staged, current_key_id)
        return False
    os.replace(staged, path)
    log.warning("finished a key rotation: %s (key %s) replaces %s", staged, current_key_id, path)
    return True


def worker_signer(settings: Settings, ledger: KeyLedger, *, who: str = "privstream worker") -> Signer:
    """The signer of a worker starting on ``ledger``: its key (``signing_key``, else
    ``signing_key_file``, else ``data_dir/signing_key.pem``, created only for a new ledger), which
    must be the deployment's current key; the first worker on a new ledger records its key there.
    Raises :class:`SigningKeyError` (one line naming both keys and the fix) otherwise."""
    recorded = ledger.signing_keys()
    current = next((k for k in reversed(recorded) if k.retired_at is None), None)
    path = key_file(settings)
    if path is not None and current is not None:
        finish_rotation(path, current.key_id)
    fresh = not recorded and ledger.identity().entries == 0
    where = "signing_key" if path is None else str(path)
    try:
        signer = load_signer(
            settings.signing_key.get_secret_value() if settings.signing_key else None,
            settings.signing_key_file,
            settings.data_dir / DEFAULT_KEY_FILE,
            create=fresh,
        )
    except SigningKeyError:
        if current is None and not fresh and path is not None and not path.exists():
            raise SigningKeyError(
                f"the signing key {path} is missing, and ledger {ledger.ledger_id} ({ledger.location}) "
                "holds releases signed by a key it does not record: restore that key file from the "
                "data folder's backup (or set signing_key_file); a new key is never made for an "
                "existing ledger"
            ) from None
        if current is not None and path is not None and not path.exists():
            raise SigningKeyError(
                f"the signing key {path} is missing, but ledger {ledger.ledger_id} ({ledger.location}) "
                f"signs with key {current.key_id}: restore the key file from the data folder's backup "
                "(or set signing_key_file to the deployment's key); a new key is never made for an "
                "existing ledger (`privstream keys rotate` makes one, signed by the old)"
            ) from None
        raise
    if current is None:
        current = ledger.record_first_key(signer.key_id, raw_public_key(signer), who=who)
    if current.key_id != signer.key_id:
        raise SigningKeyError(
            f"this worker's signing key {signer.key_id} ({where}) is not the deployment's: ledger "
            f"{ledger.ledger_id} ({ledger.location}) records key {current.key_id}; give every worker "
            "the deployment's key (one signing_key_file or signing_key secret for all), or replace "
            "it with `privstream keys rotate`"
        )
    return signer


class KeyRotatedError(LeaseLostError):
    """The deployment's key was rotated while this worker ran: it publishes nothing more (each
    release stays in the ledger's outbox, which a worker started with the new key publishes)."""


class KeyWatch:
    """Whether a running worker's key is still the deployment's current key (:meth:`check`, from
    a timer); once it is not, :meth:`refuse` raises :class:`KeyRotatedError` before a publication:
    a release signed by a retired key would verify for nobody."""

    def __init__(self, signer: Signer, ledger: KeyLedger) -> None:
        self.signer, self.ledger = signer, ledger
        self.rotated_to: str | None = None

    def check(self) -> None:
        """Read the ledger's current key (blocking: call it from a thread)."""
        current = next((k.key_id for k in reversed(self.ledger.signing_keys()) if k.retired_at is None), None)
        if current is not None and current != self.signer.key_id and self.rotated_to is None:
            self.rotated_to = current
            log.error("%s; nothing more is published", self._why())

    def refuse(self) -> None:
        if self.rotated_to is not None:
            raise KeyRotatedError(self._why())

    def _why(self) -> str:
        return (
            f"this worker's signing key {self.signer.key_id} was replaced by {self.rotated_to} "
            "(privstream keys rotate): restart the worker with the new key; its releases wait in "
            "the ledger's outbox"
        )


def existing_signer(settings: Settings) -> Signer | None:
    """The key the settings name, if it exists (never created): the public listener's process
    reads the key its worker checked."""
    path = key_file(settings)
    if path is not None and not path.exists():
        return None
    return load_signer(
        settings.signing_key.get_secret_value() if settings.signing_key else None,
        settings.signing_key_file,
        settings.data_dir / DEFAULT_KEY_FILE,
    )


def recorded_key_set(recorded: Sequence[RecordedKey]) -> KeySet:
    """The ledger's keys as a key set: a retired key is valid up to its retirement."""
    return KeySet(
        PublicKeyEntry(k.key_id, public_key_from_text(k.public_key), k.retired_at) for k in recorded
    )


def deployment_keys(
    settings: Settings, recorded: Sequence[RecordedKey] = (), signer: Signer | None = None
) -> KeySet:
    """The public keys whose signatures are this deployment's: those the ledger records
    (``recorded``), the worker's (``signer``; else the key file the settings name, if it exists),
    and those of ``published_keys_file``."""
    if signer is None:
        signer = existing_signer(settings)
    keys = recorded_key_set(recorded).merged(KeySet([signer.public_entry()] if signer is not None else []))
    if settings.published_keys_file is not None:
        keys = keys.merged(KeySet.from_file(settings.published_keys_file))
    return keys
