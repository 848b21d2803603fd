"""The deployment's signing keys as subscribers see them, and the one way to replace the key.

``/keys`` serves :func:`key_document`: every key the ledger records (a retired one with its
``not_after``), the keys of ``published_keys_file``, and ``rotations``, the statement of each key
change (:class:`~privstream_client.signing.RotationStatement`), oldest first. A subscriber that
pinned any key of the chain follows it to the current key
(:meth:`~privstream_client.signing.KeySet.following`).

``privstream keys rotate`` (:func:`rotate`) replaces the key: a new key is drawn, the current key
signs the rotation statement and the new key countersigns it, and then

1. the new key is written to ``<key file>.next`` (mode 0600, on disk), beside the key file;
2. the ledger records the statement, the new key as current and the old one retired (one
   transaction, audited): from here on a worker with the old key refuses to start;
3. ``<key file>.next`` replaces the key file (an atomic rename).

A crash between 2 and 3 leaves the staged file: the next worker start finishes the rename
(:func:`~privstream.stream_app.signing.finish_rotation`); a crash before 2 leaves a staged key
that nothing trusts, which the next rotation replaces. With the key in the ``signing_key``
setting (no file), the new key is written to a file the operator names (``--out``), to be put in
that secret. Workers sign with the key they loaded when they started: stop them before rotating,
start them after. A worker left running stops publishing once it sees the rotation
(:class:`~privstream.stream_app.signing.KeyWatch`, every few seconds): a release signed by the old
key after the rotation verifies for nobody.

>>> from privstream.stream_app.store.sqlite_ledger import SqliteLedger
>>> from privstream_client.signing import KeySet
>>> ledger = SqliteLedger.open(":memory:")
>>> old, new = Signer.generate(), Signer.generate()
>>> _ = ledger.record_first_key(old.key_id, raw_public_key(old), who="doc")
>>> _ = record_rotation(ledger, old, new, who="doc", reason="yearly")
>>> document = key_document(ledger.signing_keys())
>>> pinned = KeySet([old.public_entry()])
>>> new.key_id in pinned.following(rotation_statements(json.dumps(document))).key_ids
True
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privstream_client.signing import DeploymentStatement, RotationStatement, rotation_statements

from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import (
    KeySet,
    Signer,
    SigningKeyError,
    finish_rotation,
    key_file,
    load_signer,
    raw_public_key,
    read_key_file,
    recorded_key_set,
    staged_key_file,
    write_key_file,
)
from privstream.stream_app.store.ledger import SqlLedger
from privstream.stream_app.store.ledger_governance import RecordedKey

__all__ = ["Rotation", "key_document", "record_rotation", "rotate", "rotation_statements"]


def key_document(
    recorded: list[RecordedKey],
    published: KeySet | None = None,
    deployment: DeploymentStatement | None = None,
) -> dict[str, Any]:
    """What ``/keys`` serves: the ledger's keys and ``published``'s, the rotation statements, and
    the ``deployment`` statement (the ledger id, signed by the worker's key) if given."""
    keys = recorded_key_set(recorded).merged(published or KeySet())
    rotations = [json.loads(k.statement) for k in recorded if k.statement is not None]
    stated = {} if deployment is None else {"deployment": deployment.to_dict()}
    return {**keys.to_dict(), "rotations": rotations, **stated}


def record_rotation(ledger: SqlLedger, old: Signer, new: Signer, *, who: str, reason: str) -> RecordedKey:
    """Record in ``ledger`` the statement by which ``old`` (its current key) hands over to ``new``."""
    at = datetime.now(UTC)  # the old key verifies what it signed up to this moment
    statement = RotationStatement.sign(old, new, ledger.ledger_id, at)
    return ledger.rotate_key(
        old.key_id, new.key_id, raw_public_key(new), statement.to_json(), at, who=who, reason=reason
    )


@dataclass(frozen=True)
class Rotation:
    """What ``privstream keys rotate`` did: the old and new key ids, where the new key is, and
    the rotation statement the ledger recorded."""

    old_key_id: str
    new_key_id: str
    path: Path
    statement: RotationStatement


def rotate(settings: Settings, *, reason: str, who: str, out: Path | None = None) -> Rotation:
    """``privstream keys rotate``: replace the deployment's key with a new one (see the module).
    Raises :class:`SigningKeyError` (one line) where the configured key is not the ledger's
    current one or the new key has nowhere to go."""
    from privstream.stream_app.store import factory

    path = key_file(settings)
    if path is None and out is None:
        raise SigningKeyError(
            "the signing key is in the signing_key setting: name a new file for the new key with --out "
            "(then put it in that secret)"
        )
    if out is not None and out.exists():
        raise SigningKeyError(f"--out {out} exists: name a new file")
    with factory.open_ledger(settings, create=False) as ledger:
        keys = ledger.signing_keys()
        current = next((k for k in reversed(keys) if k.retired_at is None), None)
        if current is None:
            raise SigningKeyError(
                f"ledger {ledger.ledger_id} ({ledger.location}) records no signing key yet: start a "
                "worker first (it records the deployment's key)"
            )
        if path is not None:
            finish_rotation(path, current.key_id)
        old = load_signer(
            settings.signing_key.get_secret_value() if settings.signing_key else None,
            settings.signing_key_file,
            settings.data_dir / "signing_key.pem",
        )
        if old.key_id != current.key_id:
            raise SigningKeyError(
                f"the configured signing key {old.key_id} is not the deployment's current key "
                f"{current.key_id} (ledger {ledger.ledger_id}): rotate with the deployment's key"
            )
        new = Signer.generate()
        if out is not None:
            write_key_file(out, new)
            recorded = record_rotation(ledger, old, new, who=who, reason=reason)
            return Rotation(old.key_id, new.key_id, out, _statement(recorded))
        if path is None:  # ruled out above
            raise SigningKeyError("no key file to rotate")
        staged = staged_key_file(path)
        if staged.exists():  # a rotation that stopped before the ledger recorded it: nothing trusts it
            staged.unlink()
        write_key_file(staged, new)
        recorded = record_rotation(ledger, old, new, who=who, reason=reason)
    os.replace(staged, path)
    _sync_directory(path.parent)
    if read_key_file(path, str(path)).key_id != new.key_id:  # trust nothing read back
        raise SigningKeyError(f"{path} does not hold the new key {new.key_id} after the rotation")
    return Rotation(old.key_id, new.key_id, path, _statement(recorded))


def _statement(recorded: RecordedKey) -> RotationStatement:
    if recorded.statement is None:  # rotate_key records it with the key
        raise SigningKeyError(f"the ledger recorded the key {recorded.key_id} without its rotation statement")
    return RotationStatement.from_json(recorded.statement)


def _sync_directory(folder: Path) -> None:
    """The rename on disk (a crash after this keeps the new key file)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replay_rotations(
    ledger: SqlLedger, statements: list[RotationStatement], *, who: str, reason: str
) -> list[str]:
    """Record in ``ledger`` (a restored backup) the rotations it lacks, from the deployment's
    ``statements`` (a saved ``/keys`` document's): each one of this ledger whose old key is the
    ledger's current key and whose signatures verify, in chain order; the new key ids recorded.
    A statement that does not follow from the ledger's keys adds nothing, so no key enters that
    the deployment's recorded key did not sign for."""
    added: list[str] = []
    pending = [s for s in statements if s.ledger_id == ledger.ledger_id]
    while True:
        keys = ledger.signing_keys()
        current = next((k for k in reversed(keys) if k.retired_at is None), None)
        if current is None:
            return added
        known = {k.key_id for k in keys}
        trusted = recorded_key_set([current])
        step = next(
            (
                s
                for s in pending
                if s.old_key_id == current.key_id
                and s.new_key.key_id not in known
                and s.problem(trusted) is None
            ),
            None,
        )
        if step is None:
            return added
        public = str(step.new_key.to_dict()["public_key"])
        ledger.rotate_key(
            step.old_key_id, step.new_key.key_id, public, step.to_json(), step.at, who=who, reason=reason
        )
        added.append(step.new_key.key_id)
