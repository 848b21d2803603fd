"""The release path's ledger contract, on every backend (SQLite, PostgreSQL):
reserve before the learner runs (seed, node range, lifetime per example), complete (first bytes
win), the outbox and ``incomplete()``, and the individual user filter shared by all streams."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    NodeRange,
    PrivacyCost,
    Reservation,
    UnknownEntryError,
)
from tests.stream_app.store.backends import LedgerBackend


@pytest.fixture
def ledger(ledger_backend: LedgerBackend):
    with ledger_backend.open(create=True, budgets={"s": (1.0, 1e-5)}) as opened:
        yield opened


def node(level: int, index: int) -> NodeRange:
    return NodeRange.of(level, index)


# --------------------------------------------------------------------------- reserve / complete


def test_a_reservation_is_charged_with_a_secret_seed_before_its_release_exists(ledger) -> None:
    r = ledger.reserve("s", "c2-L0-0", "learner:x", 0.25, 1e-6, node(0, 0))

    assert isinstance(r, Reservation)
    assert (r.stream_id, r.window_id, r.mechanism, r.cost, r.node) == (
        "s",
        "c2-L0-0",
        "learner:x",
        (0.25, 1e-6),
        NodeRange(0, 0, 0),
    )
    assert len(r.seed) == 32 and r.release is None and not r.published and r.included_users is None
    assert r.lifetime.spent_per_example == (0.25, 1e-6) and r.lifetime.releases_per_level == {0: 1}
    assert r.seed.hex() not in repr(r)  # the seed is a secret
    assert ledger.spent("s") == (0.25, 1e-6)  # charged already
    assert [x.entry_id for x in ledger.incomplete()] == [r.entry_id]
    assert ledger.incomplete("other") == []
    assert ledger.unpublished() == [] and ledger.lookup("s", "c2-L0-0", "learner:x") is None
    assert ledger.reservation("s", "c2-L0-0", "learner:x") == r


def test_seeds_are_distinct_per_reservation(ledger) -> None:
    seeds = {ledger.reserve("s", f"L0-{w}", "m", 0.01, 0.0, node(0, w)).seed for w in range(20)}
    assert len(seeds) == 20


def test_reserving_a_key_again_returns_the_stored_reservation_unchanged(ledger) -> None:
    first = ledger.reserve("s", "t60-L0-3", "m", 0.5, 0.0, node(0, 3), users=["a", "b"])
    again = ledger.reserve("s", "t60-L0-3", "m", 0.5, 0.0, node(0, 3), users=["c", "d", "e"])

    assert again == first  # same entry, seed, included users, lifetime figures
    assert again.included_users == frozenset({"a", "b"})
    assert ledger.user_spent("c") == (0.0, 0.0) and ledger.user_spent("a") == (0.5, 0.0)
    assert ledger.spent("s") == (0.5, 0.0) and ledger.lifetime("s").releases == 1


def test_complete_stores_the_first_bytes_and_fills_the_outbox(ledger) -> None:
    r = ledger.reserve("s", "L1-0", "learner:x", 0.25, 0.0, node(1, 0))

    charge = ledger.complete(r.entry_id, b"first")
    again = ledger.complete(r.entry_id, b"second")

    assert charge.release == again.release == b"first"
    assert (charge.entry_id, charge.node, charge.level) == (r.entry_id, node(1, 0), 1)
    assert charge.cost == (0.25, 0.0)
    assert ledger.incomplete() == []
    assert [c.entry_id for c in ledger.unpublished()] == [r.entry_id]
    assert ledger.lookup("s", "L1-0", "learner:x") == charge
    stored = ledger.reservation("s", "L1-0", "learner:x")
    assert (stored.release, stored.seed, stored.completed) == (b"first", r.seed, True)
    ledger.mark_published(r.entry_id)
    assert ledger.unpublished() == [] and ledger.reservation("s", "L1-0", "learner:x").published
    assert [c.entry_id for c in ledger.entries("s")] == [r.entry_id]
    with pytest.raises(UnknownEntryError):
        ledger.complete(r.entry_id + 100, b"x")


def test_reservations_survive_reopening(ledger_backend: LedgerBackend, ledger) -> None:
    r = ledger.reserve("s", "t60-L2-0", "m", 0.125, 0.0, node(2, 0), users=["u1", "u2"])
    ledger.close()
    with ledger_backend.open() as reopened:
        (stored,) = reopened.incomplete("s")
        assert stored == r
        assert reopened.lifetime("s") == r.lifetime
        assert reopened.user_spent("u2") == (0.125, 0.0)


def test_register_stream_fixes_the_registration_time(ledger) -> None:
    first = ledger.register_stream("new", PrivacyCost(2.0, 0.0))
    assert ledger.register_stream("new", PrivacyCost(3.0, 0.0)) == first
    assert ledger.budget("new") == (3.0, 0.0)
    assert isinstance(first, float) and first > 1.7e9


def test_latest_published_by_level(ledger) -> None:
    ids = {}
    for level, index in [(0, 0), (0, 1), (1, 0), (0, 2)]:
        r = ledger.reserve("s", f"L{level}-{index}", "learner:x", 0.01, 0.0, node(level, index))
        ledger.complete(r.entry_id, f"{level}-{index}".encode())
        ids[level, index] = r.entry_id
    for key in [(0, 0), (0, 1), (1, 0)]:
        ledger.mark_published(ids[key])
    assert ledger.latest_published("s", "learner:", level=0).entry_id == ids[0, 1]
    assert ledger.latest_published("s", "learner:", level=1).entry_id == ids[1, 0]
    assert ledger.latest_published("s", level=2) is None
    assert ledger.latest_published("s").entry_id == ids[1, 0]


# --------------------------------------------------------------------------- lifetime per example


def test_a_charge_beyond_a_windows_lifetime_is_refused_and_recorded(ledger) -> None:
    ledger.reserve("s", "L0-1", "m", 0.5, 0.0, node(0, 1))
    ledger.reserve("s", "L0-2", "m", 0.75, 0.0, node(0, 2))  # disjoint windows compose in parallel
    ledger.reserve("s", "L1-1", "m", 0.25, 0.0, node(1, 1))  # windows 2, 3: 0.75 + 0.25 = 1 fits

    with pytest.raises(BudgetExhaustedError) as refused:
        ledger.reserve("s", "L2-0", "m", 0.01, 0.0, node(2, 0))  # window 2 would pass 1.0
    assert refused.value.spent == (1.0, 0.0) and refused.value.requested == (0.01, 0.0)
    assert ledger.refusals("s") == 1 and ledger.lifetime("s").refusals == 1
    assert ledger.reservation("s", "L2-0", "m") is None
    # Windows 0 and 1 (node (1, 0)) still have room; window 1 has 0.5 left.
    ledger.reserve("s", "L1-0", "m", 0.5, 0.0, node(1, 0))
    assert ledger.spent("s") == (1.0, 0.0) and ledger.remaining("s") == (0.0, 1e-5)
    with pytest.raises(BudgetExhaustedError):
        ledger.reserve("s", "L0-1-again", "m", 0.01, 0.0, node(0, 1))  # window 1: 0.5 + 0.5 is full
    ledger.reserve("s", "L0-0", "m", 0.5, 0.0, node(0, 0))  # window 0: 0.5 + 0.5 fits exactly
    assert ledger.refusals("s") == 2


def test_delta_is_a_lifetime_budget_per_example_too(ledger) -> None:
    ledger.reserve("s", "L0-0", "m", 0.0, 6e-6, node(0, 0))
    ledger.reserve("s", "L0-1", "m", 0.0, 6e-6, node(0, 1))
    with pytest.raises(BudgetExhaustedError):
        ledger.reserve("s", "L1-0", "m", 0.0, 5e-6, node(1, 0))
    assert ledger.lifetime("s").spent_per_example == (0.0, 6e-6)


def test_a_valid_tree_of_64_windows_and_6_levels_is_accepted_for_ever(ledger_backend: LedgerBackend) -> None:
    # Lifetime budget 0.6 per example, 0.1 per level for levels 0..5: every node fits, exactly.
    with ledger_backend.open(create=True, budgets={"s": (0.6, 0.0)}) as ledger:
        for w in range(64):
            ledger.reserve("s", f"L0-{w}", "m", 0.1, 0.0, node(0, w))
            for level in range(1, 6):  # a node is charged when its last window closes
                if (w + 1) % (1 << level) == 0:
                    m = w >> level
                    ledger.reserve("s", f"L{level}-{m}", "m", 0.1, 0.0, node(level, m))
        figures = ledger.lifetime("s")
        assert figures.spent_per_example == (0.6, 0.0)
        assert figures.releases_per_level == {0: 64, 1: 32, 2: 16, 3: 8, 4: 4, 5: 2}
        assert figures.refusals == 0
        # The per-example spend is the max over windows, not the sum of 126 charges.
        with pytest.raises(BudgetExhaustedError):
            ledger.reserve("s", "extra", "m", 1e-9, 0.0, node(0, 17))
        ledger.reserve("s", "L0-64", "m", 0.1, 0.0, node(0, 64))  # the next window starts afresh


def test_lifetime_accounting_matches_a_window_by_window_model(ledger_backend: LedgerBackend) -> None:
    # Random nodes (any levels, any order) against a brute-force array of per-window costs.
    rng = random.Random(17)
    budget = Fraction(1)
    cost = [Fraction(0)] * 64
    with ledger_backend.open(create=True, budgets={"s": (1.0, 0.0)}) as ledger:
        for i in range(150):
            level = rng.randrange(0, 7)
            index = rng.randrange(0, 64 >> level)
            eps = Fraction(rng.randrange(1, 40), 100)
            n = node(level, index)
            fits = max(cost[n.first_window : n.last_window + 1]) + eps <= budget
            try:
                ledger.reserve("s", f"n{i}", "m", float(eps), 0.0, n)
                accepted = True
            except BudgetExhaustedError:
                accepted = False
            assert accepted == fits, (i, n, eps)
            if accepted:
                for w in range(n.first_window, n.last_window + 1):
                    cost[w] += eps
            assert ledger.spent("s").epsilon == float(max(cost))


def test_a_one_shot_charge_counts_against_every_window(ledger) -> None:
    ledger.charge("s", "offline", "laplace", 0.5, 0.0, b"r")
    ledger.reserve("s", "L0-900", "m", 0.5, 0.0, node(0, 900))
    with pytest.raises(BudgetExhaustedError):
        ledger.reserve("s", "L0-901", "m", 0.51, 0.0, node(0, 901))
    with pytest.raises(BudgetExhaustedError):
        ledger.charge("s", "offline-2", "laplace", 0.01, 0.0, b"r")  # window 900 is full
    assert ledger.lifetime("s").releases_per_level == {None: 1, 0: 1}


# --------------------------------------------------------------------------- the individual filter


def test_a_user_in_every_window_stops_being_charged_exactly_at_the_budget(ledger) -> None:
    # User budget 1.0, 0.3 per window: u is used in windows 0..2 (0.9), excluded from window 3 on.
    included = []
    for w in range(6):
        present = ["u", f"once-{w}"]
        r = ledger.reserve(
            "s", f"L0-{w}", "m", 0.3, 0.0, node(0, w), users=present, user_budget=PrivacyCost(1.0, 0.0)
        )
        included.append("u" in r.included_users)
        assert f"once-{w}" in r.included_users
    assert included == [True, True, True, False, False, False]
    assert ledger.user_spent("u") == (0.9, 0.0)
    assert all(ledger.user_spent(f"once-{w}") == (0.3, 0.0) for w in range(6))


def test_exact_budget_is_reachable_and_absent_users_pay_nothing(ledger) -> None:
    for w in range(4):
        users = ["a"] + (["b"] if w == 2 else [])
        ledger.reserve(
            "s", f"L0-{w}", "m", 0.25, 0.0, node(0, w), users=users, user_budget=PrivacyCost(1.0, 0.0)
        )
    assert ledger.user_spent("a") == (1.0, 0.0)  # 4 x 0.25 fits 1.0 exactly (exact arithmetic)
    assert ledger.user_spent("b") == (0.25, 0.0)
    assert ledger.user_spent("never-seen") == (0.0, 0.0)


def test_a_user_in_two_streams_pays_from_one_budget(ledger) -> None:
    ledger.set_budget("other", 5.0, 0.0)
    budget = PrivacyCost(1.0, 0.0)
    a = ledger.reserve("s", "t60-L0-0", "m", 0.6, 0.0, node(0, 0), users=["u", "v"], user_budget=budget)
    b = ledger.reserve("other", "t60-L0-0", "m", 0.6, 0.0, node(0, 0), users=["u", "w"], user_budget=budget)
    assert a.included_users == {"u", "v"} and b.included_users == {"w"}
    assert ledger.user_spent("u") == (0.6, 0.0)


def test_the_user_delta_budget_is_enforced_too(ledger) -> None:
    budget = PrivacyCost(10.0, 1e-6)
    first = ledger.reserve("s", "L0-0", "m", 0.1, 6e-7, node(0, 0), users=["u"], user_budget=budget)
    second = ledger.reserve("s", "L0-1", "m", 0.1, 6e-7, node(0, 1), users=["u"], user_budget=budget)
    assert first.included_users == {"u"} and second.included_users == frozenset()
    assert ledger.user_spent("u") == (0.1, 6e-7)


def test_per_user_spends_equal_the_sum_over_the_reservations_that_included_them(ledger_backend) -> None:
    rng = random.Random(3)
    population = [f"user-{i}" for i in range(40)]
    budget = PrivacyCost(1.0, 0.0)
    with ledger_backend.open(create=True, budgets={"s": (50.0, 0.0), "t": (50.0, 0.0)}) as ledger:
        reservations = []
        excluded = 0
        for i in range(60):
            stream = rng.choice(["s", "t"])
            users = rng.sample(population, rng.randrange(0, 15))
            eps = Fraction(rng.randrange(1, 30), 100)
            r = ledger.reserve(
                stream, f"L0-{i}", "m", float(eps), 0.0, node(0, i), users=users, user_budget=budget
            )
            assert r.included_users <= set(users)
            excluded += len(users) - len(r.included_users)
            reservations.append((eps, r))
        for user in population:
            total = sum((eps for eps, r in reservations if user in r.included_users), Fraction(0))
            assert ledger.user_spent(user).epsilon == float(total)
            assert total <= 1
        # Somebody was excluded at some point (the test exercises the filter).
        assert excluded > 0


def test_users_must_be_strings(ledger) -> None:
    with pytest.raises(TypeError):
        ledger.reserve("s", "L0-0", "m", 0.1, 0.0, node(0, 0), users=["a", 7])
    with pytest.raises(TypeError):
        ledger.reserve("s", "L0-0", "m", 0.1, 0.0, (0, 0, 0))
    assert ledger.lifetime("s").releases == 0


# --------------------------------------------------------------------------- migration from version 1


def test_a_version_1_ledger_is_upgraded_and_its_charges_count_against_every_window(
    ledger_backend: LedgerBackend,
) -> None:
    ledger_backend.write_version_1("s", "1", [("w0", "3/10"), ("w1", "1/5")])

    with ledger_backend.open() as ledger:  # opening upgrades it (one transaction)
        old = ledger.entries("s")
        assert [(c.window_id, c.epsilon, c.release, c.node) for c in old] == [
            ("w0", 0.3, b"w0", None),
            ("w1", 0.2, b"w1", None),
        ]
        assert [c.entry_id for c in ledger.unpublished()] == [c.entry_id for c in old]
        assert ledger.incomplete() == []
        assert ledger.spent("s") == (0.5, 0.0)
        assert ledger.lifetime("s").releases_per_level == {None: 2}
        assert ledger.register_stream("s", PrivacyCost(1.0, 0.0)) == 1767323045.0  # first budget change
        # The old 0.5 is a cost of every window, of any index: 0.5 more fits, 0.51 does not.
        for w in (0, 10**6):
            with pytest.raises(BudgetExhaustedError):
                ledger.reserve("s", f"L0-{w}", "m", 0.51, 0.0, node(0, w))
            ledger.reserve("s", f"L0-{w}", "m", 0.5, 0.0, node(0, w))
        assert ledger.spent("s") == (1.0, 0.0)
    with ledger_backend.open() as ledger:  # already upgraded: opens as is
        assert ledger.spent("s") == (1.0, 0.0) and len(ledger.entries("s")) == 2
        assert len(ledger.incomplete("s")) == 2


def test_user_ids_of_any_characters_are_charged_and_returned_exactly(ledger) -> None:
    odd = ["tab\there", "new\nline", "back\\slash", "\\N", "cr\rlf", "ünï ✓", "'quote\"", "a,b"]
    r = ledger.reserve("s", "L0-0", "m", 0.5, 0.0, node(0, 0), users=odd, user_budget=PrivacyCost(0.9, 0.0))
    assert r.included_users == set(odd) and ledger.reservation("s", "L0-0", "m").included_users == set(odd)
    assert all(ledger.user_spent(u) == (0.5, 0.0) for u in odd)
    again = ledger.reserve(
        "s", "L0-1", "m", 0.5, 0.0, node(0, 1), users=[*odd, "fresh"], user_budget=PrivacyCost(0.9, 0.0)
    )
    assert again.included_users == {"fresh"}
    with pytest.raises(TypeError):
        ledger.reserve("s", "L0-2", "m", 0.1, 0.0, node(0, 2), users=["nul\x00"])


def test_a_user_included_now_is_not_mistaken_for_an_excluded_one(ledger) -> None:
    # a (spent 0.25) is included and reaches 0.75; b (spent 0.75) is excluded: after the release
    # both have spent 0.75, and only b was left out.
    budget = PrivacyCost(1.0, 0.0)
    ledger.reserve("s", "L0-0", "m", 0.25, 0.0, node(0, 0), users=["a", "b"], user_budget=budget)
    ledger.reserve("s", "L0-1", "m", 0.5, 0.0, node(0, 1), users=["b"], user_budget=budget)
    r = ledger.reserve("s", "L0-2", "m", 0.5, 0.0, node(0, 2), users=["a", "b", "c"], user_budget=budget)
    assert r.included_users == {"a", "c"}
    assert ledger.user_spent("a") == ledger.user_spent("b") == (0.75, 0.0)
