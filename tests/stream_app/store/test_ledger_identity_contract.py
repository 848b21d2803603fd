"""The ledger knows itself, on every backend: an identity drawn once, an epoch raised at every
start, the privacy configuration it accepted per stream (lowering passes, anything else is an
explicit, audited acceptance), a lowered budget that stops the stream at once, entry ids that
never go back."""

from __future__ import annotations

import pytest

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    ConfigMismatchError,
    LedgerIdentity,
    NodeRange,
    PrivacyCost,
)
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from tests.stream_app.store.backends import LedgerBackend

CONFIG = {
    "privacy_unit": "example",
    "window": {"kind": "count", "size": 100, "seconds": None},
    "top_level": 1,
    "learner": "generic",
    "learner_epsilons": [0.5, 0.5],
    "delta": 0.0,
    "epsilon_budget": 1.0,
    "delta_budget": 0.0,
}


def budget_of(config: dict) -> PrivacyCost:
    return PrivacyCost(config["epsilon_budget"], config["delta_budget"])


@pytest.fixture
def ledger(ledger_backend: LedgerBackend):
    with ledger_backend.open(create=True) as opened:
        yield opened


def test_the_identity_is_drawn_once_and_the_epoch_rises_at_every_claim(ledger_backend, ledger) -> None:
    first = ledger.identity()
    assert len(first.ledger_id) == 32 and first.epoch == 0 and first.entries == 0
    assert ledger.claim().epoch == 1 and ledger.claim().epoch == 2
    ledger.close()
    with ledger_backend.open() as again:
        assert again.identity() == LedgerIdentity(first.ledger_id, 2, 0)
    with SqliteLedger.open(":memory:") as elsewhere:  # another ledger: another id
        assert elsewhere.ledger_id != first.ledger_id


def test_a_reservation_states_the_ledger_and_its_epoch_and_keeps_them_on_replay(ledger) -> None:
    ledger.register_stream("s", PrivacyCost(1.0, 0.0))
    epoch = ledger.claim().epoch
    reservation = ledger.reserve("s", "w0", "m", 0.25, 0.0, NodeRange.of(0, 0))
    assert (reservation.ledger_id, reservation.epoch) == (ledger.ledger_id, epoch)
    assert reservation.receipt.ledger_id == ledger.ledger_id and reservation.receipt.ledger_epoch == epoch
    ledger.claim()  # another worker starts: a retry of the same release states the same epoch
    assert ledger.reserve("s", "w0", "m", 0.25, 0.0, NodeRange.of(0, 0)).epoch == epoch
    assert ledger.reservation("s", "w0", "m").epoch == epoch
    assert ledger.identity().entries == reservation.entry_id


def test_the_first_configuration_is_recorded_and_a_restart_with_it_changes_nothing(ledger) -> None:
    first = ledger.register_stream("s", budget_of(CONFIG), CONFIG, who="worker a")
    assert ledger.register_stream("s", budget_of(CONFIG), CONFIG, who="worker a") == first
    assert ledger.accepted_config("s") == CONFIG
    assert [(e["who"], e["action"]) for e in ledger.audit_log("s")] == [("worker a", "config registered")]


@pytest.mark.parametrize(
    "change",
    [
        {"epsilon_budget": 100.0},  # a raised budget (another worker's configuration)
        {"learner_epsilons": [5.0, 5.0], "epsilon_budget": 10.0},
        {"window": {"kind": "count", "size": 50, "seconds": None}},
        {"top_level": 2, "learner_epsilons": [0.3, 0.3, 0.3]},
        {"learner": "proper"},
        {"privacy_unit": "user"},
    ],
    ids=["raised-budget", "epsilon", "window", "top-level", "learner", "privacy-unit"],
)
def test_another_configuration_is_refused_and_changes_nothing(ledger, change) -> None:
    ledger.register_stream("s", budget_of(CONFIG), CONFIG, who="worker a")
    other = {**CONFIG, **change}
    with pytest.raises(ConfigMismatchError, match=r"stream 's'.*privstream ledger accept-config") as refused:
        ledger.register_stream("s", budget_of(other), other, who="worker b")
    assert set(refused.value.differences) == set(change)
    assert ledger.budget("s") == budget_of(CONFIG) and ledger.accepted_config("s") == CONFIG
    assert len(ledger.audit_log("s")) == 1


