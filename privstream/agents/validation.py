"""Validation of raw input messages, inside the agent (never in a faust codec: codec errors
can silently kill a consumer, faust-streaming #175).

A message is either an :class:`Example` of a configured stream whose ``x`` lies in the stream's
domain, or an :class:`Invalid` with a reason from the bounded set :data:`INVALID_REASONS`
(which becomes a metric label and a dead-letter header).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from privstream.schemas import Example

#: Every reason a message can be rejected for; bounded, so safe as a Prometheus label.
INVALID_REASONS = (
    "invalid_json",
    "missing_field",
    "wrong_type",
    "invalid_label",
    "out_of_domain",
    "unknown_stream",
)

#: Limit on one raw message; larger ones are rejected before parsing.
MAX_MESSAGE_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class Invalid:
    """Why a message was rejected: a bounded ``reason`` and a human ``detail``."""

    reason: str
    detail: str


class ExampleValidator:
    """Parses raw bytes into examples of known streams.

    ``domain_checks`` maps each stream id to a function that raises ``ValueError`` when ``x``
    is outside that stream's domain.
    """

    def __init__(
        self, domain_checks: Mapping[str, Callable[[int], None]], user_level: frozenset[str] = frozenset()
    ):
        self._domain_checks = dict(domain_checks)
        self._user_level = user_level  # streams whose privacy unit is the user: user_id required

    def validate(self, raw: bytes | None) -> Example | Invalid:
        if raw is None:
            return Invalid("invalid_json", "empty message (no value)")
        if len(raw) > MAX_MESSAGE_BYTES:
            return Invalid("invalid_json", f"message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            example = Example.model_validate_json(raw)
        except ValidationError as exc:
            return _classify(exc)
        check = self._domain_checks.get(example.stream_id)
        if check is None:
            return Invalid("unknown_stream", f"stream {example.stream_id!r} is not configured")
        try:
            check(example.x)
        except ValueError as exc:
            return Invalid("out_of_domain", str(exc))
        if example.user_id is None and example.stream_id in self._user_level:
            return Invalid("missing_field", "user_id: required by the stream's user-level privacy")
        return example


def _classify(exc: ValidationError) -> Invalid:
    """Map pydantic's first error to one of :data:`INVALID_REASONS`."""
    err = exc.errors(include_url=False)[0]
    kind, loc = err["type"], tuple(err.get("loc", ()))
    where = ".".join(str(p) for p in loc) or "message"
    detail = f"{where}: {err['msg']}"
    if kind == "json_invalid":
        return Invalid("invalid_json", detail)
    if kind == "missing":
        return Invalid("missing_field", detail)
    if loc[:1] == ("y",) and kind == "value_error":
        return Invalid("invalid_label", detail)
    if loc[:1] == ("x",) and kind in ("greater_than_equal", "less_than"):
        return Invalid("out_of_domain", detail)
    return Invalid("wrong_type", detail)
