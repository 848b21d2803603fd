"""The ledger's decisions about numbers: validation, exact arithmetic, the budget check, the filter.

The ledger (:mod:`.ledger`) moves rows through its backends; every decision about numbers is
made here, once, so every backend refuses and accepts exactly the same charges.

**Exact arithmetic.** Numbers are read as the shortest decimal that round-trips the float
(``0.1`` means 1/10) and summed as exact rationals, stored as text (``"3/10"``), so ten charges of
0.1 spend exactly 1.0 and ``0.1 + 0.2`` fits a budget of ``0.3``.

>>> budget = StreamBudget(exact(0.3, "epsilon"), Fraction(0), Fraction(0), Fraction(0))
>>> budget = budget.spend(exact(0.1, "epsilon"), Fraction(0))
>>> budget.allows(exact(0.2, "epsilon"), Fraction(0)), budget.allows(exact(0.21, "epsilon"), Fraction(0))
(True, False)
>>> budget.remaining
PrivacyCost(epsilon=0.2, delta=0.0)

**Lifetime per example.** A charge of a node covers a range of level-0 windows; an
example's lifetime cost is the sum of the charges covering its window. A backend keeps, per
stream, ``unranged`` (the sum of charges without a node range: a cost of *every* window, the safe
reading of a one-shot or schema-1 charge) and ``peak`` (the max over windows of the ranged
charges covering it); it reads the ranged charges overlapping a new node and :func:`window_peak`
gives their largest sum over one window of the node. :class:`LifetimeState` decides.

>>> rows = [(0, 3, "1/4", "0"), (0, 1, "1/8", "0"), (2, 3, "1/8", "0"), (2, 2, "1/16", "0")]
>>> window_peak(rows, 0, 3)   # window 2: 1/4 + 1/8 + 1/16
(Fraction(7, 16), Fraction(0, 1))
>>> state = LifetimeState(Fraction(1, 2), Fraction(0), Fraction(0), Fraction(0), Fraction(7, 16), Fraction(0))
>>> state.allows_node(window_peak(rows, 2, 2), exact(0.0625, "epsilon"), Fraction(0))
True
>>> state.allows_node(window_peak(rows, 2, 2), exact(0.0626, "epsilon"), Fraction(0))
False

**The individual filter.** :func:`spend_after` decides what a user's stored spend becomes under
a user-level release (or that the user is excluded); :func:`filter_users` applies it to the users
of a release, once per distinct spend.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    LedgerCorruptError,
    LifetimeFigures,
    NodeRange,
    PrivacyCost,
)

__all__ = [
    "NO_SPEND",
    "SEED_BYTES",
    "ChargeRequest",
    "LifetimeState",
    "Spend",
    "StreamBudget",
    "UserFilter",
    "budget_change",
    "check_name",
    "check_node",
    "check_spends",
    "check_users",
    "exact",
    "filter_users",
    "lifetime_from_json",
    "lifetime_to_json",
    "pack_users",
    "release_bytes_of",
    "spend_after",
    "unpack_users",
    "visible_figures",
    "window_peak",
]

log = logging.getLogger("privstream.stream_app.store.ledger")

#: Bytes of secret randomness drawn per reservation (the seed of its derived randomness).
SEED_BYTES = 32

Release = bytes | Callable[[ChargeReceipt], bytes]


def exact(value: float | Fraction | Decimal, name: str, *, upper: Fraction | None = None) -> Fraction:
    """The exact rational a user means by ``value``: floats by their shortest decimal repr.

    >>> exact(0.1, "epsilon") + exact(0.2, "epsilon") == exact(0.3, "epsilon")
    True
    """
    if isinstance(value, bool) or not isinstance(value, float | numbers.Real | Decimal):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, numbers.Rational):  # int, Fraction, numpy integers: already exact
        result = Fraction(int(value.numerator), int(value.denominator))
    else:
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
        # float.__repr__ is the shortest decimal that round-trips (0.1 -> "0.1" -> 1/10); it is
        # called unbound so float subclasses (numpy.float64) do not bring their own repr.
        result = Fraction(value) if isinstance(value, Decimal) else Fraction(float.__repr__(float(value)))
    if result < 0 or (upper is not None and result > upper):
        bound = f"in [0, {upper}]" if upper is not None else ">= 0"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return result


def check_name(value: str, name: str) -> str:
    """A stream, window or mechanism id: a non-empty str."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty str, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ChargeRequest:
    """A validated :meth:`~privstream.agents.ledger_port.PrivacyLedger.charge` call."""

    stream_id: str
    window_id: str
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    release: Release

    @classmethod
    def validate(
        cls, stream_id: str, window_id: str, mechanism: str, epsilon: float, delta: float, release: Release
    ) -> ChargeRequest:
        """Check every argument before anything is stored (TypeError/ValueError otherwise)."""
        key = (
            check_name(stream_id, "stream_id"),
            check_name(window_id, "window_id"),
            check_name(mechanism, "mechanism"),
        )
        eps = exact(epsilon, "epsilon")
        dlt = exact(delta, "delta", upper=Fraction(1))
        if not (callable(release) or isinstance(release, bytes | bytearray | memoryview)):
            raise TypeError(f"release_bytes must be bytes, got {type(release).__name__}")
        return cls(*key, eps, dlt, release)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.stream_id, self.window_id, self.mechanism

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(float(self.epsilon), float(self.delta))

    def refusal(self, stream: StreamBudget) -> BudgetExhaustedError:
        return BudgetExhaustedError(*self.key, self.cost, stream.spent, stream.budget)

    def replayed(self, existing: Charge) -> Charge:
        """The answer to a charge of a key charged before: the stored charge, nothing spent."""
        if existing.cost != self.cost:
            log.warning(
                "ledger key %r was charged %s before; asked again with %s: returning the "
                "stored charge, nothing spent",
                self.key,
                existing.cost,
                self.cost,
            )
        return existing


