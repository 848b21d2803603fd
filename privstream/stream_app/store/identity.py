"""A worker starts only on the ledger the deployment has seen, with the configuration it accepted.

The privacy budget is only as safe as the ledger that keeps it: a ledger deleted and created
again, another deployment's ledger, or an older backup put in place would start from a spend
that is too low, and the stream would release more than its budget allows. So every ledger has
an identity (:class:`~privstream.agents.ledger_port.LedgerIdentity`: a random id, an epoch
raised at every worker start, the highest entry id), the state store remembers the identity it
last saw and the releases it recorded, and :func:`open_for_worker` refuses to start when they
disagree, with one line that names what is wrong and how to resolve it:

* the ledger is **missing** but the state store holds history: restore the ledger's backup (it
  is never created again over recorded history, whatever ``ledger_create_if_missing`` says);
* it is **another ledger** than the one the state store's history belongs to;
* it is **older** than what was published: a lower epoch or fewer entries than the state store
  saw, or releases the state store recorded are not charged in it (a restored backup);
* a stream's **privacy configuration** differs from the one the ledger accepted (a lowered budget
  passes and takes effect at once; anything else needs ``privstream ledger accept-config``).

A ledger that is lost for good can be replaced on purpose: ``privstream ledger adopt --reason``
(:func:`adopt`) records the decision in the ledger's audit log and raises its epoch and entry ids
above everything published, so no entry id is ever given twice.
"""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from privstream.agents.ledger_port import (
    LedgerIdentity,
    LedgerMismatchError,
    LedgerMissingError,
    PrivacyCost,
)
from privstream.stream_app.settings import Settings
from privstream.stream_app.store import factory
from privstream.stream_app.store.ledger import SqlLedger
from privstream.stream_app.store.privacy_config import privacy_configuration
from privstream.stream_app.store.published import Published
from privstream.stream_app.store.state import LedgerRecord, SqlStateStore

__all__ = [
    "WorkerStores",
    "adopt",
    "check_history",
    "check_published",
    "keep_up",
    "ledger_setting",
    "open_for_worker",
    "operator",
]

log = logging.getLogger(__name__)

#: Reads the identities the newest public releases state (:func:`.published.newest_published`).
Published_ = Callable[[], list[Published]]
#: How many of each stream's newest releases the start checks in the ledger.
RECENT_RELEASES = 100
_ADOPT = "`privstream ledger adopt --reason ...` continues from this ledger (audited)"


def operator() -> str:
    """Who runs this command, for the audit log: user and host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def ledger_setting(settings: Settings) -> str:
    """The setting that says where the ledger is."""
    if settings.store_backend == "postgresql":
        return "store_url (PRIVSTREAM_STORE_URL)"
    return "ledger_path (PRIVSTREAM_LEDGER_PATH)"


@dataclass
class WorkerStores:
    """A worker's stores, checked: the ledger (None when no stream releases) and the state store."""

    state: SqlStateStore
    ledger: SqlLedger | None = None
    identity: LedgerIdentity | None = None
    #: Each releasing stream's registration time (the public anchor of its time windows).
    registered: dict[str, float] = field(default_factory=dict)


def open_for_worker(settings: Settings, published: Published_ | None = None) -> WorkerStores:
    """Open the state store and the ledger, check that they belong together (and, given
    ``published``, a reader of the public topics' newest releases, that the ledger holds what was
    published) and that every releasing stream's configuration is the accepted one, register the
    streams and claim a new epoch. Raises :class:`LedgerMismatchError` or
    :class:`~privstream.agents.ledger_port.ConfigMismatchError` (one line each) instead."""
    releasing = [s for s in settings.streams if s.release is not None]
    state = factory.open_state_store(settings)
    if not releasing:
        return WorkerStores(state)
    try:
        record = state.ledger_record()
        ledger = _open_ledger(settings, state, record)
        try:
            check_history(ledger, state, record, settings, [s.name for s in releasing])
            if published is not None:
                check_published(ledger, _read(published), settings)
            who = f"worker {operator()}"
            registered = {}
            for stream in releasing:
                assert stream.release is not None
                lifetime = PrivacyCost(stream.release.epsilon_budget, stream.release.delta_budget)
                config = privacy_configuration(stream, settings)
                registered[stream.name] = ledger.register_stream(stream.name, lifetime, config, who=who)
            identity = ledger.claim()
            state.record_ledger(identity)
        except BaseException:
            ledger.close()
            raise
    except BaseException:
        state.close()
        raise
    log.info("started on privacy ledger %s (epoch %d)", identity.ledger_id, identity.epoch)
    return WorkerStores(state, ledger, identity, registered)


def keep_up(stores: WorkerStores) -> None:
    """Record the ledger's highest entry id in the state store (a worker does it every few
    seconds): were the ledger lost, its successor gives no published id again. Only while the
    ledger is the one the worker started on (a replaced one is the readiness probe's to report)."""
    if stores.ledger is None or stores.identity is None:
        return
    now = stores.ledger.identity()
    if now.ledger_id == stores.identity.ledger_id and now.epoch >= stores.identity.epoch:
        stores.state.record_ledger(now)


