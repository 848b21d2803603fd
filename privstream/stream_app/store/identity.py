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
  saw, releases the state store recorded are not charged in it, or (the witness that survives
  both stores) releases on the public topics signed by this deployment's keys are not charged
  in it, or state a later epoch (a ledger and state store restored together from a backup);
* the worker's **signing key** is not the deployment's key the ledger records, or the default key
  file of a ledger that has signed is missing (:func:`~privstream.stream_app.signing.worker_signer`);
* a stream's **privacy configuration** differs from the one the ledger accepted (a lowered budget
  passes and takes effect at once; anything else needs ``privstream ledger accept-config``).

A ledger that is lost for good can be replaced on purpose: ``privstream ledger adopt --reason``
(:func:`adopt`) records the decision in the ledger's audit log and raises its epoch and entry ids
above everything published, so no entry id is ever given twice. A restored backup can instead
catch up: ``privstream ledger recover --reason`` (:func:`recover`) charges the verified releases it
lacks, with their published bytes, so the worker continues without charging them a second time.
Records on the public topics that do not verify under the deployment's keys are counted and
ignored: anyone can write there (:mod:`.published`).
"""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import Callable
from dataclasses import astuple, dataclass, field

from privstream.agents.ledger_port import (
    LedgerIdentity,
    LedgerMismatchError,
    LedgerMissingError,
    NodeRange,
    PrivacyCost,
    public_entry_id,
)
from privstream.agents.windows import count_family
from privstream.learning.errors import InvariantError
from privstream.schemas.numbers import MAX_SAFE_INTEGER
from privstream.stream_app.settings import Settings
from privstream.stream_app.signing import KeySet, Signer, deployment_keys, worker_signer
from privstream.stream_app.store import factory
from privstream.stream_app.store.ledger import SqlLedger
from privstream.stream_app.store.privacy_config import privacy_configuration
from privstream.stream_app.store.private_files import private_directory
from privstream.stream_app.store.published import PublicLog, checkpoint
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
    "recover",
]

log = logging.getLogger(__name__)

#: Reads the verified public log from a moment on (Unix seconds; None: all), as
#: :func:`.published.read_public_log` does with the deployment's keys.
Published_ = Callable[[float | None], PublicLog]
#: Reads it with the given keys (the worker's check: the keys are the ledger's).
PublishedWith = Callable[[KeySet, float | None], PublicLog]
#: How many of each stream's newest releases the start checks in the ledger.
RECENT_RELEASES = 100
#: How many missing public ids a refusal names (then "and N more"), and an audit entry lists.
MAX_NAMED = 5
MAX_AUDITED = 1000
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
    #: Where to read the examples topic again from, per partition: a state store behind its
    #: ledger (restored from a backup) lacks examples of windows charged since (:func:`replay_from`).
    replay: dict[int, int] = field(default_factory=dict)
    #: The deployment's key, which the worker signs with (None when no stream releases), and
    #: every key whose signatures are the deployment's (the ledger's, ``published_keys_file``'s).
    signer: Signer | None = None
    keys: KeySet = field(default_factory=KeySet)


def open_for_worker(settings: Settings, published: PublishedWith | None = None) -> WorkerStores:
    """Open the state store and the ledger, check that they belong together, that the worker's
    signing key is the deployment's (recorded with a new ledger), (given ``published``, a reader
    of the public topics' newest releases, that the ledger holds what was published) and that
    every releasing stream's configuration is the accepted one, register the streams and claim a
    new epoch. Raises :class:`LedgerMismatchError`,
    :class:`~privstream.stream_app.signing.SigningKeyError` or
    :class:`~privstream.agents.ledger_port.ConfigMismatchError` (one line each) instead."""
    releasing = [s for s in settings.streams if s.release is not None]
    private_directory(settings.data_dir)  # 0700 before any store creates a file in it
    state = factory.open_state_store(settings)
    if not releasing:
        return WorkerStores(state)
    try:
        record = state.ledger_record()
        ledger = _open_ledger(settings, state, record)
        try:
            check_history(ledger, state, record, settings, [s.name for s in releasing])
            who = f"worker {operator()}"
            signer = worker_signer(settings, ledger, who=who)
            keys = deployment_keys(settings, ledger.signing_keys(), signer)
            if published is not None:
                check_published(ledger, _read(lambda since: published(keys, since), ledger), settings)
            registered = {}
            for stream in releasing:
                if stream.release is None:
                    raise InvariantError(f"invariant broken: releasing stream {stream.name} has a release")
                lifetime = PrivacyCost(stream.release.epsilon_budget, stream.release.delta_budget)
                config = privacy_configuration(stream, settings)
                registered[stream.name] = ledger.register_stream(stream.name, lifetime, config, who=who)
            replay = replay_from(ledger, state, settings)
            identity = ledger.claim()
            state.record_ledger(identity)
        except BaseException:
            ledger.close()
            raise
    except BaseException:
        state.close()
        raise
    log.info("started on privacy ledger %s (epoch %d)", identity.ledger_id, identity.epoch)
    return WorkerStores(state, ledger, identity, registered, replay, signer, keys)


def replay_from(ledger: SqlLedger, state: SqlStateStore, settings: Settings) -> dict[int, int]:
    """Per partition of the examples topic, the offset to read again from, where the state store
    holds fewer examples of a count-window stream than the windows its ledger charged cover (the
    stores were restored from a backup and the ledger recovered from the public log since): the
    examples read after the backup are read again, so they land in the windows they were in,
    which the ledger holds already released, instead of filling those windows' ids anew."""
    replay: dict[int, int] = {}
    for stream in settings.streams:
        if stream.release is None or stream.release.window.kind != "count":
            continue
        size = stream.release.window.size
        last = ledger.last_window(stream.name, count_family(state.generation, size))
        stored = state.next_seq(stream.name)
        if last is None or stored >= (last + 1) * size:
            continue
        positions = state.positions(stream.name)
        log.warning(
            "stream %s: the state store %s holds %d examples, but the ledger charged its count windows up to "
            "%d (%d examples): a restored backup; reading the examples topic again from %s",
            stream.name,
            state.location,
            stored,
            last,
            (last + 1) * size,
            ", ".join(f"offset {o} of partition {p}" for p, o in sorted(positions.items())) or "the start",
        )
        for part, offset in positions.items():
            replay[part] = min(replay.get(part, offset), max(offset, 0))
    return replay


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