def release_bytes_of(release: Release, receipt: ChargeReceipt) -> bytes:
    """The bytes to store: ``release`` itself, or what the release function makes of the receipt."""
    if callable(release):
        release = release(receipt)
        if not isinstance(release, bytes | bytearray | memoryview):
            raise TypeError("the release function must return bytes")
    return bytes(release)


@dataclass(frozen=True, slots=True)
class StreamBudget:
    """A stream's stored budget and spend, as exact rationals."""

    epsilon_budget: Fraction
    delta_budget: Fraction
    epsilon_spent: Fraction
    delta_spent: Fraction

    @classmethod
    def from_text(cls, *values: str) -> StreamBudget:
        """From the four stored text columns (budget, then spend)."""
        return cls(*(Fraction(v) for v in values))

    @property
    def budget(self) -> PrivacyCost:
        return PrivacyCost(float(self.epsilon_budget), float(self.delta_budget))

    @property
    def spent(self) -> PrivacyCost:
        return PrivacyCost(float(self.epsilon_spent), float(self.delta_spent))

    @property
    def remaining(self) -> PrivacyCost:
        # A budget lowered below the spend leaves nothing, not a negative remainder.
        return PrivacyCost(
            float(max(self.epsilon_budget - self.epsilon_spent, Fraction(0))),
            float(max(self.delta_budget - self.delta_spent, Fraction(0))),
        )

    def allows(self, epsilon: Fraction, delta: Fraction) -> bool:
        return (
            self.epsilon_spent + epsilon <= self.epsilon_budget
            and self.delta_spent + delta <= self.delta_budget
        )

    def spend(self, epsilon: Fraction, delta: Fraction) -> StreamBudget:
        """The budget after a charge of (epsilon, delta) (the caller checked :meth:`allows`)."""
        return StreamBudget(
            self.epsilon_budget, self.delta_budget, self.epsilon_spent + epsilon, self.delta_spent + delta
        )

    def with_budget(self, epsilon_budget: Fraction, delta_budget: Fraction) -> StreamBudget:
        return StreamBudget(epsilon_budget, delta_budget, self.epsilon_spent, self.delta_spent)

    def left_after(self, epsilon: Fraction, delta: Fraction) -> PrivacyCost:
        """What a charge's receipt states: the budget left once it is spent."""
        return PrivacyCost(
            float(self.epsilon_budget - self.epsilon_spent - epsilon),
            float(self.delta_budget - self.delta_spent - delta),
        )

    @property
    def spend_text(self) -> tuple[str, str]:
        return str(self.epsilon_spent), str(self.delta_spent)


