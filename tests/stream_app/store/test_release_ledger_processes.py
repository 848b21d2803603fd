"""The release path across processes (both backends): a worker SIGKILLed while a node's learner
runs leaves a reservation that the restarted worker recomputes with the same seed (no node charged
twice, per-user spends equal to the sum of the reservations that charged them), and two processes
charging the same users never take a user past their budget."""

from __future__ import annotations

import multiprocessing as mp
from fractions import Fraction

from privstream.agents.ledger_port import NodeRange, PrivacyCost
from tests.stream_app.store.backends import LedgerBackend, open_ledger_from_spec
from tests.stream_app.store.test_ledger_crash import _kill, _read_charged, _start

USERS = [f"u{i}" for i in range(5)]

# The worker: reserve one user-level node, say so, then "run the learner" for ever (killed there).
RESERVE_THEN_HANG = """
import time
from privstream.agents.ledger_port import NodeRange, PrivacyCost
from tests.stream_app.store.backends import open_ledger_from_spec

ledger = open_ledger_from_spec()
r = ledger.reserve("s", "t60-L1-0", "learner:x", 0.25, 0.0, NodeRange.of(1, 0), users=["a", "b"],
                   user_budget=PrivacyCost(1.0, 0.0))
print("charged", r.entry_id, flush=True)
time.sleep(600)  # killed here, while the learner runs
"""

# The worker: reserve and complete nodes of a user-level stream as fast as it can; killed somewhere.
RESERVE_FOREVER = """
from privstream.agents.ledger_port import NodeRange, PrivacyCost
from tests.stream_app.store.backends import open_ledger_from_spec

ledger = open_ledger_from_spec()
for w in range(10**9):
    users = [f"u{(w + i) % 7}" for i in range(3)]
    r = ledger.reserve("s", f"t60-L0-{w}", "m", 0.05, 0.0, NodeRange.of(0, w), users=users,
                       user_budget=PrivacyCost(1.0, 0.0))
    print("charged", r.entry_id, flush=True)
    ledger.complete(r.entry_id, r.seed)
"""


def test_a_node_interrupted_mid_release_is_recomputed_with_its_seed_and_charged_once(
    ledger_backend: LedgerBackend,
) -> None:
    ledger_backend.open(create=True, budgets={"s": (1.0, 0.0)}).close()

    worker = _start(ledger_backend, RESERVE_THEN_HANG)
    entry_id = _read_charged(worker)
    _kill(worker)

    with ledger_backend.open() as ledger:  # the restarted worker
        (pending,) = ledger.incomplete()
        assert (pending.entry_id, pending.window_id) == (entry_id, "t60-L1-0")
        assert pending.included_users == {"a", "b"}
        # The schedule reserves the node again: the same reservation, nothing charged twice.
        again = ledger.reserve("s", "t60-L1-0", "learner:x", 0.25, 0.0, NodeRange.of(1, 0), users=["a", "c"])
        assert again == pending
        release = b"recomputed from " + pending.seed  # stands for the learner run on derived(seed)
        ledger.complete(entry_id, release)
        assert ledger.incomplete() == [] and [c.release for c in ledger.unpublished()] == [release]
        assert ledger.spent("s") == (0.25, 0.0) and ledger.lifetime("s").releases == 1
        assert [ledger.user_spent(u) for u in "abc"] == [(0.25, 0.0), (0.25, 0.0), (0.0, 0.0)]


def test_a_worker_killed_while_reserving_leaves_consistent_user_spends(ledger_backend: LedgerBackend) -> None:
    ledger_backend.open(create=True, budgets={"s": (1.0, 0.0)}).close()

    worker = _start(ledger_backend, RESERVE_FOREVER)
    reported = [_read_charged(worker) for _ in range(40)]
    _kill(worker)

    with ledger_backend.open() as ledger:
        completed = ledger.entries("s")
        pending = ledger.incomplete("s")
        ids = sorted([c.entry_id for c in completed] + [r.entry_id for r in pending])
        assert ids[: len(reported)] == reported and len(pending) <= 1
        reservations = [ledger.reservation("s", c.window_id, c.mechanism) for c in completed] + pending
        for user in [f"u{i}" for i in range(7)]:
            total = sum(Fraction(1, 20) for r in reservations if user in r.included_users)
            assert ledger.user_spent(user).epsilon == float(total) and total <= 1
        # Every stored release is the one computed from its own reservation's seed.
        assert all(r.seed == c.release for r, c in zip(reservations, completed, strict=False))


def _reserve_for_users(spec: str, stream: str, start, results) -> None:  # pragma: no cover
    try:
        start.wait()
        with open_ledger_from_spec(spec) as ledger:
            included = {user: 0 for user in USERS}
            for w in range(30):
                r = ledger.reserve(
                    stream,
                    f"t60-L0-{w}",
                    "m",
                    0.1,
                    0.0,
                    NodeRange.of(0, w),
                    users=USERS,
                    user_budget=PrivacyCost(1.0, 0.0),
                )
                for user in r.included_users:
                    included[user] += 1
        results.put(included)
    except BaseException as exc:
        results.put(exc)


def test_two_processes_charging_the_same_users_never_exceed_a_users_budget(
    ledger_backend: LedgerBackend,
) -> None:
    ledger_backend.open(create=True, budgets={"a": (10.0, 0.0), "b": (10.0, 0.0)}).close()
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    children = [
        ctx.Process(target=_reserve_for_users, args=(ledger_backend.spec(), stream, start, results))
        for stream in ("a", "b")
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes

    # 60 reservations of 0.1 offered to each user; the budget of 1.0 allows exactly 10 of them.
    for user in USERS:
        assert sum(o[user] for o in outcomes) == 10
    with ledger_backend.open() as ledger:
        assert all(ledger.user_spent(user) == (1.0, 0.0) for user in USERS)
        assert ledger.lifetime("a").releases == ledger.lifetime("b").releases == 30
