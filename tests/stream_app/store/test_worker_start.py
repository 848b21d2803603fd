"""A worker starts only on the ledger its deployment has seen, with the configuration the ledger
accepted (``store/identity.py``); otherwise one line says what is wrong and what resolves it.

The stores are real (SQLite files, a PostgreSQL database); a "worker start" is
:func:`open_for_worker`, the first thing ``privstream worker`` does (the live test in
``tests/integration/test_live_ledger_identity.py`` runs the worker itself)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from privstream.agents.ledger_port import (
    ConfigMismatchError,
    LedgerMismatchError,
    LedgerMissingError,
    NodeRange,
)
from privstream.stream_app.cli import main
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.signing import KeySet, Signer
from privstream.stream_app.store.identity import (
    WorkerStores,
    adopt,
    check_published,
    keep_up,
    open_for_worker,
    recover,
)
from privstream.stream_app.store.pg_server import PostgresServer
from privstream.stream_app.store.published import PublicLog, public_log
from privstream.stream_app.store.sqlite_streams import state_files


def stream(epsilon: float = 0.5, budget: float = 1.0) -> StreamConfig:
    return StreamConfig(
        name="s",
        hypothesis_class="thresholds:16",
        release={"epsilon": epsilon, "epsilon_budget": budget, "window": {"size": 10}},
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "sqlite":
        return Settings(data_dir=tmp_path, streams=[stream()], ledger_create_if_missing=True, _env_file=None)
    server: PostgresServer = request.getfixturevalue("pg_server")
    url = request.getfixturevalue("pg_database")
    return Settings(
        store_url=url,
        store_password=server.password,
        streams=[stream()],
        ledger_create_if_missing=True,
        data_dir=tmp_path,
        _env_file=None,
    )


def sqlite_settings(tmp_path: Path, **changes: object) -> Settings:
    return Settings(
        data_dir=tmp_path, streams=[stream()], ledger_create_if_missing=True, _env_file=None
    ).model_copy(update=changes)


def release_one(stores: WorkerStores, window: int) -> int:
    """What a release does to the stores: a charge in the ledger, the node closed in the state store."""
    assert stores.ledger is not None
    node = NodeRange.of(0, window)
    window_id = f"{stores.state.generation}-c10-L0-{window}"
    reservation = stores.ledger.reserve("s", window_id, "learner:generic", 0.25, 0.0, node)
    stores.ledger.complete(reservation.entry_id, b"release")
    stores.state.mark_closed("s", window_id, "released")
    return reservation.entry_id


def close(stores: WorkerStores) -> None:
    if stores.ledger is not None:
        stores.ledger.close()
    stores.state.close()


def refusal(settings: Settings, error: type[Exception] = LedgerMismatchError) -> str:
    with pytest.raises(error) as refused:
        open_for_worker(settings)
    message = str(refused.value)
    assert "\n" not in message  # one line
    return message


def drop_ledger(settings: Settings, pg: PostgresServer | None) -> None:
    """Delete the ledger (the file; or the tables, on PostgreSQL)."""
    if settings.store_backend == "sqlite":
        settings.resolved_ledger_path.unlink()
        return
    assert pg is not None and settings.store_url is not None
    with pg.connect(settings.store_url.rsplit("/", 1)[1]) as conn:
        for table in ("charges", "refusals", "budget_changes", "levels", "user_spends"):
            conn.execute(f"DROP TABLE ledger_{table} CASCADE")
        for table in (
            "streams",
            "identity",
            "configs",
            "audit",
            "predecessors",
            "signing_keys",
            "admissions",
        ):
            conn.execute(f"DROP TABLE ledger_{table}")
        conn.execute("DELETE FROM privstream_migrations WHERE component = 'ledger'")


def sqlite_backup(source: Path, target: Path) -> None:
    """An online backup (what ``sqlite3 ledger.sqlite3 ".backup FILE"`` does)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_a_deleted_ledger_is_never_created_again_over_recorded_history(settings, request) -> None:
    stores = open_for_worker(settings)
    release_one(stores, 0)
    close(stores)
    pg = request.getfixturevalue("pg_server") if settings.store_backend == "postgresql" else None
    drop_ledger(settings, pg)

    message = refusal(settings)  # ledger_create_if_missing is still true
    assert "the privacy ledger is missing" in message and "holds the history of ledger" in message
    assert "privstream ledger adopt" in message
    assert (
        "PRIVSTREAM_LEDGER_PATH" if settings.store_backend == "sqlite" else "PRIVSTREAM_STORE_URL"
    ) in message
    if settings.store_backend == "sqlite":
        assert not settings.resolved_ledger_path.exists()  # nothing was created