def budget_change(
    stream_id: str, old: StreamBudget | None, epsilon_budget: float, delta_budget: float
) -> StreamBudget | None:
    """The stream's state after ``set_budget``, or None when nothing changes (then nothing is
    written, not even a history row: a restart with the same configuration is a no-op).

    The spend is always kept; a budget lowered below it leaves the stream exhausted.

    >>> old = StreamBudget(Fraction(1), Fraction(0), Fraction(3, 5), Fraction(0))
    >>> budget_change("s", old, 1.0, 0.0) is None
    True
    >>> budget_change("s", old, 0.5, 0.0).remaining
    PrivacyCost(epsilon=0.0, delta=0.0)
    """
    check_name(stream_id, "stream_id")
    eps = exact(epsilon_budget, "epsilon_budget")
    delta = exact(delta_budget, "delta_budget", upper=Fraction(1))
    if old is None:
        return StreamBudget(eps, delta, Fraction(0), Fraction(0))
    if (old.epsilon_budget, old.delta_budget) == (eps, delta):
        return None
    new = old.with_budget(eps, delta)
    log.warning(
        "privacy budget of stream %r changed from %s to %s (spent so far %s is kept)",
        stream_id,
        old.budget,
        new.budget,
        old.spent,
    )
    if not new.allows(Fraction(0), Fraction(0)):
        log.warning("stream %r has spent more than its new budget: it is exhausted", stream_id)
    return new


def check_spends(
    where: str, stored: Iterable[tuple[str, str, str]], charges: Iterable[tuple[str, str, str]]
) -> None:
    """Each stream's stored spend must equal the sum of its charges, read in one snapshot.

    The one invariant a hand-edited or damaged ledger could break without its database noticing;
    ``stored`` holds (stream, epsilon_spent, delta_spent), ``charges`` (stream, epsilon, delta).

    >>> check_spends("db", [("s", "1/2", "0")], [("s", "0.25", "0"), ("s", "1/4", "0")])
    >>> check_spends("db", [("s", "0", "0")], [("s", "1", "0")])
    Traceback (most recent call last):
    ...
    privstream.agents.ledger_port.LedgerCorruptError: db: stream 's' records a spend of (0, 0) but its ...
    """
    sums: dict[str, tuple[Fraction, Fraction]] = {}
    for stream_id, epsilon, delta in charges:
        eps_sum, delta_sum = sums.get(stream_id, (Fraction(0), Fraction(0)))
        sums[stream_id] = (eps_sum + Fraction(epsilon), delta_sum + Fraction(delta))
    for stream_id, epsilon_spent, delta_spent in stored:
        expected = sums.pop(stream_id, (Fraction(0), Fraction(0)))
        if (Fraction(epsilon_spent), Fraction(delta_spent)) != expected:
            raise LedgerCorruptError(
                f"{where}: stream {stream_id!r} records a spend of ({epsilon_spent}, {delta_spent}) "
                f"but its charges sum to ({expected[0]}, {expected[1]})"
            )
    if sums:
        raise LedgerCorruptError(f"{where}: charges of unknown streams {sorted(sums)}")


# --------------------------------------------------------------------------- lifetime per example

Exact = tuple[Fraction, Fraction]


