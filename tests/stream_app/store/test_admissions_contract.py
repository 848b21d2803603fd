"""User-level admissions on every backend (SQLite, PostgreSQL): a user's first rows in a window
charge them for every node covering it, once per node, all or nothing, from the deployment-wide
user budget that reservations spend too."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from privstream.agents.ledger_port import NodeRange, PrivacyCost, UnknownStreamError
from tests.stream_app.store.backends import LedgerBackend

BUDGET = PrivacyCost(1.0, 0.0)
#: Three levels (windows 0..3 under one top node), 0.125 per node and level.
COSTS = [(0.125, 0.0)] * 3


@pytest.fixture
def ledger(ledger_backend: LedgerBackend):
    with ledger_backend.open(create=True, budgets={"s": (10.0, 0.0), "t": (10.0, 0.0)}) as opened:
        yield opened


def test_a_first_row_charges_every_node_covering_the_window_once(ledger) -> None:
    assert ledger.admit("s", 2, COSTS, ["a", "b"], user_budget=BUDGET) == ["a", "b"]
    assert ledger.user_spent("a") == (0.375, 0.0)  # nodes (0, 2), (1, 1), (2, 0)
    assert ledger.admit("s", 2, COSTS, ["a", "b"], user_budget=BUDGET) == ["a", "b"]  # idempotent
    assert ledger.user_spent("a") == (0.375, 0.0)
    ledger.admit("s", 3, COSTS, ["a"], user_budget=BUDGET)  # shares (1, 1) and (2, 0) with window 2
    ledger.admit("s", 0, COSTS, ["a"], user_budget=BUDGET)  # shares (2, 0)
    assert ledger.user_spent("a") == (0.75, 0.0) and ledger.user_spent("b") == (0.375, 0.0)
    assert sorted(ledger.admitted("s", 1, 1)) == ["a", "b"] and list(ledger.admitted("s", 1, 0)) == ["a"]
    assert ledger.admitted("s", 2, 0)["a"] == (0.125, 0.0)


def test_a_user_who_cannot_pay_every_node_is_admitted_to_none_and_pays_nothing(ledger) -> None:
    ledger.admit("s", 0, COSTS, ["a"], user_budget=BUDGET)  # 0.375
    ledger.admit("s", 2, COSTS, ["a"], user_budget=BUDGET)  # + 0.25: (0, 2), (1, 1)
    ledger.admit("s", 4, COSTS, ["a"], user_budget=BUDGET)  # + 0.375: a new top node, 1.0 exactly
    assert ledger.user_spent("a") == (1.0, 0.0)
    assert ledger.admit("s", 5, COSTS, ["a", "b"], user_budget=BUDGET) == ["b"]  # a owes (0, 5): 0.125
    assert ledger.user_spent("a") == (1.0, 0.0)
    assert "a" not in ledger.admitted("s", 0, 5)
    assert ledger.admit("s", 4, COSTS, ["a"], user_budget=BUDGET) == ["a"]  # paid already: stands


def test_admissions_and_reservations_spend_one_budget_over_every_stream(ledger) -> None:
    ledger.admit("s", 0, COSTS, ["u"], user_budget=BUDGET)  # 0.375
    ledger.admit("t", 0, COSTS, ["u"], user_budget=BUDGET)  # another stream's nodes: 0.75
    r = ledger.reserve("t", "t60-L0-9", "m", 0.3, 0.0, NodeRange.of(0, 9), users=["u"], user_budget=BUDGET)
    assert r.included_users == frozenset()  # 0.75 + 0.3 would pass 1.0
    assert ledger.admit("s", 1, COSTS, ["u"], user_budget=BUDGET) == ["u"]  # owes (0, 1) only: 0.875
    assert ledger.user_spent("u") == (0.875, 0.0)


def test_a_reservation_naming_no_users_charges_the_stream_only(ledger) -> None:
    """The release path at the user level: users paid at ingest; the node's reservation names no
    users, charges the stream's budget and leaves every user's spend as admission left it."""
    ledger.admit("s", 0, COSTS, ["a", "b"], user_budget=BUDGET)
    spent_before = ledger.spent("s")
    r = ledger.reserve("s", "t60-L0-0", "m", 0.125, 0.0, NodeRange.of(0, 0), user_budget=BUDGET)
    assert r.included_users is None
    assert ledger.reservation("s", "t60-L0-0", "m").included_users is None  # as stored
    assert ledger.user_spent("a") == ledger.user_spent("b") == (0.375, 0.0)
    assert ledger.spent("s").epsilon == pytest.approx(spent_before.epsilon + 0.125)


def test_a_node_whose_charge_grew_is_topped_up_by_the_difference(ledger) -> None:
    ledger.admit("s", 0, [(0.25, 0.0), (0.25, 0.0)], ["a"], user_budget=BUDGET)
    ledger.admit("s", 1, [(0.25, 0.0), (0.375, 0.0)], ["a"], user_budget=BUDGET)  # (0, 1) + 1/8 more
    assert ledger.user_spent("a") == (0.875, 0.0)
    assert ledger.admitted("s", 1, 0)["a"] == (0.375, 0.0)


def test_the_default_user_budget_is_the_streams_and_delta_counts_too(ledger_backend) -> None:
    with ledger_backend.open(create=True, budgets={"s": (1.0, 1e-6)}) as ledger:
        assert ledger.admit("s", 0, [(0.5, 4e-7)], ["a"]) == ["a"]
        assert ledger.admit("s", 1, [(0.1, 4e-7)], ["a"]) == ["a"]
        assert ledger.admit("s", 2, [(0.1, 4e-7)], ["a"]) == []  # delta 1.2e-6 > 1e-6
        assert ledger.user_spent("a") == (0.6, 8e-7)


def test_admitting_checks_its_arguments(ledger) -> None:
    with pytest.raises(UnknownStreamError):
        ledger.admit("nobody", 0, COSTS, ["a"])
    with pytest.raises(TypeError):
        ledger.admit("s", 0, COSTS, ["a", 3])
    with pytest.raises(ValueError):
        ledger.admit("s", -1, COSTS, ["a"])
    with pytest.raises(ValueError):
        ledger.admit("s", 0, [], ["a"])
    assert ledger.user_spent("a") == (0.0, 0.0)


def test_spends_equal_what_the_admissions_record_and_never_pass_the_budget(ledger) -> None:
    rng = random.Random(5)
    population = [f"user-{i}" for i in range(300)]  # more than one batch of look-ups
    refused = 0
    for _ in range(40):
        stream, window = rng.choice(["s", "t"]), rng.randrange(0, 16)
        present = rng.sample(population, rng.randrange(0, 300))
        costs = [(rng.randrange(1, 8) / 32, 0.0) for _ in range(3)]
        admitted = ledger.admit(stream, window, costs, present, user_budget=BUDGET)
        assert set(admitted) <= set(present) and admitted == [u for u in present if u in set(admitted)]
        refused += len(present) - len(admitted)
    paid = {user: Fraction(0) for user in population}
    for stream in ("s", "t"):
        for level in range(3):
            for index in range(16 >> level):
                for user, cost in ledger.admitted(stream, level, index).items():
                    paid[user] += Fraction(cost.epsilon)
    for user, total in paid.items():
        assert ledger.user_spent(user).epsilon == float(total) and total <= 1
    assert refused > 0  # the filter was exercised