def test_a_lowered_budget_is_accepted_audited_and_takes_effect_at_once(ledger) -> None:
    ledger.register_stream("s", budget_of(CONFIG), CONFIG)
    lowered = {**CONFIG, "epsilon_budget": 0.6, "learner_epsilons": [0.3, 0.3]}
    ledger.register_stream("s", budget_of(lowered), lowered, who="worker a")
    assert ledger.budget("s") == (0.6, 0.0) and ledger.accepted_config("s") == lowered
    last = ledger.audit_log("s")[-1]
    assert last["action"] == "config lowered" and last["detail"]["old"]["epsilon_budget"] == 1.0


def test_accepting_a_configuration_is_explicit_and_audited(ledger) -> None:
    ledger.register_stream("s", budget_of(CONFIG), CONFIG)
    raised = {**CONFIG, "epsilon_budget": 3.0}
    with pytest.raises(ValueError, match="reason"):
        ledger.accept_config("s", raised, who="alice@host", reason=" ")
    ledger.accept_config("s", raised, who="alice@host", reason="new privacy review, ticket 12")
    assert ledger.budget("s") == (3.0, 0.0)
    ledger.register_stream("s", budget_of(raised), raised)  # the next start passes
    entry = ledger.audit_log("s")[-1]
    assert (entry["who"], entry["action"], entry["reason"]) == (
        "alice@host",
        "config accepted",
        "new privacy review, ticket 12",
    )
    assert entry["detail"] == {"old": CONFIG, "new": raised} and entry["at"].tzinfo is not None


def test_a_stream_registered_before_configurations_were_recorded_cannot_raise_its_budget(ledger) -> None:
    ledger.register_stream("s", PrivacyCost(0.4, 0.0))  # no configuration recorded (an older worker)
    with pytest.raises(ConfigMismatchError, match=r"epsilon_budget 0\.4 -> 1\.0"):
        ledger.register_stream("s", budget_of(CONFIG), CONFIG)
    assert ledger.budget("s") == (0.4, 0.0)


def test_a_budget_lowered_below_the_spend_refuses_the_next_release_at_once(ledger) -> None:
    """Fresh windows included: before, a new window's level-0 node still fit under the lowered
    budget (its examples had spent nothing) and releases went on after "exhausted"."""
    ledger.register_stream("s", PrivacyCost(2.0, 0.0))
    for w in range(2):
        ledger.reserve("s", f"L0-{w}", "m", 0.25, 0.0, NodeRange.of(0, w))
    ledger.reserve("s", "L1-0", "m", 0.25, 0.0, NodeRange.of(1, 0))
    assert ledger.spent("s") == (0.5, 0.0)
    ledger.set_budget("s", 0.4, 0.0)
    with pytest.raises(BudgetExhaustedError):
        ledger.reserve("s", "L0-2", "m", 0.25, 0.0, NodeRange.of(0, 2))
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s", "one-shot", "m", 0.01, 0.0, b"r")
    assert ledger.refusals("s") == 2
    ledger.set_budget("s", 0.5, 0.0)  # back at the spend: fresh windows fit again
    assert ledger.reserve("s", "L0-2", "m", 0.25, 0.0, NodeRange.of(0, 2)).entry_id > 0


def test_entry_ids_never_restart_on_an_adopted_ledger(ledger) -> None:
    seen = [LedgerIdentity("a-lost-ledger", epoch=7, entries=41), LedgerIdentity("older", 2, 12)]
    with pytest.raises(ValueError, match="reason"):
        ledger.adopt(seen, who="alice@host", reason="")
    adopted = ledger.adopt(seen, who="alice@host", reason="the disk of the old ledger died")
    assert adopted.epoch == 8 and adopted.entries == 41
    ledger.register_stream("s", PrivacyCost(1.0, 0.0))
    assert ledger.charge("s", "w0", "m", 0.1, 0.0, b"r").entry_id == 42
    assert ledger.reserve("s", "w1", "m", 0.1, 0.0, NodeRange.of(0, 1)).entry_id == 43
    entry = ledger.audit_log()[-1]
    assert entry["action"] == "ledger adopted" and entry["detail"]["seen"][0]["ledger_id"] == "a-lost-ledger"
    assert ledger.identity().entries == 43 and ledger.predecessors() == {"a-lost-ledger", "older"}


def test_missing_windows_names_what_the_ledger_lacks(ledger) -> None:
    ledger.register_stream("s", PrivacyCost(1.0, 0.0))
    ledger.reserve("s", "w0", "m", 0.1, 0.0, NodeRange.of(0, 0))
    assert ledger.missing_windows("s", ["w1", "w0", "w2", "w1"]) == ["w1", "w2"]
    assert ledger.missing_windows("s", []) == []