def window_peak(rows: Iterable[tuple[int, int, str, str]], first: int, last: int) -> Exact:
    """The largest (epsilon, delta) sum over one window of ``first..last`` of the charges
    ``(first_window, last_window, epsilon, delta)`` covering it (each maximised separately).

    Rows not overlapping the range are ignored; a window no row covers costs 0. A sweep over the
    rows' end points: O(r log r) for r rows.
    """
    changes: dict[int, list[Fraction]] = {}
    parsed: dict[str, Fraction] = {}

    def number(text: str) -> Fraction:
        value = parsed.get(text)
        if value is None:
            value = parsed[text] = Fraction(text)
        return value

    for row_first, row_last, epsilon, delta in rows:
        start, stop = max(row_first, first), min(row_last, last) + 1
        if start >= stop:
            continue
        eps, dlt = number(epsilon), number(delta)
        for point, sign in ((start, 1), (stop, -1)):
            change = changes.setdefault(point, [Fraction(0), Fraction(0)])
            change[0] += sign * eps
            change[1] += sign * dlt
    peak_eps = peak_delta = running_eps = running_delta = Fraction(0)
    for point in sorted(changes):
        running_eps += changes[point][0]
        running_delta += changes[point][1]
        if point <= last:
            peak_eps, peak_delta = max(peak_eps, running_eps), max(peak_delta, running_delta)
    return peak_eps, peak_delta


@dataclass(frozen=True, slots=True)
class LifetimeState:
    """A stream's lifetime budget and spend per example, as exact rationals (stored as text)."""

    epsilon_budget: Fraction
    delta_budget: Fraction
    unranged_epsilon: Fraction  # charges without a node range: a cost of every window
    unranged_delta: Fraction
    peak_epsilon: Fraction  # max over windows of the ranged charges covering it
    peak_delta: Fraction

    @classmethod
    def from_text(cls, *values: str) -> LifetimeState:
        return cls(*(Fraction(v) for v in values))

    @property
    def per_example(self) -> Exact:
        return self.unranged_epsilon + self.peak_epsilon, self.unranged_delta + self.peak_delta

    @property
    def exhausted(self) -> bool:
        """Whether the spend per example is past the budget (a budget lowered below it): then
        every charge is refused, of fresh windows too."""
        eps, delta = self.per_example
        return eps > self.epsilon_budget or delta > self.delta_budget

    def _fits(self, spent: Exact, epsilon: Fraction, delta: Fraction) -> bool:
        return spent[0] + epsilon <= self.epsilon_budget and spent[1] + delta <= self.delta_budget

    def spent_in(self, peak: Exact) -> Exact:
        """The largest per-example spend in a node whose windows' ranged peak is ``peak``."""
        return self.unranged_epsilon + peak[0], self.unranged_delta + peak[1]

    def allows_node(self, peak: Exact, epsilon: Fraction, delta: Fraction) -> bool:
        """Whether a charge of a node, whose windows' ranged charges peak at ``peak``, fits."""
        return self._fits(self.spent_in(peak), epsilon, delta)

    def allows_everywhere(self, epsilon: Fraction, delta: Fraction) -> bool:
        """Whether a charge without a node range (a cost of every window) fits."""
        return self._fits(self.per_example, epsilon, delta)

    def after_node(self, peak: Exact, epsilon: Fraction, delta: Fraction) -> LifetimeState:
        return LifetimeState(
            self.epsilon_budget,
            self.delta_budget,
            self.unranged_epsilon,
            self.unranged_delta,
            max(self.peak_epsilon, peak[0] + epsilon),
            max(self.peak_delta, peak[1] + delta),
        )

    def after_unranged(self, epsilon: Fraction, delta: Fraction) -> LifetimeState:
        return LifetimeState(
            self.epsilon_budget,
            self.delta_budget,
            self.unranged_epsilon + epsilon,
            self.unranged_delta + delta,
            self.peak_epsilon,
            self.peak_delta,
        )

    def with_budget(self, epsilon_budget: Fraction, delta_budget: Fraction) -> LifetimeState:
        return LifetimeState(
            epsilon_budget,
            delta_budget,
            self.unranged_epsilon,
            self.unranged_delta,
            self.peak_epsilon,
            self.peak_delta,
        )

    @property
    def budget(self) -> PrivacyCost:
        return PrivacyCost(float(self.epsilon_budget), float(self.delta_budget))

    @property
    def spent(self) -> PrivacyCost:
        eps, delta = self.per_example
        return PrivacyCost(float(eps), float(delta))

    @property
    def remaining(self) -> PrivacyCost:
        eps, delta = self.per_example
        return PrivacyCost(
            float(max(self.epsilon_budget - eps, Fraction(0))),
            float(max(self.delta_budget - delta, Fraction(0))),
        )

    def left_after(self, epsilon: Fraction, delta: Fraction) -> PrivacyCost:
        """A one-shot charge's receipt: the budget left per example once it is spent."""
        eps, dlt = self.per_example
        return PrivacyCost(float(self.epsilon_budget - eps - epsilon), float(self.delta_budget - dlt - delta))

    @property
    def columns(self) -> tuple[str, str, str, str]:
        """The stored spend columns: unranged epsilon and delta, peak epsilon and delta."""
        return (
            str(self.unranged_epsilon),
            str(self.unranged_delta),
            str(self.peak_epsilon),
            str(self.peak_delta),
        )

    def figures(self, releases_per_level: Mapping[int | None, int], refusals: int) -> LifetimeFigures:
        return LifetimeFigures(self.budget, self.spent, dict(releases_per_level), refusals)


