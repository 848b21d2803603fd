"""Validation of raw input messages, inside the agent (never in a faust codec: codec errors
can silently kill a consumer, faust-streaming #175).

A message is either an example (or an ``ExampleBatch``) of a configured stream whose ``x`` lies in
the stream's domain, or an :class:`Invalid` with a reason from the bounded set :data:`INVALID_REASONS`
(which becomes a metric label and a dead-letter header).

Two steps decide, in this order, and the first thing wrong names the reason:

1. the schema (:class:`~privstream.schemas.Example`, pydantic): ``invalid_json``, then the fields
   in the model's order (``missing_field``, ``wrong_type``, ``out_of_domain`` for a negative ``x``,
   ``invalid_label``);
2. the stream's rules, :data:`STREAM_RULES`, in their order (``unknown_stream``, the stream's
   domain, user ids, and for time windows ``event_time_out_of_range``: an event time further than
   the stream's public maximum skew from the worker's clock, so that no example can move a time
   window's schedule, issue 16.2).

Step 1 is decided without pydantic for single-example messages: :meth:`ExampleValidator.validate`
checks the fields itself, accepting exactly what the model accepts and rejecting with the reason
pydantic's first error maps to (a property test holds it to that). An invalid message then costs
about what a valid one costs (1-3 µs, where building and classifying pydantic's ``ValidationError``
takes 4-5 µs), so a flood of invalid messages cannot slow the service to a crawl. What it cannot
decide cheaply (a feature vector ``x``, an ``event_time`` to parse) goes to pydantic, as do
``ExampleBatch`` messages. Rejections found without pydantic get a short detail of their own,
bounded whatever the input.

>>> validator = ExampleValidator({"s": integer_domain(lambda x: None)})
>>> validator.validate(b'{"stream_id": "s", "x": 3, "y": -1}')
ValidExample(stream_id='s', x=3, y=0, user_id=None, event_time=None, id=None)
>>> validator.validate(b'{"stream_id": "s", "x": "3", "y": 7}')
Invalid(reason='wrong_type', detail="x: should be an integer >= 0 or a list of numbers, got '3'")
>>> validator.validate(b'{"stream_id": "t", "x": 3, "y": 1}')
Invalid(reason='unknown_stream', detail="stream 't' is not configured")

**Adding a rule** is one entry in :data:`STREAM_RULES`: a :class:`StreamRule` naming every reason
it can give and a ``check(stream, example)`` returning an :class:`Invalid` or None. ``example`` is a
:class:`ValidExample` or an ``ExampleBatch`` (schema-valid: ``event_time`` is parsed, in UTC),
``stream`` the :class:`Stream` it belongs to (never None after the first rule). Its reasons join
:data:`INVALID_REASONS`, hence the metric's labels and the dead-letter headers; nothing else
changes. A rule that needs more of a stream's configuration adds a field to :class:`Stream`.

>>> [rule.reasons for rule in STREAM_RULES]
[('unknown_stream',), ('wrong_type', 'out_of_domain'), ('missing_field', 'wrong_type'), \
('event_time_out_of_range',)]
>>> INVALID_REASONS[:6]  # the schema's reasons, then the rules' new ones, in order
('invalid_json', 'missing_field', 'wrong_type', 'invalid_label', 'out_of_domain', 'unknown_stream')
>>> INVALID_REASONS[6:]
('event_time_out_of_range',)

A rule's check, called the way :meth:`ExampleValidator.validate` calls it:

>>> user_level = Stream(domain=integer_domain(lambda x: None), user_level=True)
>>> _users_given(user_level, ValidExample("u", x=1, y=1))
Invalid(reason='missing_field', detail="user_id: required by the stream's user-level privacy")
>>> _users_given(user_level, ValidExample("u", x=1, y=1, user_id="alice")) is None
True
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import NamedTuple

import pydantic_core
from pydantic import ValidationError

from privstream.schemas import Example, ExampleBatch

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


class Invalid(NamedTuple):
    """Why a message was rejected: a bounded ``reason`` and a human ``detail`` (a tuple: a frozen
    dataclass costs ~5x more to build, and a flood builds one per message)."""

    reason: str
    detail: str


class Stream(NamedTuple):
    """What the stream rules know of a configured stream."""

    domain: Callable[[object], None]  # raises TypeError (wrong kind of point) or ValueError (outside)
    user_level: bool  # the privacy unit is the user: every example needs a user_id
    event_time_skew: float | None = None  # time windows: the public maximum |event_time - clock()|
    clock: Callable[[], float] = time.time  # the worker's clock (tests inject one)


class StreamRule(NamedTuple):
    """A rule a schema-valid example or batch must also follow on its stream.

    ``check(stream, example)`` returns the :class:`Invalid` it finds, or None; ``stream`` is None
    for an unconfigured stream (only the first rule sees that: it rejects)."""

    reasons: tuple[str, ...]  # every reason ``check`` can give
    check: Callable[[Stream | None, ValidExample | ExampleBatch], Invalid | None]


def _configured(stream: Stream | None, example: ValidExample | ExampleBatch) -> Invalid | None:
    if stream is None:
        return Invalid("unknown_stream", f"stream {example.stream_id!r} is not configured")
    return None


def _in_domain(stream: Stream | None, example: ValidExample | ExampleBatch) -> Invalid | None:
    assert stream is not None
    try:
        if type(example) is ValidExample:
            stream.domain(example.x)
        else:
            for x in example.xs:  # type: ignore[union-attr]
                stream.domain(x)
    except TypeError as exc:  # an integer for a vector stream, or the other way round
        return Invalid("wrong_type", str(exc))
    except ValueError as exc:
        return Invalid("out_of_domain", str(exc))
    return None


def _users_given(stream: Stream | None, example: ValidExample | ExampleBatch) -> Invalid | None:
    assert stream is not None
    if stream.user_level:
        users = [example.user_id] if type(example) is ValidExample else (example.user_ids or [None])
        if any(u is None for u in users):
            return Invalid("missing_field", "user_id: required by the stream's user-level privacy")
        if any("\x00" in u for u in users):  # type: ignore[operator]
            # the user ledger keeps ids as text, which PostgreSQL cannot hold with a NUL in it
            return Invalid("wrong_type", "user_id: contains a NUL character")
    return None


def _event_time_in_range(stream: Stream | None, example: ValidExample | ExampleBatch) -> Invalid | None:
    """Time windows close on the worker's clock; an event time far from it is refused before it
    touches a window (issue 16.2), so a date ten years ahead moves nothing."""
    assert stream is not None
    if stream.event_time_skew is None:
        return None
    times = [example.event_time] if type(example) is ValidExample else (example.event_times or [])
    now = stream.clock()
    for moment in times:
        if moment is not None and abs(moment.timestamp() - now) > stream.event_time_skew:
            return Invalid(
                "event_time_out_of_range",
                f"event_time {moment.isoformat()} is more than {stream.event_time_skew:g} s from "
                "the worker's clock (the stream's max_event_time_skew_seconds)",
            )
    return None


#: What a schema-valid example or batch must also satisfy on its stream, checked in this order (the
#: first rule broken names the reason). A new rule is one more entry here (see the module docstring):
#: :data:`INVALID_REASONS`, hence the metric's labels, follows.
STREAM_RULES: tuple[StreamRule, ...] = (
    StreamRule(("unknown_stream",), _configured),
    StreamRule(("wrong_type", "out_of_domain"), _in_domain),
    StreamRule(("missing_field", "wrong_type"), _users_given),
    StreamRule(("event_time_out_of_range",), _event_time_in_range),
)

#: What the schema rejects for, in the order it checks: parsing, then the fields of ``Example``.
SCHEMA_REASONS = ("invalid_json", "missing_field", "wrong_type", "invalid_label", "out_of_domain")

#: Every reason a message can be rejected for; bounded, so safe as a Prometheus label.
INVALID_REASONS: tuple[str, ...] = tuple(
    dict.fromkeys(SCHEMA_REASONS + tuple(reason for rule in STREAM_RULES for reason in rule.reasons))
)


# --- the schema without pydantic: the fields of ``Example`` in its order -------------------------

#: Labels as ``normalise_label`` maps them (True and False hash as 1 and 0).
_LABELS: dict[object, int] = {0: 0, 1: 1, -1: 0}
#: ``StreamId`` of the schema: 1 to 200 characters of this set, the whole string.
_STREAM_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_MAX_TEXT = 200  # ``user_id`` and ``id``
_ABSENT = object()  # a field not in the message

_STREAM_ID_FORM = "a string of 1 to 200 characters among A-Z a-z 0-9 . _ : -"
_TEXT_FORM = f"a string of at most {_MAX_TEXT} characters, or null"


def _show(value: object) -> str:
    """A short description of a JSON value, for a detail (bounded whatever the value)."""
    if type(value) is str:
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    if type(value) is int:
        return str(value) if -(10**30) < value < 10**30 else f"an integer of {value.bit_length()} bits"
    if type(value) is list:
        return f"a list of {len(value)} items"
    if type(value) is dict:
        return f"an object of {len(value)} keys"
    if value is None or type(value) is bool:
        return "null" if value is None else str(value).lower()
    return repr(value)  # a float


def _missing_or_wrong(field: str, value: object, form: str) -> Invalid:
    if value is _ABSENT:
        return Invalid("missing_field", f"{field}: required")
    return Invalid("wrong_type", f"{field}: should be {form}, got {_show(value)}")


class ExampleValidator:
    """Parses raw bytes into examples (or example batches) of known streams.

    ``domain_checks`` maps each stream id to a function that raises ``ValueError`` when ``x``
    is outside that stream's domain and ``TypeError`` when it is the wrong kind of point (see
    :func:`integer_domain` and :func:`vector_domain`); ``user_level`` names the streams whose
    privacy unit is the user (a ``user_id`` is required); ``event_time_skew`` maps the streams with
    time windows to their public maximum skew from ``clock()``.
    """

    def __init__(
        self,
        domain_checks: Mapping[str, Callable[[object], None]],
        user_level: frozenset[str] = frozenset(),
        *,
        event_time_skew: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        skews = event_time_skew or {}
        self._streams = {
            sid: Stream(check, sid in user_level, skews.get(sid), clock)
            for sid, check in domain_checks.items()
        }
        # Configured ids the schema accepts: one set lookup instead of the pattern, usually.
        self._good_ids = frozenset(sid for sid in domain_checks if _STREAM_ID.fullmatch(sid))

    def validate(self, raw: bytes | None) -> ValidExample | ExampleBatch | Invalid:
        if raw is None:
            return Invalid("invalid_json", "empty message (no value)")
        if len(raw) > MAX_MESSAGE_BYTES:
            return Invalid("invalid_json", f"message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            data = pydantic_core.from_json(raw, allow_inf_nan=False)
        except ValueError as exc:
            # Not JSON, or NaN/Infinity literals, which the schema's parser reads (the fields then
            # reject them where a number must be finite; a batch with them is read as one example).
            if b"NaN" not in raw and b"Infinity" not in raw:
                return Invalid("invalid_json", f"message: Invalid JSON: {exc}")
            try:
                data = pydantic_core.from_json(raw)
            except ValueError as exc:
                return Invalid("invalid_json", f"message: Invalid JSON: {exc}")
        else:
            if type(data) is dict and "xs" in data:
                return self._batch(data)
        if type(data) is not dict:
            return Invalid("wrong_type", f"message: should be a JSON object, got {_show(data)}")
        example = self._example(data)
        if example is None:  # only pydantic can tell
            try:
                example = ValidExample.of(Example.model_validate_json(raw))
            except ValidationError as exc:
                return _classify(exc)
        elif type(example) is Invalid:
            return example
        return self._on_stream(example)

    def _example(self, data: dict) -> ValidExample | Invalid | None:
        """The schema's verdict on a single example, field by field in the model's order (pydantic
        reports the first field that fails); None where only pydantic can tell."""
        get = data.get
        stream_id = get("stream_id", _ABSENT)
        if type(stream_id) is not str or (
            stream_id not in self._good_ids and not _STREAM_ID.fullmatch(stream_id)
        ):
            return _missing_or_wrong("stream_id", stream_id, _STREAM_ID_FORM)
        x = get("x", _ABSENT)
        if type(x) is not int:  # bool is not int here, as for the schema's StrictInt
            if type(x) is list:
                return None  # a feature vector: pydantic checks (and converts) its items
            return _missing_or_wrong("x", x, "an integer >= 0 or a list of numbers")
        if x < 0:
            return Invalid("out_of_domain", f"x: should be >= 0, got {_show(x)}")
        y = get("y", _ABSENT)
        label = _LABELS.get(y) if type(y) is int or type(y) is bool else None
        if label is None:
            if y is _ABSENT:
                return Invalid("missing_field", "y: required")
            return Invalid("invalid_label", f"y: label must be 0/1, -1/+1 or a boolean, got {_show(y)}")
        user_id = get("user_id")
        if user_id is not None and (type(user_id) is not str or len(user_id) > _MAX_TEXT):
            return _missing_or_wrong("user_id", user_id, _TEXT_FORM)
        event_time = get("event_time")
        if event_time is not None:
            if type(event_time) in (list, dict, bool):
                return _missing_or_wrong("event_time", event_time, "a date and time (ISO 8601)")
            return None  # a time to parse: pydantic's job
        example_id = get("id")
        if example_id is not None and (type(example_id) is not str or len(example_id) > _MAX_TEXT):
            return _missing_or_wrong("id", example_id, _TEXT_FORM)
        # tuple.__new__: half the cost of the NamedTuple's own constructor, on the hot path.
        return tuple.__new__(ValidExample, (stream_id, x, label, user_id, None, example_id))

    def _batch(self, data: dict) -> ExampleBatch | Invalid:
        try:
            batch = ExampleBatch.model_validate(data)
        except ValidationError as exc:
            return _classify(exc)
        return self._on_stream(batch)

    def _on_stream(self, example: ValidExample | ExampleBatch) -> ValidExample | ExampleBatch | Invalid:
        stream = self._streams.get(example.stream_id)
        for rule in STREAM_RULES:
            invalid = rule.check(stream, example)
            if invalid is not None:
                return invalid
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


def _classify(exc: ValidationError) -> Invalid:
    """Map pydantic's first error to one of :data:`SCHEMA_REASONS` (what pydantic decides)."""
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
