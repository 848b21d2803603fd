"""An algorithm's parameters, declared once and checked before it is built.

One mechanism for every learner, vector learner, sanitizer and online learner: the names an
algorithm takes are its factory's keyword parameters (its signature, so a third-party algorithm
declares them by writing its ``__init__``), and their ranges are the factory's optional class
attribute ``parameter_ranges`` (name -> :class:`Range`). Parameters that only the audits' broken
variants use (switching a noise source off) are named in ``audit_parameters`` and refused in a
configuration. :func:`check_parameters` refuses, with one line naming what to change, an unknown
name (with the closest known one), an audit-only name, or a value outside its declared range;
everything else is left to the factory, which still validates what it is given.

>>> class Learner:
...     parameter_ranges = {"rounds": Range(low=1, integer=True)}
...     def __init__(self, *, rounds: int = 20, shuffle: bool = True) -> None: ...
>>> sorted(declared(Learner))
['rounds', 'shuffle']
>>> check_parameters("learner", "demo", Learner, {"rounds": 3})
>>> check_parameters("learner", "demo", Learner, {"round": 3})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privstream.learning.errors.ParameterError: ... did you mean 'rounds'? (it takes rounds, shuffle)
>>> check_parameters("learner", "demo", Learner, {"rounds": 0})
Traceback (most recent call last):
...
privstream.learning.errors.ParameterError: parameter 'rounds' of learner 'demo' must be an integer >= 1, got 0
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from privstream.learning import algorithms as registry
from privstream.learning.algorithms import Kind
from privstream.learning.errors import ParameterError

__all__ = ["ACCURACY_TARGETS", "Range", "check_parameters", "check_registered", "declared"]


@dataclass(frozen=True)
class Range:
    """The values a numeric parameter may take: ``low``/``high`` (``None``: unbounded), each bound
    closed unless ``low_open``/``high_open``; ``integer`` for an int parameter. ``optional``: the
    parameter may also be ``None`` (its factory then derives it).

    >>> Range(0, 1, low_open=True, high_open=True).describe(), Range(low=2, integer=True).describe()
    ('a number in (0, 1)', 'an integer >= 2')
    >>> Range(0, 1, low_open=True).contains(1.0), Range(0, 1, low_open=True).contains(0)
    (True, False)
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    optional: bool = False

    def contains(self, value: object) -> bool:
        """Whether ``value`` is of the range's type and within it (``bool`` is never a number)."""
        if value is None:
            return self.optional
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def describe(self) -> str:
        """The range as a message says it."""
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            opening, closing = "(" if self.low_open else "[", ")" if self.high_open else "]"
            text = f"{kind} in {opening}{_num(self.low)}, {_num(self.high)}{closing}"
        elif self.low is not None:
            text = f"{kind} {'>' if self.low_open else '>='} {_num(self.low)}"
        elif self.high is not None:
            text = f"{kind} {'<' if self.high_open else '<='} {_num(self.high)}"
        else:
            text = f"a finite {kind.removeprefix('a ').removeprefix('an ')}"
        return text + (" or null" if self.optional else "")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def declared(factory: Any, *, skip: Iterable[str] = ()) -> dict[str, Range | None]:
    """The parameters ``factory`` takes by keyword -> their declared range (``None``: none
    declared), except ``skip`` (arguments the caller passes itself, such as an online learner's
    ``bounds``) and the audit-only ones."""
    skipped = set(skip) | set(getattr(factory, "audit_parameters", ()))
    ranges: Mapping[str, Range] = getattr(factory, "parameter_ranges", {})
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read: nothing is declared
        return {}
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        name: ranges.get(name)
        for name, p in signature.parameters.items()
        if p.kind in keyword and name not in skipped and not name.startswith("_")
    }


def _accepts_any(factory: Any) -> bool:
    """Whether ``factory`` takes ``**kwargs`` (then unknown names are its own business)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def check_parameters(
    kind: str,
    name: str,
    factory: Any,
    params: Mapping[str, Any],
    *,
    skip: Iterable[str] = (),
    extra: Mapping[str, Range | None] | None = None,
) -> None:
    """Refuse ``params`` for the ``kind`` ``name`` built by ``factory`` if a name is unknown or
    audit-only or a value is outside its declared range (:class:`ParameterError`, one line).
    ``extra``: parameters the caller reads itself (a release's accuracy targets), with their ranges.
    """
    what = f"{kind} {name!r}"
    known = {**declared(factory, skip=skip), **(extra or {})}
    audit_only = set(getattr(factory, "audit_parameters", ()))
    for key, value in params.items():
        if key in audit_only:
            raise ParameterError(
                f"parameter {key!r} of {what} exists only for the audits' broken variants; "
                "remove it from the configuration"
            )
        if key not in known:
            if _accepts_any(factory):
                continue
            raise ParameterError(_unknown(key, what, known))
        declared_range = known[key]
        if declared_range is not None and not declared_range.contains(value):
            raise ParameterError(
                f"parameter {key!r} of {what} must be {declared_range.describe()}, got {value!r}"
            )


#: The accuracy targets a finite-class learner's release reads (its factory does not take them).
ACCURACY_TARGETS: dict[str, Range | None] = {
    "alpha": Range(0, 1, low_open=True, high_open=True),
    "beta": Range(0, 1, low_open=True, high_open=True),
}


def check_registered(
    kind: Kind, name: str, params: Mapping[str, Any], *, extra: Mapping[str, Range | None] | None = None
) -> None:
    """:func:`check_parameters` for the algorithm registered as ``name`` of ``kind``
    (:mod:`privstream.learning.algorithms`); an unregistered name is left to the registry's own
    refusal.

    >>> check_registered("learner", "generic", {"alpah": 0.1}, extra=ACCURACY_TARGETS)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privstream.learning.errors.ParameterError: ... did you mean 'alpha'? (it takes alpha, beta)
    >>> check_registered("sanitizer", "hierarchical", {"fanout": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privstream.learning.errors.ParameterError: parameter 'fanout' of ... must be an integer >= 2, got 1
    """
    if name not in registry.names(kind):
        return
    label = "learner" if kind == "vector-learner" else kind  # a configuration says "learner" for both
    check_parameters(label, name, registry.load(kind, name), params, extra=extra)


def _unknown(key: str, what: str, known: Iterable[str]) -> str:
    names = sorted(known)
    if not names:
        return f"unknown parameter {key!r} of {what} (it takes none)"
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown parameter {key!r} of {what}{hint} (it takes {', '.join(names)})"