def visible_figures(
    budget: PrivacyCost, rows: Iterable[tuple[int | None, int | None, int | None, str, str]], refusals: int
) -> LifetimeFigures:
    """A stream's lifetime figures counting only the charges ``(level, first_window, last_window,
    epsilon, delta)`` the public may see (completed and scheduled by then): the same rules as the
    stored figures (charges without a node range cost every window; ranged ones the max over
    windows of their covering sums).

    >>> rows = [(0, 0, 0, "1/4", "0"), (0, 1, 1, "1/4", "0"), (1, 0, 1, "1/2", "0")]
    >>> rows.append((None, None, None, "1/10", "0"))  # a one-shot charge: every window
    >>> figures = visible_figures(PrivacyCost(2.0, 0.0), rows, 0)
    >>> figures.spent_per_example, figures.releases_per_level
    (PrivacyCost(epsilon=0.85, delta=0.0), {0: 2, 1: 1, None: 1})
    """
    unranged_epsilon = unranged_delta = Fraction(0)
    ranged: list[tuple[int, int, str, str]] = []
    per_level: dict[int | None, int] = {}
    for level, first, last, epsilon, delta in rows:
        per_level[level] = per_level.get(level, 0) + 1
        if level is None or first is None or last is None:
            unranged_epsilon += Fraction(epsilon)
            unranged_delta += Fraction(delta)
        else:
            ranged.append((first, last, epsilon, delta))
    peak: Exact = (Fraction(0), Fraction(0))
    if ranged:
        peak = window_peak(ranged, min(r[0] for r in ranged), max(r[1] for r in ranged))
    spent = PrivacyCost(float(unranged_epsilon + peak[0]), float(unranged_delta + peak[1]))
    return LifetimeFigures(budget, spent, per_level, refusals)


def lifetime_to_json(figures: LifetimeFigures) -> str:
    """The figures stored with a reservation, so a replay returns them unchanged."""
    return json.dumps(
        {
            "budget": list(figures.budget),
            "spent": list(figures.spent_per_example),
            "releases": [
                [level, count]
                for level, count in sorted(
                    figures.releases_per_level.items(), key=lambda item: -1 if item[0] is None else item[0]
                )
            ],
            "refusals": figures.refusals,
        }
    )


def lifetime_from_json(text: str) -> LifetimeFigures:
    data = json.loads(text)
    return LifetimeFigures(
        PrivacyCost(*data["budget"]),
        PrivacyCost(*data["spent"]),
        {level: count for level, count in data["releases"]},
        data["refusals"],
    )


