"""What every privacy ledger backend agrees on: validation, exact arithmetic, the budget check.

The storage backends (:mod:`.sqlite_ledger`, :mod:`.postgres_ledger`) only move rows; every
decision about numbers is made here, once, so both refuse and accept exactly the same charges.

**Exact arithmetic.** Numbers are read as the shortest decimal that round-trips the float
(``0.1`` means 1/10) and summed as exact rationals, stored as text (``"3/10"``), so ten charges of
0.1 spend exactly 1.0 and ``0.1 + 0.2`` fits a budget of ``0.3``.

>>> budget = StreamBudget(exact(0.3, "epsilon"), Fraction(0), Fraction(0), Fraction(0))
>>> budget = budget.spend(exact(0.1, "epsilon"), Fraction(0))
>>> budget.allows(exact(0.2, "epsilon"), Fraction(0)), budget.allows(exact(0.21, "epsilon"), Fraction(0))
(True, False)
>>> budget.remaining
PrivacyCost(epsilon=0.2, delta=0.0)
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from privstream.agents.ledger_port import (
    BudgetExhaustedError,
    Charge,
    ChargeReceipt,
    LedgerCorruptError,
    PrivacyCost,
)

__all__ = [
    "ChargeRequest",
    "StreamBudget",
    "budget_change",
    "check_name",
    "check_spends",
    "exact",
    "release_bytes_of",
]

log = logging.getLogger("privstream.stream_app.store.ledger")

Release = bytes | Callable[[ChargeReceipt], bytes]


def exact(value: float, name: str, *, upper: Fraction | None = None) -> Fraction:
    """The exact rational a user means by ``value``: floats by their shortest decimal repr.

    >>> exact(0.1, "epsilon") + exact(0.2, "epsilon") == exact(0.3, "epsilon")
    True
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, numbers.Rational):  # int, Fraction, numpy integers: already exact
        result = Fraction(value.numerator, value.denominator)
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
        key = (check_name(stream_id, "stream_id"), check_name(window_id, "window_id"),
               check_name(mechanism, "mechanism"))
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
                "stored charge, nothing spent", self.key, existing.cost, self.cost,
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
            float(max(self.epsilon_budget - self.epsilon_spent, 0)),
            float(max(self.delta_budget - self.delta_spent, 0)),
        )

    def allows(self, epsilon: Fraction, delta: Fraction) -> bool:
        return (
            self.epsilon_spent + epsilon <= self.epsilon_budget
            and self.delta_spent + delta <= self.delta_budget
        )

    def spend(self, epsilon: Fraction, delta: Fraction) -> StreamBudget:
        """The budget after a charge of (epsilon, delta) (the caller checked :meth:`allows`)."""
        return StreamBudget(self.epsilon_budget, self.delta_budget,
                            self.epsilon_spent + epsilon, self.delta_spent + delta)

    def with_budget(self, epsilon_budget: Fraction, delta_budget: Fraction) -> StreamBudget:
        return StreamBudget(epsilon_budget, delta_budget, self.epsilon_spent, self.delta_spent)

    def left_after(self, epsilon: Fraction, delta: Fraction) -> PrivacyCost:
        """What a charge's receipt states: the budget left once it is spent."""
        return PrivacyCost(float(self.epsilon_budget - self.epsilon_spent - epsilon),
                           float(self.delta_budget - self.delta_spent - delta))

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
        stream_id, old.budget, new.budget, old.spent,
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