def _open_ledger(settings: Settings, state: SqlStateStore, record: LedgerRecord | None) -> SqlLedger:
    # A ledger is created only where no history says there was one.
    create = settings.ledger_create_if_missing and record is None
    try:
        return factory.open_ledger(settings, create=create)
    except LedgerMissingError:
        if record is None:
            raise
        seen = record.identity
        raise LedgerMismatchError(
            f"the privacy ledger is missing ({ledger_setting(settings)}), but the state store "
            f"{state.location} holds the history of ledger {seen.ledger_id} (epoch {seen.epoch}, "
            f"entries up to {seen.entries}): restore the ledger's backup there; a new ledger is "
            f"never created over that history unless {_ADOPT}"
        ) from None


def check_history(
    ledger: SqlLedger,
    state: SqlStateStore,
    record: LedgerRecord | None,
    settings: Settings,
    streams: list[str],
) -> None:
    """Raise :class:`LedgerMismatchError` unless ``ledger`` holds the history ``state`` recorded."""
    if record is None:
        return
    mine, seen = ledger.identity(), record.identity
    where = f"the privacy ledger {ledger.location}"
    if mine.ledger_id != seen.ledger_id:
        raise LedgerMismatchError(
            f"{where} is ledger {mine.ledger_id}, but the state store {state.location} holds the history "
            f"of ledger {seen.ledger_id}: point {ledger_setting(settings)} at that ledger, or {_ADOPT}"
        )
    if mine.epoch < seen.epoch or mine.entries < seen.entries:
        raise LedgerMismatchError(
            f"{where} is older than what was published (epoch {mine.epoch}, entries up to {mine.entries}; "
            f"the state store {state.location} saw epoch {seen.epoch}, entries up to {seen.entries}): "
            f"a restored backup? Put the newest copy at {ledger_setting(settings)}, or {_ADOPT}"
        )
    for stream_id in streams:
        recent = state.released_windows(stream_id, record.since, RECENT_RELEASES)
        if missing := ledger.missing_windows(stream_id, recent):
            raise LedgerMismatchError(
                f"{where} lacks the charges of {len(missing)} releases of stream {stream_id!r} that the "
                f"state store {state.location} recorded (the newest: {missing[0]}): a restored backup? "
                f"Put the newest copy at {ledger_setting(settings)}, or {_ADOPT}"
            )


def check_published(ledger: SqlLedger, published: list[Published], settings: Settings) -> None:
    """Raise :class:`LedgerMismatchError` unless the ledger holds what the public topics show:
    releases of this ledger (or of one it adopted), no later epoch, no higher entry id."""
    mine = ledger.identity()
    where = f"the privacy ledger {ledger.location}"
    known = {mine.ledger_id} | ledger.predecessors()
    if foreign := sorted({p.ledger_id for p in published if p.ledger_id and p.ledger_id not in known}):
        raise LedgerMismatchError(
            f"{where} is ledger {mine.ledger_id}, but the public topics hold releases of ledger "
            f"{foreign[0]}: point {ledger_setting(settings)} at that ledger, or {_ADOPT}"
        )
    own = [p for p in published if p.ledger_id == mine.ledger_id]
    epoch = max((p.epoch for p in own if p.epoch is not None), default=0)
    entries = max((p.entry for p in own if p.entry is not None), default=0)
    if epoch > mine.epoch or entries > mine.entries:
        raise LedgerMismatchError(
            f"{where} is older than what was published (epoch {mine.epoch}, entries up to {mine.entries}; "
            f"the public topics show epoch {epoch}, entries up to {entries}): a restored backup? Put the "
            f"newest copy at {ledger_setting(settings)}, or {_ADOPT}"
        )


def _read(published: Published_) -> list[Published]:
    """The public topics' newest releases, or none where they cannot be read now (the check is
    a cheap extra: the state store's is the main one)."""
    try:
        return published()
    except Exception as exc:
        log.warning("could not read the public topics to check the privacy ledger against: %s", exc)
        return []


def adopt(settings: Settings, *, reason: str, published: Published_ | None = None) -> LedgerIdentity:
    """``privstream ledger adopt``: continue the state store's history on the ledger the settings
    name (created if missing), above every epoch and entry id the state store and the public
    topics (``published``) saw; audited."""
    state = factory.open_state_store(settings)
    try:
        record = state.ledger_record()
        seen = [record.identity] if record is not None else []
        by_ledger: dict[str, LedgerIdentity] = {}
        for p in _read(published) if published is not None else []:
            if p.ledger_id:
                old = by_ledger.get(p.ledger_id, LedgerIdentity(p.ledger_id, 0, 0))
                by_ledger[p.ledger_id] = LedgerIdentity(
                    p.ledger_id, max(old.epoch, p.epoch or 0), max(old.entries, p.entry or 0)
                )
        with factory.open_ledger(settings, create=True) as ledger:
            identity = ledger.adopt([*seen, *by_ledger.values()], who=operator(), reason=reason)
        state.record_ledger(identity, adopted=True)
        return identity
    finally:
        state.close()
