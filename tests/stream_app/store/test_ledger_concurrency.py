"""Several processes charging one ledger at once never overspend or double-charge a key (both backends)."""

from __future__ import annotations

import multiprocessing as mp
import random

from privstream.agents.ledger_port import BudgetExhaustedError
from tests.stream_app.store.backends import LedgerBackend, open_ledger_from_spec

PROCESSES = 4
ATTEMPTS = 60  # per process
EPSILON = 0.1
BUDGET = 15.0
ALLOWED = 150  # the budget allows exactly this many charges of EPSILON (the ledger sums decimals exactly)


def _charge_windows(spec: str, windows: list[str], start, results, create: bool) -> None:  # pragma: no cover
    """Child process: charge each window, checking after every step that the spend stays in budget."""
    try:
        results.put(_charge_in_child(spec, windows, start, create))
    except BaseException as exc:  # report it: the parent must not wait for a result that never comes
        results.put(exc)


def _charge_in_child(
    spec: str, windows: list[str], start, create: bool
) -> tuple[list[tuple[str, int]], int, bool]:
    start.wait()  # a barrier: all children open and charge together, once all are ready
    with open_ledger_from_spec(spec, create=create, budgets={"s": (BUDGET, 0.0)}) as ledger:
        charged: list[tuple[str, int]] = []
        refused = 0
        overspent = False
        for window in windows:
            try:
                charge = ledger.charge("s", window, "laplace", EPSILON, 0.0, f"release {window}".encode())
                charged.append((window, charge.entry_id))
            except BudgetExhaustedError:
                refused += 1
            overspent |= ledger.spent("s").epsilon > BUDGET
    return charged, refused, overspent


def _run(
    backend: LedgerBackend, windows_per_process: list[list[str]], *, create: bool = False
) -> list[tuple[list[tuple[str, int]], int, bool]]:
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(len(windows_per_process))
    results = ctx.Queue()
    children = [
        ctx.Process(target=_charge_windows, args=(backend.spec(), windows, start, results, create))
        for windows in windows_per_process
    ]
    for child in children:
        child.start()
    # Read before joining: a child blocks on exit until its queued result is consumed.
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert not errors
    assert [child.exitcode for child in children] == [0] * len(children)
    return outcomes


def test_concurrent_distinct_windows_spend_exactly_the_budget(ledger_backend: LedgerBackend) -> None:
    ledger_backend.open(create=True, budgets={"s": (BUDGET, 0.0)}).close()
    windows = [[f"p{p}-w{i}" for i in range(ATTEMPTS)] for p in range(PROCESSES)]

    outcomes = _run(ledger_backend, windows)

    charged = [item for successes, _, _ in outcomes for item in successes]
    assert len(charged) == ALLOWED
    assert sum(refused for _, refused, _ in outcomes) == PROCESSES * ATTEMPTS - ALLOWED
    assert not any(overspent for _, _, overspent in outcomes)
    with ledger_backend.open() as ledger:
        entries = ledger.entries("s")
        assert sorted((c.window_id, c.entry_id) for c in entries) == sorted(charged)
        assert len({(c.window_id, c.mechanism) for c in entries}) == ALLOWED
        assert len({c.entry_id for c in entries}) == ALLOWED
        assert ledger.spent("s") == (BUDGET, 0.0)
        assert ledger.remaining("s") == (0.0, 0.0)
        assert ledger.refusals("s") == PROCESSES * ATTEMPTS - ALLOWED
        assert all(c.release == f"release {c.window_id}".encode() for c in entries)


def test_concurrent_charges_of_the_same_windows_charge_each_once(ledger_backend: LedgerBackend) -> None:
    # Every process replays the same windows (as after a rebalance), each in its own order.
    ledger_backend.open(create=True, budgets={"s": (BUDGET, 0.0)}).close()
    shared = [f"w{i}" for i in range(ATTEMPTS)]  # fewer than ALLOWED: all must succeed
    orders = [random.Random(p).sample(shared, len(shared)) for p in range(PROCESSES)]

    outcomes = _run(ledger_backend, orders)

    assert all(refused == 0 and not overspent for _, refused, overspent in outcomes)
    with ledger_backend.open() as ledger:
        entries = ledger.entries("s")
        assert sorted(c.window_id for c in entries) == sorted(shared)
        # Every process got the same entry for the same window: one charge per key.
        by_window = {c.window_id: c.entry_id for c in entries}
        for successes, _, _ in outcomes:
            assert dict(successes) == by_window
        assert ledger.spent("s").epsilon == ATTEMPTS * EPSILON
        assert len(ledger.unpublished()) == ATTEMPTS


def test_workers_creating_the_ledger_at_once_share_one_ledger(ledger_backend: LedgerBackend) -> None:
    # A first start of several workers, all allowed to create the ledger, with the same budgets.
    windows = [[f"p{p}-w{i}" for i in range(5)] for p in range(PROCESSES)]

    outcomes = _run(ledger_backend, windows, create=True)

    assert all(len(charged) == 5 and refused == 0 for charged, refused, _ in outcomes)
    with ledger_backend.open() as ledger:
        assert len(ledger.entries("s")) == 5 * PROCESSES
        assert ledger.spent("s").epsilon == 5 * PROCESSES * EPSILON
    assert ledger_backend.budget_history() == ["15"]  # recorded once, not once per worker
