"""Validation of raw input messages, inside the agent (never in a faust codec: codec errors
can silently kill a consumer, faust-streaming #175).

A message is either an example (or an ``ExampleBatch``) of a configured stream whose ``x`` lies in
the stream's domain, or an :class:`Invalid` with a reason from the bounded set :data:`INVALID_REASONS`
(which becomes a metric label and a dead-letter header).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import pydantic_core
from pydantic import ValidationError

from privstream.schemas import Example, ExampleBatch

#: Every reason a message can be rejected for; bounded, so safe as a Prometheus label.
INVALID_REASONS = (
    "invalid_json",
    "missing_field",
    "wrong_type",
    "invalid_label",
    "out_of_domain",
    "unknown_stream",
    "event_time_out_of_range",
)

#: Limit on one raw message; larger ones are rejected before parsing.
MAX_MESSAGE_BYTES = 1_000_000


class ValidExample(NamedTuple):
    """A validated example, as the agents carry it (a tuple: ~30x cheaper than a pydantic object)."""

    stream_id: str
    x: int | list[float]
    y: int
    user_id: str | None = None
    event_time: datetime | None = None
    id: str | None = None

    @classmethod
    def of(cls, example: Example) -> ValidExample:
        return cls(example.stream_id, example.x, example.y, example.user_id, example.event_time, example.id)


@dataclass(frozen=True, slots=True)
class Invalid:
    """Why a message was rejected: a bounded ``reason`` and a human ``detail``."""

    reason: str
    detail: str


#: Labels the fast path maps without pydantic (the same mapping as ``normalise_label``).
_FAST_LABELS: dict[object, int] = {0: 0, 1: 1, -1: 0}
#: The keys an ``Example`` reads; a message with others (ignored by the schema) or with an
#: ``event_time`` takes the full pydantic path.
_FAST_KEYS = frozenset({"stream_id", "x", "y", "user_id", "id"})


class ExampleValidator:
    """Parses raw bytes into examples (or example batches) of known streams.

    ``domain_checks`` maps each stream id to a function that raises ``ValueError`` when ``x``
    is outside that stream's domain and ``TypeError`` when it is the wrong kind of point (see
    :func:`integer_domain` and :func:`vector_domain`).

    The common message (``stream_id``, ``x``, ``y`` and optional short ``user_id``/``id``) is
    checked by a fast path that accepts exactly what the pydantic model accepts and builds the
    same ``Example``; anything else goes through pydantic, which also names what is wrong.

    ``event_time_skew`` maps the streams with time windows to their public maximum skew: an example
    whose ``event_time`` is further than that from ``clock()`` (either way) is rejected as
    ``event_time_out_of_range`` before it reaches any window, so no single example can move a
    time window's schedule (issue 16.2).
    """

    def __init__(
        self, domain_checks: Mapping[str, Callable[[int], None]], user_level: frozenset[str] = frozenset(),
        *, event_time_skew: Mapping[str, float] | None = None, clock: Callable[[], float] = time.time,
    ):
        self._domain_checks = dict(domain_checks)
        self._user_level = user_level  # streams whose privacy unit is the user: user_id required
        self._skew = dict(event_time_skew or {})
        self._clock = clock

    def validate(self, raw: bytes | None) -> ValidExample | ExampleBatch | Invalid:
        if raw is None:
            return Invalid("invalid_json", "empty message (no value)")
        if len(raw) > MAX_MESSAGE_BYTES:
            return Invalid("invalid_json", f"message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            data = pydantic_core.from_json(raw, allow_inf_nan=False)
        except ValueError:
            data = None  # pydantic below reports the exact JSON error
        example = self._fast(data) if type(data) is dict else None
        if example is None:
            is_batch = type(data) is dict and "xs" in data
            try:
                if is_batch:
                    example = ExampleBatch.model_validate(data)
                else:
                    example = ValidExample.of(Example.model_validate_json(raw))
            except ValidationError as exc:
                return _classify(exc)
        return self._check_stream(example)

    def _fast(self, data: dict) -> ValidExample | None:
        """The example pydantic would accept, or None when pydantic must decide."""
        if not data.keys() <= _FAST_KEYS:
            return None
        stream_id, x, y = data.get("stream_id"), data.get("x"), data.get("y")
        if type(stream_id) is not str or stream_id not in self._domain_checks or type(x) is not int or x < 0:
            return None  # unknown streams, bad ids and bad x get pydantic's verdict and wording
        label = _FAST_LABELS.get(y) if type(y) in (int, bool) else None
        user_id, example_id = data.get("user_id"), data.get("id")
        if label is None or not _short_or_none(user_id) or not _short_or_none(example_id):
            return None
        return ValidExample(stream_id, x, label, user_id, None, example_id)

    def _check_stream(self, example: ValidExample | ExampleBatch) -> ValidExample | ExampleBatch | Invalid:
        check = self._domain_checks.get(example.stream_id)
        if check is None:
            return Invalid("unknown_stream", f"stream {example.stream_id!r} is not configured")
        try:
            for x in [example.x] if isinstance(example, ValidExample) else example.xs:
                check(x)
        except TypeError as exc:  # an integer for a vector stream, or the other way round
            return Invalid("wrong_type", str(exc))
        except ValueError as exc:
            return Invalid("out_of_domain", str(exc))
        if example.stream_id in self._user_level:
            users = [example.user_id] if isinstance(example, ValidExample) else (example.user_ids or [None])
            if any(u is None for u in users):
                return Invalid("missing_field", "user_id: required by the stream's user-level privacy")
        skew = self._skew.get(example.stream_id)
        if skew is not None:
            times = [example.event_time] if isinstance(example, ValidExample) else (example.event_times or [])
            now = self._clock()
            for moment in times:
                if moment is not None and abs(moment.timestamp() - now) > skew:
                    return Invalid("event_time_out_of_range",
                                   f"event_time {moment.isoformat()} is more than {skew:g} s from the "
                                   "worker's clock (the stream's max_event_time_skew_seconds)")
        return example


def integer_domain(check_point: Callable[[int], None]) -> Callable[[object], None]:
    """The domain check of a class stream: an integer point that ``check_point`` accepts."""

    def check(x: object) -> None:
        if type(x) is not int:
            raise TypeError("x: this stream's points are integers, not feature vectors")
        check_point(x)

    return check


def vector_domain(dimension: int) -> Callable[[object], None]:
    """The domain check of a vector stream: a list of ``dimension`` finite numbers.

    Values outside the public feature bounds are accepted: the learners clip them (documented
    in their certificates), since rejecting would make the window's size depend on them.
    """

    def check(x: object) -> None:
        if type(x) is not list:
            raise TypeError(f"x: this stream's points are vectors of {dimension} numbers")
        if len(x) != dimension:
            raise ValueError(f"x has {len(x)} features; this stream has {dimension}")

    return check


def _short_or_none(value: object) -> bool:
    return value is None or (type(value) is str and len(value) <= 200)


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
    if loc[:1] in (("y",), ("ys",)) and kind == "value_error":
        return Invalid("invalid_label", detail)
    if loc[:1] in (("x",), ("xs",)) and kind in ("greater_than_equal", "less_than"):
        return Invalid("out_of_domain", detail)
    return Invalid("wrong_type", detail)
