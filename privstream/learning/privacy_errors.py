"""Errors raised by the privacy layer (mechanisms, accounting, audit)."""

from __future__ import annotations

__all__ = ["PrivacyParameterError"]


class PrivacyParameterError(ValueError):
    """A privacy or noise parameter is invalid (e.g. epsilon <= 0, delta outside [0, 1), NaN).

    Subclasses ``ValueError`` so callers validating generic arguments catch it too.
    """
