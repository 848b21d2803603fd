"""A privacy guarantee as data: (ε, δ), the neighbouring relation and unit it holds under, and the
steps that derived it (a small privacy map, in the manner of OpenDP's measurements).

An algorithm states its guarantee on the rows it reads (unit ``"row"``; every result's
:attr:`~privstream.learning.private_learners.base.PrivateRelease.privacy_guarantee`). A release's guarantee
is that one carried to the privacy unit through public steps, each an instance of group privacy
(Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, Thm 2.2 and its approximate
form: an (ε, δ)-DP mechanism is (kε, k·e^{(k-1)ε}·δ)-DP for k neighbouring changes):

* :class:`GroupPrivacy` ``(k)``: one user changes up to k of the rows (the per-user contribution
  bound);
* :class:`CapReplacement`: a capped node whose n is private keeps a subset of its examples, so an
  addition can push another example out of the kept set: inside it, one addition is a replacement,
  two add/remove changes.

Going the other way, :meth:`Guarantee.required` gives what an algorithm may spend for a release
charged (ε, δ) per unit, and :func:`shortfall` says why a returned guarantee exceeds it (the
release path refuses such a release before publishing).

>>> charge = (1.0, 0.0)
>>> steps = (GroupPrivacy(2), CapReplacement())
>>> need = Guarantee.required(*charge, relation="add-remove-one", steps=steps)
>>> need.epsilon, need.unit
(0.25, 'row')
>>> spent = Guarantee(epsilon=0.25, delta=0.0, relation="add-remove-one")
>>> shortfall(need, spent) is None
True
>>> shortfall(need, Guarantee(epsilon=0.5, delta=0.0, relation="add-remove-one"))
'the algorithm spent epsilon 0.5 where 0.25 was charged'
>>> released = spent.through(steps, unit="user")
>>> released.epsilon, released.unit, [step.to_dict() for step in released.derivation]
(1.0, 'user', [{'step': 'group-privacy', 'k': 2}, {'step': 'cap-replacement', 'k': 2}])
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = [
    "CapReplacement",
    "GroupPrivacy",
    "Guarantee",
    "GuaranteeError",
    "Relation",
    "Step",
    "Unit",
    "group_factor",
    "shortfall",
]

#: The neighbouring relation a guarantee holds under.
Relation = Literal["replace-one", "add-remove-one"]
#: What one neighbouring change is a change of: one row of the algorithm's input, one example of
#: the stream, or one user (with all their rows).
Unit = Literal["row", "example", "user"]

#: Rounding slack when comparing a guarantee with a charge: k·(ε/k) may differ from ε by an ulp.
RELATIVE_SLACK = 1e-9


class GuaranteeError(RuntimeError):
    """A release whose algorithm's guarantee exceeds what it was charged: never published."""


@dataclass(frozen=True)
class GroupPrivacy:
    """One unit (a user) changes up to ``k`` rows of the algorithm's input."""

    k: int
    name: ClassVar[str] = "group-privacy"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"group privacy needs an int k >= 1, got {self.k!r}")

    @property
    def factor(self) -> int:
        return self.k

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "k": self.k}


@dataclass(frozen=True)
class CapReplacement:
    """Inside a capped node whose n is private an addition can become a replacement: two changes."""

    name: ClassVar[str] = "cap-replacement"
    factor: ClassVar[int] = 2

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "k": self.factor}


Step = GroupPrivacy | CapReplacement


def group_factor(steps: Iterable[Step]) -> int:
    """How many neighbouring changes of the rows one change of the unit is, through ``steps``.

    Group privacy over k₁ then k₂ changes gives the same (ε, δ) as over k₁·k₂ at once (the
    exponents add up), so the steps compose by their product.

    >>> group_factor(()), group_factor((GroupPrivacy(3), CapReplacement()))
    (1, 6)
    """
    return math.prod(step.factor for step in steps)


@dataclass(frozen=True, kw_only=True)
class Guarantee:
    """(ε, δ)-DP under ``relation`` for one change of ``unit``, derived through ``derivation``."""

    epsilon: float
    delta: float
    relation: Relation
    unit: Unit = "row"
    derivation: tuple[Step, ...] = ()

    @classmethod
    def required(
        cls, epsilon: float, delta: float, *, relation: Relation, steps: tuple[Step, ...] = ()
    ) -> Guarantee:
        """What an algorithm may spend on its rows so that, through ``steps``, a release charged
        (``epsilon``, ``delta``) per unit holds: ε/k and δ/(k·e^{(k-1)ε/k}) (group privacy, exact
        in the other direction).

        >>> Guarantee.required(1.0, 0.0, relation="replace-one", steps=(GroupPrivacy(4),)).epsilon
        0.25
        """
        k = group_factor(steps)
        if k == 1:
            return cls(epsilon=epsilon, delta=delta, relation=relation)
        return cls(
            epsilon=epsilon / k, delta=delta / (k * math.exp((k - 1) * epsilon / k)), relation=relation
        )

    def through(self, steps: tuple[Step, ...], *, unit: Unit) -> Guarantee:
        """This guarantee for one change of ``unit``, by group privacy over ``steps``."""
        k = group_factor(steps)
        epsilon, delta = self.epsilon * k, k * math.exp((k - 1) * self.epsilon) * self.delta
        return Guarantee(
            epsilon=epsilon,
            delta=delta,
            relation=self.relation,
            unit=unit,
            derivation=(*self.derivation, *steps),
        )

    def statement(self, steps: tuple[Step, ...] = (), *, unit: Unit = "example") -> dict[str, Any]:
        """The certificate's ``guarantee``: this one (an algorithm's, on its rows) carried through
        ``steps`` to one change of ``unit``, with the algorithm's own (ε, δ) and the derivation.

        >>> Guarantee(epsilon=0.5, delta=0.0, relation="replace-one").statement()["derivation"]
        []
        """
        released = self.through(steps, unit=unit)
        return {
            **released.to_dict(),
            "algorithm_epsilon": self.epsilon,
            "algorithm_delta": self.delta,
        }

    def to_dict(self) -> dict[str, Any]:
        """The guarantee as data (JSON-ready)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbouring_relation": self.relation,
            "unit": self.unit,
            "derivation": [step.to_dict() for step in self.derivation],
        }


def _within(spent: float, allowed: float) -> bool:
    # written so that NaN is never within
    return spent <= allowed * (1 + RELATIVE_SLACK) + 1e-300


def shortfall(required: Guarantee, returned: Guarantee) -> str | None:
    """Why ``returned`` (an algorithm's guarantee) does not meet ``required``, or None if it does.

    It must hold under the same relation for the same unit, and spend at most the allowed ε and δ.
    """
    if returned.relation != required.relation:
        return f"its guarantee holds under {returned.relation}, the release needs {required.relation}"
    if returned.unit != required.unit:
        return f"the algorithm's guarantee is per {returned.unit}, the release needs one per {required.unit}"
    if not _within(returned.epsilon, required.epsilon):
        return f"the algorithm spent epsilon {returned.epsilon:g} where {required.epsilon:g} was charged"
    if not _within(returned.delta, required.delta):
        return f"the algorithm spent delta {returned.delta:g} where {required.delta:g} was charged"
    return None
