"""What validation decides, and the rules a schema-valid example must also follow on its stream.

The outcomes are tuples (:class:`ValidExample`, :class:`Invalid`, :class:`ValidRows` with its
:class:`RejectedRow` entries): a flood builds one per message.

**Adding a rule** is one entry in :data:`STREAM_RULES`: a :class:`StreamRule` naming every reason
it can give, which streams it applies to, and a ``check(stream, x, user_id, event_time)`` returning
an :class:`Invalid` or None for one schema-valid example (``event_time`` parsed, in UTC). Its
reasons join :data:`INVALID_REASONS`, hence the metric's labels and the dead-letter headers; nothing
else changes. A rule that needs more of a stream's configuration adds a field to :class:`Stream`.

>>> [rule.reasons for rule in STREAM_RULES]
[('wrong_type', 'out_of_domain'), ('missing_field',), ('event_time_out_of_range',)]
>>> INVALID_REASONS[:6]  # the schema's reasons, the stream's, then the rules' new ones, in order
('invalid_json', 'missing_field', 'wrong_type', 'invalid_label', 'out_of_domain', 'unknown_stream')
>>> INVALID_REASONS[6:10]
('event_time_out_of_range', 'not_finite', 'out_of_range', 'message_too_large')
>>> INVALID_REASONS[10:]  # a tabular stream's row encoder's own
('unknown_category', 'missing_value')

A rule's check, called the way
:meth:`~privstream.agents.validation.ExampleValidator.validate` calls it:

>>> user_level = Stream(domain=integer_domain(lambda x: None), user_level=True)
>>> _users_given(user_level, 1, None, None)
Invalid(reason='missing_field', detail="user_id: required by the stream's user-level privacy")
>>> _users_given(user_level, 1, "alice", None) is None
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, final

from privstream.learning.errors import InvariantError
from privstream.schemas import Example


@final  # exact-type checks (`type(x) is ValidExample`) on the hot path narrow only for final classes
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


@final  # exact-type checks (`type(x) is Invalid`) on the hot path narrow only for final classes
class Invalid(NamedTuple):
    """Why a message (or a row of a batch) was rejected: a bounded ``reason`` and a human ``detail``
    (a tuple: a frozen dataclass costs ~5x more to build, and a flood builds one per message)."""

    reason: str
    detail: str


class RejectedRow(NamedTuple):
    """A row of a batch that is rejected alone: its index in the batch, why, and the row as the
    single-example message it stands for (JSON; what its dead letter carries)."""

    row: int
    invalid: Invalid
    value: bytes


@final  # exact-type checks (`type(x) is ValidRows`) on the hot path narrow only for final classes
class ValidRows(NamedTuple):
    """The valid rows of an ``ExampleBatch``, as columns in the batch's order, and its rejected rows.

    ``rows[k]`` is the index in the batch of the k-th valid row; ``user_ids``, ``event_times`` and
    ``ids`` are None when the batch has no such column."""

    stream_id: str
    rows: list[int]
    xs: list[Any]  # int points, or feature vectors (lists of floats)
    ys: list[int]
    user_ids: list[str | None] | None
    event_times: list[datetime | None] | None
    ids: list[str | None] | None
    rejected: list[RejectedRow]


class Stream(NamedTuple):
    """What the stream rules know of a configured stream."""

    domain: Callable[[object], None]  # raises TypeError (wrong kind of point) or ValueError (outside)
    user_level: bool  # the privacy unit is the user: every example needs a user_id
    event_time_skew: float | None = None  # time windows: the public maximum |event_time - clock()|
    clock: Callable[[], float] = time.time  # the worker's clock (tests inject one)
    classes: int = 2  # the labels are 0..classes-1 (2: 0/1, read from -1/+1 and booleans too)


Check = Callable[[Stream, Any, "str | None", "datetime | None"], "Invalid | None"]
#: ``check_rows(stream, xs, user_ids, event_times, why)``: the check on every row of a batch's columns
#: (``user_ids`` and ``event_times`` may be None), adding to ``why`` each row it rejects that ``why``
#: does not hold yet.
RowsCheck = Callable[
    [Stream, list[Any], "list[str | None] | None", "list[datetime | None] | None", "dict[int, Invalid]"], None
]


class StreamRule(NamedTuple):
    """A rule a schema-valid example must also follow on its stream.

    ``check(stream, x, user_id, event_time)`` returns the :class:`Invalid` it finds, or None; it is
    only called for the streams ``applies(stream)`` selects (once per stream, not per example). A
    batch's rows are checked one by one with it, or by ``check_rows`` where a rule has a faster way
    to the same verdicts (the batch tests hold each row's verdict to the one it gets alone)."""

    reasons: tuple[str, ...]  # every reason ``check`` can give
    applies: Callable[[Stream], bool]
    check: Check
    check_rows: RowsCheck | None = None


def in_domain(stream: Stream, x: Any, user_id: str | None, event_time: datetime | None) -> Invalid | None:
    try:
        stream.domain(x)
    except TypeError as exc:  # an integer for a vector stream, or the other way round
        return Invalid("wrong_type", str(exc)[:500])
    except ValueError as exc:
        return Invalid("out_of_domain", str(exc)[:500])
    return None


def _in_domain_rows(
    stream: Stream,
    xs: list[Any],
    user_ids: list[str | None] | None,
    event_times: list[datetime | None] | None,
    why: dict[int, Invalid],
) -> None:
    domain = stream.domain  # called directly: a batch's rows are mostly in the domain
    size = domain.size if type(domain) is IntegerDomain else None
    if size is not None and xs and set(map(type, xs)) == {int} and min(xs) >= 0 and max(xs) < size:
        return  # every row an integer of the domain: checked at C speed
    for i, x in enumerate(xs):
        try:
            domain(x)
        except (TypeError, ValueError):
            invalid = in_domain(stream, x, None, None)  # the same check again, for its verdict
            if i not in why and invalid is not None:
                why[i] = invalid


def _users_given(stream: Stream, x: Any, user_id: str | None, event_time: datetime | None) -> Invalid | None:
    if user_id is None:
        return Invalid("missing_field", "user_id: required by the stream's user-level privacy")
    return None


def _event_time_in_range(
    stream: Stream, x: Any, user_id: str | None, event_time: datetime | None
) -> Invalid | None:
    """Time windows close on the worker's clock; an event time far from it is refused before it
    touches a window, so a date ten years ahead moves nothing."""
    if stream.event_time_skew is None:
        raise InvariantError("invariant broken: stream.event_time_skew is not None")
    if event_time is not None and abs(event_time.timestamp() - stream.clock()) > stream.event_time_skew:
        return Invalid(
            "event_time_out_of_range",
            f"event_time {event_time.isoformat()} is more than {stream.event_time_skew:g} s from "
            "the worker's clock (the stream's max_event_time_skew_seconds)",
        )
    return None


#: What a schema-valid example must also satisfy on its stream, checked in this order (the first
#: rule broken names the reason). A new rule is one more entry here (see the module docstring):
#: :data:`INVALID_REASONS`, hence the metric's labels, follows.
STREAM_RULES: tuple[StreamRule, ...] = (
    StreamRule(("wrong_type", "out_of_domain"), lambda stream: True, in_domain, _in_domain_rows),
    StreamRule(("missing_field",), lambda stream: stream.user_level, _users_given),
    StreamRule(
        ("event_time_out_of_range",), lambda stream: stream.event_time_skew is not None, _event_time_in_range
    ),
)

#: What the schema rejects for, in the order it checks: parsing, then the fields of ``Example``.
SCHEMA_REASONS = ("invalid_json", "missing_field", "wrong_type", "invalid_label", "out_of_domain")
#: Values the schema rejects for what they are rather than their type: a NaN or infinite point
#: (``x`` or a feature), a number too long to read (more than 4,300 digits).
VALUE_REASONS = ("not_finite", "out_of_range")

#: What a tabular stream's row encoder refuses a row for, besides ``wrong_type`` and ``not_finite``:
#: a category its column does not declare, a missing cell its column has no public value for.
ENCODING_REASONS = ("unknown_category", "missing_value")

#: Every reason a message or row can be rejected for; bounded, so safe as a Prometheus label.
INVALID_REASONS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *SCHEMA_REASONS,
            "unknown_stream",
            *(reason for rule in STREAM_RULES for reason in rule.reasons),
            *VALUE_REASONS,
            "message_too_large",
            *ENCODING_REASONS,
        )
    )
)

#: A tabular stream's row encoder: a row (``x`` as sent) to its feature vector, or why it is refused
#: (an :class:`Invalid` whose reason is in :data:`INVALID_REASONS`).
RowEncoder = Callable[[object], "list[float] | Invalid"]


class IntegerDomain:
    """The domain check of a class stream: an integer point that ``check_point`` accepts. ``size``,
    when given, says that ``check_point`` accepts exactly ``0 <= x < size`` (a hypothesis class's
    domain): the validator's fast path then compares instead of calling it."""

    __slots__ = ("check_point", "size")

    def __init__(self, check_point: Callable[[int], None], size: int | None = None):
        self.check_point = check_point
        self.size = size

    def __call__(self, x: object) -> None:
        if type(x) is not int:
            raise TypeError("x: this stream's points are integers, not feature vectors")
        self.check_point(x)


def integer_domain(check_point: Callable[[int], None], size: int | None = None) -> IntegerDomain:
    """The domain check of a class stream (:class:`IntegerDomain`)."""
    return IntegerDomain(check_point, size)


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