def check_published(ledger: SqlLedger, public: PublicLog, settings: Settings) -> None:
    """Raise :class:`LedgerMismatchError` unless the ledger holds what the verified public log
    shows: releases of this ledger (or of one it adopted), no later epoch, and a charge for every
    public id ``stream/node/product`` published. Records that did not verify decide nothing."""
    mine = ledger.identity()
    where = f"the privacy ledger {ledger.location}"
    if public.ignored:
        log_ignored(public)
    known = {mine.ledger_id} | ledger.predecessors()
    if foreign := sorted({r.ledger_id for r in public.releases if r.ledger_id not in known}):
        raise LedgerMismatchError(
            f"{where} is ledger {mine.ledger_id}, but the public topics hold signed releases of ledger "
            f"{foreign[0]}: point {ledger_setting(settings)} at that ledger, or {_ADOPT}"
        )
    own = [r for r in public.releases if r.ledger_id == mine.ledger_id]
    epoch = max((r.epoch for r in own), default=0)
    missing = ledger.missing_entries([r.key for r in own])
    fix = (
        f"a restored backup? `privstream ledger recover --reason ...` charges them from the verified "
        f"public log, or put the newest copy at {ledger_setting(settings)}"
    )
    if missing:
        named = ", ".join(public_entry_id(*key) for key in missing[:MAX_NAMED])
        more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
        raise LedgerMismatchError(
            f"{where} lacks the charges of {len(missing)} signed releases on the public topics "
            f"({named}{more}): {fix}"
        )
    if epoch > mine.epoch:
        raise LedgerMismatchError(
            f"{where} is at epoch {mine.epoch}, but signed releases on the public topics show epoch "
            f"{epoch}: {fix}"
        )


def log_ignored(public: PublicLog) -> None:
    """One line counting the public records that are no verified release of this deployment."""
    log.warning(
        "ignored %d records on the public topics that are not releases signed by this deployment's keys (%s)",
        sum(public.ignored.values()),
        public.describe_ignored(),
    )


def _read(published: Published_, ledger: SqlLedger) -> PublicLog:
    """The verified public log back to the ledger's checkpoint, or none where the topics cannot be
    read now (the state store's check still holds; a worker that cannot reach Kafka cannot publish)."""
    try:
        return published(checkpoint(ledger.newest_charge_time()))
    except Exception as exc:
        log.warning("could not read the public topics to check the privacy ledger against: %s", exc)
        return PublicLog()