def test_a_second_worker_with_another_configuration_refuses_and_changes_nothing(settings) -> None:
    first = open_for_worker(settings)
    assert first.ledger is not None
    other = settings.model_copy(update={"streams": [stream(epsilon=5.0, budget=100.0)]})
    message = refusal(other, ConfigMismatchError)
    assert "stream 's'" in message and "privstream ledger accept-config --stream s" in message
    assert first.ledger.budget("s") == (1.0, 0.0)  # the first worker's budget stands
    close(first)


def test_a_lowered_budget_starts_and_takes_effect(tmp_path: Path) -> None:
    close(open_for_worker(sqlite_settings(tmp_path)))
    lowered = sqlite_settings(tmp_path, streams=[stream(epsilon=0.25, budget=0.5)])
    stores = open_for_worker(lowered)
    assert stores.ledger is not None and stores.ledger.budget("s") == (0.5, 0.0)
    assert stores.ledger.audit_log("s")[-1]["action"] == "config lowered"
    close(stores)


def test_another_ledger_is_refused(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    stores = open_for_worker(settings)
    release_one(stores, 0)
    close(stores)
    settings.resolved_ledger_path.unlink()
    elsewhere = sqlite_settings(tmp_path / "elsewhere")
    close(open_for_worker(elsewhere))  # another deployment's ledger, put in place
    shutil.copy(elsewhere.resolved_ledger_path, settings.resolved_ledger_path)

    message = refusal(settings)
    assert "but the state store" in message and "holds the history of ledger" in message
    assert "PRIVSTREAM_LEDGER_PATH" in message


def test_a_restored_older_backup_is_refused_by_its_epoch(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    close(open_for_worker(settings))
    sqlite_backup(settings.resolved_ledger_path, tmp_path / "backup.sqlite3")
    close(open_for_worker(settings))  # the deployment goes on: another start, epoch 2
    shutil.copy(tmp_path / "backup.sqlite3", settings.resolved_ledger_path)

    message = refusal(settings)
    assert "is older than what was published (epoch 1" in message and "saw epoch 2" in message


def test_a_backup_restored_within_an_epoch_is_refused_by_the_releases_it_lacks(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    stores = open_for_worker(settings)
    release_one(stores, 0)
    sqlite_backup(settings.resolved_ledger_path, tmp_path / "backup.sqlite3")
    release_one(stores, 1)  # released after the backup
    close(stores)
    shutil.copy(tmp_path / "backup.sqlite3", settings.resolved_ledger_path)

    message = refusal(settings)
    assert "lacks the charges of 1 releases of stream 's'" in message and "c10-L0-1" in message


def test_adopting_continues_the_history_without_reusing_an_entry_id(tmp_path: Path, capsys) -> None:
    settings = sqlite_settings(tmp_path)
    stores = open_for_worker(settings)
    last = max(release_one(stores, w) for w in range(3))
    keep_up(stores)  # what a running worker does every few seconds
    close(stores)
    settings.resolved_ledger_path.unlink()
    refusal(settings)

    config = tmp_path / "privstream.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n')
    assert main(["ledger", "adopt", "--config", str(config), "--reason", "the old ledger's disk died"]) == 0
    assert f"entries from {last + 1}" in capsys.readouterr().err
    stores = open_for_worker(settings)
    assert stores.ledger is not None
    assert release_one(stores, 3) == last + 1  # ids go on where the lost ledger stopped
    assert stores.ledger.audit_log()[0]["action"] == "ledger adopted"
    close(stores)


def test_without_create_a_missing_ledger_without_history_is_the_usual_error(tmp_path: Path) -> None:
    with pytest.raises(LedgerMissingError):
        open_for_worker(sqlite_settings(tmp_path, ledger_create_if_missing=False))


def test_the_public_topics_show_history_the_ledger_lacks(tmp_path: Path) -> None:
    """Where the state store is gone too, the signed releases on the public topics still tell."""
    settings = sqlite_settings(tmp_path)
    stores = open_for_worker(settings)
    assert stores.ledger is not None
    mine, gen = stores.ledger.identity(), stores.state.generation
    release_one(stores, 0)
    check_published(stores.ledger, signed([release(mine.ledger_id, mine.epoch, 0, generation=gen)]), settings)
    with pytest.raises(LedgerMismatchError, match="the public topics hold signed releases of ledger f00d"):
        check_published(stores.ledger, signed([release("f00d", 3, 0)]), settings)
    with pytest.raises(
        LedgerMismatchError, match=f"is at epoch {mine.epoch}, but signed releases .* epoch 9"
    ):
        check_published(stores.ledger, signed([release(mine.ledger_id, 9, 0, generation=gen)]), settings)
    close(stores)
    settings.resolved_ledger_path.unlink()
    settings.resolved_state_path.unlink()  # both stores lost: only the topics remember
    message = refusal_with(settings, lambda keys, since: signed([release(mine.ledger_id, mine.epoch, 1)]))
    assert f"the public topics hold signed releases of ledger {mine.ledger_id}" in message


SIGNER = Signer.generate()
KEYS = KeySet([SIGNER.public_entry()])


def release(
    ledger_id: str, epoch: int, window: int, level: int = 0, epsilon: float = 0.25, generation: str = "g"
) -> bytes:
    """A release's bytes as the worker writes them (the fields the witness reads)."""
    node = NodeRange.of(level, window)
    window_id = f"{generation}-c10-L{level}-{window}"
    return json.dumps(
        {
            "stream_id": "s",
            "certificate": {
                "ledger_id": ledger_id,
                "ledger_epoch": epoch,
                "ledger_entry_id": f"s/{window_id}/learner:generic",
                "level": level,
                "epsilon": epsilon,
                "delta": 0.0,
                "privacy_unit": "example",
                "window": {
                    "window_id": window_id,
                    "first_window": node.first_window,
                    "last_window": node.last_window,
                },
            },
            "window": window,
        }
    ).encode()


def signed(bodies: list[bytes], junk: list[bytes] = ()) -> PublicLog:  # type: ignore[assignment]
    """The public log of ``bodies`` signed by the deployment, and of ``junk`` (unsigned)."""
    records = [(body, SIGNER.headers(body), 0) for body in bodies]
    return public_log([*records, *((j, None, 0) for j in junk)], KEYS)


def backup_then_publish(settings: Settings, tmp_path: Path) -> tuple[str, list[bytes]]:
    """The documented backup of a running worker's ledger and state store after window 0, three
    more releases (L0-1, L0-2, L1-0), both stores restored together from the backup: the ledger
    and the state store agree with each other, but not with what was published."""
    stores = open_for_worker(settings)
    assert stores.ledger is not None
    identity, gen = stores.ledger.identity(), stores.state.generation
    append(stores, range(0, 10))  # window 0's examples, at offsets 0..9 of partition 0
    release_one(stores, 0)
    sqlite_backup(settings.resolved_ledger_path, tmp_path / "ledger.backup")
    (tmp_path / "state.backup").mkdir()
    for path in state_files(settings.resolved_state_path):  # the main file and each stream's
        sqlite_backup(path, tmp_path / "state.backup" / path.name)
    append(stores, range(10, 30))
    release_one(stores, 1)
    release_one(stores, 2)
    r = stores.ledger.reserve("s", f"{gen}-c10-L1-0", "learner:generic", 0.25, 0.0, NodeRange.of(1, 0))
    stores.ledger.complete(r.entry_id, b"release")
    spent = stores.ledger.spent("s")
    assert spent.epsilon == 0.5
    close(stores)
    shutil.copy(tmp_path / "ledger.backup", settings.resolved_ledger_path)
    for path in state_files(settings.resolved_state_path):
        shutil.copy(tmp_path / "state.backup" / path.name, path)
    bodies = [release(identity.ledger_id, identity.epoch, w, generation=gen) for w in range(3)]
    bodies.append(release(identity.ledger_id, identity.epoch, 0, level=1, generation=gen))
    return identity.ledger_id, bodies


def append(stores: WorkerStores, offsets: range) -> None:
    for offset in offsets:
        stores.state.append("s", partition=0, offset=offset, x=3, y=1, user=None, time_window=None)


def test_a_backup_restored_with_its_state_store_is_refused_by_the_signed_public_log(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    ledger_id, bodies = backup_then_publish(settings, tmp_path)
    close(open_for_worker(settings))  # the stores agree with each other: alone, they would start
    # 25 unsigned junk records and a forged "newest" release switch nothing off
    junk = [b"{}"] * 24 + [release(ledger_id, 2**62, 99)]
    message = refusal_with(settings, lambda keys, since: signed(bodies, junk))
    assert "lacks the charges of 3 signed releases on the public topics" in message
    for public_id in (
        "-c10-L0-1/learner:generic",
        "-c10-L0-2/learner:generic",
        "-c10-L1-0/learner:generic",
    ):
        assert public_id in message
    assert "privstream ledger recover" in message


def test_unsigned_records_on_the_public_topics_decide_nothing(tmp_path: Path, caplog) -> None:
    settings = sqlite_settings(tmp_path)
    stores = open_for_worker(settings)
    assert stores.ledger is not None
    mine = stores.ledger.identity()
    close(stores)
    forged = [
        b'{"certificate": {"ledger_id": "' + b"f" * 32 + b'"}}',
        release(mine.ledger_id, 2**62, 0),
        release("f" * 32, 1, 0),
        b"\x00not json",
    ]
    wrong_key = Signer.generate()
    foreign = [(body, wrong_key.headers(body), 0) for body in forged[1:3]]
    log = public_log([*((f, None, 0) for f in forged), *foreign], KEYS)
    assert log.releases == [] and dict(log.ignored) == {"unsigned": 4, "unknown_key": 2}
    with caplog.at_level("WARNING"):
        close(open_for_worker(settings, published=lambda keys, since: log))  # starts
    assert "ignored 6 records on the public topics" in caplog.text
    assert "(unknown_key 2, unsigned 4)" in caplog.text


def test_recover_charges_the_published_releases_once_and_the_worker_continues(tmp_path: Path, capsys) -> None:
    settings = sqlite_settings(tmp_path)
    _, bodies = backup_then_publish(settings, tmp_path)
    junk = [b"{}"] * 25
    reader = lambda since: signed(bodies, junk)  # noqa: E731
    identity = recover(settings, reason="restored last night's backup", published=reader).identity
    stores = open_for_worker(settings, published=lambda keys, since: reader(since))  # starts now
    assert stores.ledger is not None and stores.identity is not None
    # The state store lacks the examples after the backup: the worker reads them again (from
    # offset 10 of partition 0), so they land in the windows already released.
    assert stores.replay == {0: 10}
    assert stores.identity.epoch == identity.epoch + 1
    assert stores.ledger.spent("s").epsilon == 0.5  # window 0's examples: L0 + L1, once each
    # The worker, finding the nodes again, gets the charged reservation with the published bytes.
    gen = stores.state.generation
    again = stores.ledger.reserve("s", f"{gen}-c10-L1-0", "learner:generic", 0.25, 0.0, NodeRange.of(1, 0))
    assert again.completed and again.published and again.release == bodies[3]
    assert stores.ledger.spent("s").epsilon == 0.5
    assert stores.ledger.audit_log()[-1]["action"] == "ledger recovered"
    close(stores)
    # Recovering again finds nothing to charge.
    assert recover(settings, reason="again", published=reader).charged == []


def test_recover_refuses_what_the_public_log_cannot_charge_and_changes_nothing(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    _, bodies = backup_then_publish(settings, tmp_path)
    user_level = json.loads(bodies[1])
    user_level["certificate"]["privacy_unit"] = "user"
    with pytest.raises(LedgerMismatchError, match="user-level release: which users it charged is not public"):
        recover(settings, reason="x", published=lambda since: signed([json.dumps(user_level).encode()]))
    with pytest.raises(LedgerMismatchError, match="not of ledger"):
        recover(settings, reason="x", published=lambda since: signed([release("f00d", 1, 5)]))
    refusal_with(settings, lambda keys, since: signed(bodies))  # still behind: nothing was charged


def test_adopt_takes_only_verified_figures(tmp_path: Path, capsys) -> None:
    settings = sqlite_settings(tmp_path)
    close(open_for_worker(settings))
    settings.resolved_ledger_path.unlink()
    config = tmp_path / "privstream.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n')
    (tmp_path / "signing_key.pem").write_bytes(SIGNER.private_pem())
    huge = b'{"stream_id": "s", "certificate": {"ledger_id": "ab", "ledger_epoch": 4611686018427387904, '
    huge += b'"ledger_entry_id": "123456789012345678901234567890"}}'
    forged = public_log([(huge, None, 0), (huge, SIGNER.headers(huge), 0)], KEYS)
    assert forged.releases == [] and dict(forged.ignored) == {"unsigned": 1, "not_a_release": 1}
    identity = adopt(settings, reason="the disk died", published=lambda since: forged)
    assert identity.epoch == 2  # above the state store's epoch 1, not 2^62


def refusal_with(settings: Settings, published) -> str:
    with pytest.raises(LedgerMismatchError) as refused:
        open_for_worker(settings, published=published)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_accept_config_is_the_command_that_lets_the_new_configuration_start(tmp_path: Path, capsys) -> None:
    close(open_for_worker(sqlite_settings(tmp_path)))
    raised = sqlite_settings(tmp_path, streams=[stream(epsilon=1.0, budget=4.0)])
    refusal(raised, ConfigMismatchError)
    config = tmp_path / "privstream.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[[streams]]\nname = "s"\nhypothesis_class = "thresholds:16"\n'
        "[streams.release]\nepsilon = 1.0\nepsilon_budget = 4.0\n[streams.release.window]\nsize = 10\n"
    )
    assert (
        main(["ledger", "accept-config", "--config", str(config), "--stream", "nope", "--reason", "x"]) == 2
    )
    assert capsys.readouterr().err.count("\n") == 1  # one line: no releasing stream 'nope'
    assert (
        main(["ledger", "accept-config", "--config", str(config), "--stream", "s", "--reason", "review 12"])
        == 0
    )
    assert "epsilon_budget 1.0 -> 4.0" in capsys.readouterr().err
    stores = open_for_worker(raised)
    assert stores.ledger is not None and stores.ledger.budget("s") == (4.0, 0.0)
    entry = stores.ledger.audit_log("s")[-1]
    assert entry["action"] == "config accepted" and entry["reason"] == "review 12" and "@" in entry["who"]
    close(stores)
    assert main(["ledger", "show", "--config", str(config)]) == 0
    assert "config accepted stream s: review 12" in capsys.readouterr().out
