"""Errors raised by the learning layer.

Everything a user can cause with bad input is a :class:`LearningInputError`, a ``ValueError``,
so the CLI prints it as one line (exit status 2) instead of a traceback; an invalid privacy or
noise parameter (of a mechanism, the accounting or the audit) is a :class:`PrivacyParameterError`,
also a ``ValueError``.
:class:`TooExpensiveError` is different: the input is fine but the exact answer would take too
long; callers such as ``privstream dims`` report ``null`` with the reason instead of a guess.
"""

from __future__ import annotations


class LearningInputError(ValueError):
    """Base class of the learning layer's input errors."""


class ClassSpecError(LearningInputError):
    """A hypothesis-class spec string that does not parse (``"thresholds:abc"``, ``"cubes:3"``)."""


class ClassFileError(LearningInputError):
    """A class file that is unreadable, empty, ragged, or holds values other than 0/1."""


class DomainError(LearningInputError):
    """A domain point that is not an integer in ``[0, N)``."""


class LabelError(LearningInputError):
    """A label that is not 0 or 1."""


class HypothesisFormatError(LearningInputError):
    """A serialised hypothesis (``to_dict`` form) that is malformed or not canonical."""


class StateError(LearningInputError):
    """A serialised SOA state that does not belong to the given class or is malformed."""


class PrivacyParameterError(ValueError):
    """A privacy or noise parameter is invalid (e.g. epsilon <= 0, delta outside [0, 1), NaN).

    Subclasses ``ValueError`` so callers validating generic arguments catch it too.
    """


class TooExpensiveError(Exception):
    """The exact value exists but computing it exceeds the allowed work.

    ``reason`` is a short human-readable explanation suitable for a JSON ``reason`` field.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Short alias used in docs and by callers.
TooExpensive = TooExpensiveError


class InvariantError(RuntimeError):
    """An internal invariant does not hold: a bug, never a user's error. Raised explicitly (not by
    ``assert``, which ``python -O`` removes) because several of these invariants protect privacy."""