def adopt(settings: Settings, *, reason: str, published: Published_ | None = None) -> LedgerIdentity:
    """``privstream ledger adopt``: continue the state store's history on the ledger the settings
    name (created if missing), above every epoch and entry id the state store saw and every epoch
    the verified public log (``published``) shows; audited. Unverified records decide nothing."""
    state = factory.open_state_store(settings)
    try:
        record = state.ledger_record()
        seen = [record.identity] if record is not None else []
        public = PublicLog()
        if published is not None:
            try:
                public = published(None)
            except Exception as exc:
                log.warning("could not read the public topics: %s", exc)
        if public.ignored:
            log_ignored(public)
        by_ledger: dict[str, int] = {}
        for r in public.releases:
            by_ledger[r.ledger_id] = max(by_ledger.get(r.ledger_id, 0), r.epoch)
        seen += [LedgerIdentity(ledger_id, epoch, 0) for ledger_id, epoch in by_ledger.items()]
        if too_big := [s for s in seen if max(s.epoch, s.entries) >= MAX_SAFE_INTEGER]:
            raise LedgerMismatchError(
                f"the state store {state.location} states ledger {too_big[0].ledger_id} at epoch "
                f"{too_big[0].epoch}, entries up to {too_big[0].entries}: beyond 2^53, not a ledger's "
                "figures; restore the state store's backup"
            )
        with factory.open_ledger(settings, create=True) as ledger:
            identity = ledger.adopt(seen, who=operator(), reason=reason)
        state.record_ledger(identity, adopted=True)
        return identity
    finally:
        state.close()


@dataclass
class Recovery:
    """What ``privstream ledger recover`` did: the public ids it charged (or completed), the
    ledger's identity after it, and the public records it ignored."""

    charged: list[str]
    identity: LedgerIdentity
    public: PublicLog


def recover(settings: Settings, *, reason: str, published: Published_) -> Recovery:
    """``privstream ledger recover``: charge into the ledger (a restored backup) every release of
    it that the verified public log shows and it lacks, with the published bytes (so the worker
    re-publishes those, never recomputes them), and raise its epoch to the latest published;
    audited. Refused, with nothing changed, where a release cannot be charged from what it states
    (a user-level release does not say which users it charged) or names a stream without budget."""
    if not reason.strip():
        raise LedgerMismatchError("recovering a ledger needs a reason (it is audited)")
    with factory.open_ledger(settings, create=False) as ledger:
        mine = ledger.identity()
        public = published(checkpoint(ledger.newest_charge_time()))
        if public.ignored:
            log_ignored(public)
        known = {mine.ledger_id} | ledger.predecessors()
        if foreign := sorted({r.ledger_id for r in public.releases if r.ledger_id not in known}):
            raise LedgerMismatchError(
                f"the public topics hold signed releases of ledger {foreign[0]}, not of ledger "
                f"{mine.ledger_id} ({ledger.location}): recover replays only this ledger's releases"
            )
        own = {r.key: r for r in public.releases if r.ledger_id == mine.ledger_id}
        missing = set(ledger.missing_entries(list(own)))
        pending = [r for key, r in own.items() if key in missing]
        incomplete = []
        for key, r in own.items():
            if key not in missing and (found := ledger.reservation(*key)) is not None and not found.completed:
                incomplete.append((found, r))
        streams = set(ledger.streams())
        for r in pending:
            if r.stream_id not in streams:
                raise LedgerMismatchError(
                    f"release {r.public_id} names stream {r.stream_id!r}, which has no budget in "
                    f"{ledger.location}: nothing recovered"
                )
            if r.privacy_unit != "example":
                raise LedgerMismatchError(
                    f"release {r.public_id} is a user-level release: which users it charged is not "
                    "public, so it cannot be charged from the public log; restore a newer ledger "
                    "backup. Nothing recovered"
                )
        charged = []
        # Lower levels first, then by window: the order the worker charged them in.
        for r in sorted(pending, key=lambda r: (*astuple(r.node or NodeRange(0, 0, 0)), r.public_id)):
            if r.node is None:
                entry = ledger.charge(
                    r.stream_id, r.window_id, r.mechanism, r.epsilon, r.delta, r.release
                ).entry_id
            else:
                reserved = ledger.reserve(
                    r.stream_id,
                    r.window_id,
                    r.mechanism,
                    r.epsilon,
                    r.delta,
                    r.node,
                    scheduled_at=r.scheduled_at,
                )
                ledger.complete(reserved.entry_id, r.release)
                entry = reserved.entry_id
            ledger.mark_published(entry)
            charged.append(r.public_id)
        for found, r in incomplete:
            ledger.complete(found.entry_id, r.release)
            ledger.mark_published(found.entry_id)
            charged.append(r.public_id)
        epoch = max((r.epoch for r in own.values()), default=0)
        detail = {
            "charged": charged[:MAX_AUDITED],
            "count": len(charged),
            "epoch": epoch,
            "was": mine._asdict(),
        }
        identity = ledger.raise_epoch(epoch, who=operator(), reason=reason, detail=detail)
        return Recovery(charged, identity, public)