def check_node(node: NodeRange) -> NodeRange:
    if not isinstance(node, NodeRange):
        raise TypeError(f"node must be a NodeRange, got {type(node).__name__}")
    return node


# --------------------------------------------------------------------------- the individual filter


@dataclass(frozen=True, slots=True)
class UserFilter:
    """The filter's decision for one user-level release."""

    included: list[str]  # the users charged, in the order given (each once)
    spends: list[tuple[str, str, str]]  # (user, new epsilon spend, new delta spend) to store
    excluded: int  # private: an operator metric only


def check_users(users: Collection[str]) -> list[str]:
    """The distinct user ids, in the order given (each a non-empty str without NUL, which
    PostgreSQL's text cannot hold: ingest validation keeps such ids out of the stores)."""
    distinct = list(dict.fromkeys(users))
    for user in distinct:
        if not isinstance(user, str) or not user or "\x00" in user:
            raise TypeError(f"user ids must be non-empty str without NUL, got {user!r}")
    return distinct


def pack_users(users: Iterable[str]) -> bytes:
    """The users a reservation charged, as stored with it: one zlib-compressed, NUL-separated
    UTF-8 string (one value per charge instead of a row per user: a release of 10^6 users writes
    one compressed value, not 10^6 index entries).

    >>> unpack_users(pack_users(["b", "a\\n", "ü"])) == {"a\\n", "b", "ü"}
    True
    >>> unpack_users(pack_users([]))
    frozenset()
    """
    return zlib.compress("\x00".join(users).encode(), 6)


def unpack_users(packed: bytes) -> frozenset[str]:
    text = zlib.decompress(packed).decode()
    return frozenset(text.split("\x00")) if text else frozenset()


#: A spend as stored: exact (epsilon, delta) rationals as text.
Spend = tuple[str, str]
NO_SPEND: Spend = ("0", "0")


def spend_after(spend: Spend, epsilon: Fraction, delta: Fraction, budget: Exact) -> Spend | None:
    """A user's spend (as text) after a charge of (epsilon, delta), or None if it would pass ``budget``.

    >>> spend_after(("1/2", "0"), Fraction(1, 2), Fraction(0), (Fraction(1), Fraction(0)))
    ('1', '0')
    >>> spend_after(("1/2", "0"), Fraction(3, 5), Fraction(0), (Fraction(1), Fraction(0))) is None
    True
    """
    eps, dlt = Fraction(spend[0]) + epsilon, Fraction(spend[1]) + delta
    return (str(eps), str(dlt)) if eps <= budget[0] and dlt <= budget[1] else None


def filter_users(
    users: list[str], stored: Mapping[str, Spend], decide: Callable[[Spend], Spend | None]
) -> UserFilter:
    """Give each user the spend ``decide`` makes of their stored one; exclude those it refuses.

    ``stored`` maps users charged before to their spend as text (absent: never charged).
    ``decide`` runs once per distinct spend, so a million users cost a million dict look-ups.

    >>> budget = (Fraction(1), Fraction(0))
    >>> f = filter_users(["a", "b", "c"], {"a": ("9/10", "0"), "b": ("1/2", "0")},
    ...                  lambda spend: spend_after(spend, Fraction(1, 2), Fraction(0), budget))
    >>> f.included, f.spends, f.excluded
    (['b', 'c'], [('b', '1', '0'), ('c', '1/2', '0')], 1)
    """
    decided: dict[Spend, Spend | None] = {}
    included: list[str] = []
    spends: list[tuple[str, str, str]] = []
    for user in users:
        spend = stored.get(user, NO_SPEND)
        if spend in decided:
            new = decided[spend]
        else:
            new = decided[spend] = decide(spend)
        if new is not None:
            included.append(user)
            spends.append((user, *new))
    return UserFilter(included, spends, len(users) - len(included))
