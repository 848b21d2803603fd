"""The worker's release signing key; the signature and key-set formats are the client's.

Every release the worker publishes carries an Ed25519 signature over its exact bytes in the
Kafka record headers ``privstream-key-id`` and ``privstream-signature``
(:mod:`privstream_client.signing`, re-exported here: the worker signs and every subscriber
verifies with the same code).

**Keys.** The worker signs with one private key (:func:`load_signer`): the ``signing_key``
setting (PEM), the file ``signing_key_file`` (PEM, e.g. a mounted secret; ``openssl genpkey
-algorithm ed25519``), or, when neither is set, ``data_dir/signing_key.pem``, created on the
first start. Several workers of one deployment share one key (a secret mounted into each), or
each has its own and every worker publishes the whole :class:`KeySet` (``published_keys_file``).

>>> signer = Signer.generate()
>>> KeySet([signer.public_entry()]).problem(b"release", *signer.sign(b"release")) is None
True
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from privstream.stream_app.settings import Settings

__all__ = [
    "ALGORITHM",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "VERIFY_PROBLEMS",
    "KeySet",
    "PublicKeyEntry",
    "Signer",
    "SigningKeyError",
    "deployment_keys",
    "key_id",
    "load_signer",
    "public_key_from_text",
    "worker_signer",
]

log = logging.getLogger(__name__)


def load_signer(pem: str | None, path: Path | None, default_path: Path) -> Signer:
    """The worker's signer: from ``pem`` (the ``signing_key`` setting), else the file ``path``
    (``signing_key_file``), else ``default_path``, created (mode 0600) if it does not exist."""
    if pem is not None:
        return Signer.from_pem(pem.encode(), "signing_key")
    if path is not None:
        try:
            return Signer.from_pem(path.read_bytes(), f"signing_key_file {path}")
        except OSError as exc:
            raise SigningKeyError(f"cannot read signing_key_file {path}: {exc.strerror or exc}") from None
    if default_path.exists():
        return Signer.from_pem(default_path.read_bytes(), str(default_path))
    signer = Signer.generate()
    default_path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(default_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(signer.private_pem())
    log.warning(
        "created the release signing key %s (key id %s); workers of one deployment must share a key "
        "or publish each other's (signing_key_file, published_keys_file)",
        default_path,
        signer.key_id,
    )
    return signer


def worker_signer(settings: Settings) -> Signer:
    """The worker's signer from its settings: ``signing_key``, else ``signing_key_file``, else
    ``data_dir/signing_key.pem`` (created on the first start)."""
    return load_signer(
        settings.signing_key.get_secret_value() if settings.signing_key else None,
        settings.signing_key_file,
        settings.data_dir / "signing_key.pem",
    )


def deployment_keys(settings: Settings, signer: Signer | None = None) -> KeySet:
    """The public keys whose signatures are this deployment's: the worker's (``signer``, else the
    one its settings name, if it exists; never created here) and those of ``published_keys_file``."""
    if signer is None:
        default = settings.data_dir / "signing_key.pem"
        if settings.signing_key is not None or settings.signing_key_file is not None or default.exists():
            signer = worker_signer(settings)
    keys = KeySet([signer.public_entry()] if signer is not None else [])
    if settings.published_keys_file is not None:
        keys = keys.merged(KeySet.from_file(settings.published_keys_file))
    return keys
