"""Validation of raw input messages, inside the agent (never in a faust codec: codec errors
can silently kill a consumer, faust-streaming #175).

A message is an example of a configured stream whose ``x`` lies in the stream's domain, an
``ExampleBatch`` (many examples of one stream as columns), or an :class:`Invalid` with a reason from
the bounded set :data:`INVALID_REASONS` (which becomes a metric label and a dead-letter header).

**One example decides its own fate.** A batch is checked row by row: row ``i`` (entry ``i`` of every
column) is valid exactly when the same fields sent as a single example would be, and an invalid row
is rejected alone (:class:`RejectedRow`) while the other rows are kept (:class:`ValidRows`). Only what
concerns every row at once rejects a whole batch: a message that is not JSON or larger than
:data:`MAX_MESSAGE_BYTES`, a ``stream_id`` that is missing, malformed or not configured, a column
that is not a list (or no ``xs``/``ys`` at all). A batch has no row limit: every row is read.

The checks, in this order; the first thing wrong names the reason:

1. reading the JSON (``message_too_large``, ``invalid_json``; a number with more digits than Python
   reads, 4,300, is ``out_of_range`` where it stands, not a reason to reject the message);
2. the schema (:class:`~privstream.schemas.Example`), field by field in the model's order
   (``missing_field``, ``wrong_type``, ``out_of_domain`` for a negative ``x``, ``invalid_label``,
   ``not_finite`` for a NaN or infinite ``x`` or feature, ``out_of_range``);
3. the stream: ``unknown_stream``, then the stream's rules, :data:`STREAM_RULES`, in their order (the
   stream's domain, user ids, and for time windows ``event_time_out_of_range``: an event time further
   than the stream's public maximum skew from the worker's clock, so that no example can move a time
   window's schedule). A batch's stream is checked before its rows.

Step 2 is decided without pydantic for single-example messages: :meth:`ExampleValidator.validate`
checks the fields itself, accepting exactly what the model accepts and rejecting with the reason
pydantic's first error maps to (a property test holds it to that). An invalid message then costs
about what a valid one costs (1-3 µs, where building and classifying pydantic's ``ValidationError``
takes 4-5 µs), so a flood of invalid messages cannot slow the service to a crawl. What it cannot
decide cheaply (a feature vector ``x``, an ``event_time`` to parse) goes to pydantic. A batch's
columns are checked by pydantic all at once (the rows' types are the fields' types), and only the
rows that fail are looked at one by one. Details are bounded whatever the input.

>>> validator = ExampleValidator({"s": integer_domain(lambda x: None)})
>>> validator.validate(b'{"stream_id": "s", "x": 3, "y": -1}')
ValidExample(stream_id='s', x=3, y=0, user_id=None, event_time=None, id=None)
>>> validator.validate(b'{"stream_id": "s", "x": "3", "y": 7}')
Invalid(reason='wrong_type', detail="x: should be an integer >= 0 or a list of numbers, got '3'")
>>> validator.validate(b'{"stream_id": "t", "x": 3, "y": 1}')
Invalid(reason='unknown_stream', detail="stream 't' is not configured")
>>> rows = validator.validate(b'{"stream_id": "s", "xs": [1, "2", 3], "ys": [1, 0, 1]}')
>>> rows.rows, rows.xs
([0, 2], [1, 3])
>>> rows.rejected[0].row, rows.rejected[0].invalid.reason, rows.rejected[0].value
(1, 'wrong_type', b'{"stream_id": "s", "x": "2", "y": 0}')

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

**Tabular streams** have a row encoder (``encoders``): a single example's ``x``, or each row of a
batch's ``xs``, is a row of named cells that the encoder turns into the feature vector before
anything else checks it, or refuses (``unknown_category``, ``missing_value``, ``wrong_type``,
``not_finite``: :data:`ENCODING_REASONS` are its own). The dead letter of a refused row holds the row
as sent.

A rule's check, called the way :meth:`ExampleValidator.validate` calls it:

>>> user_level = Stream(domain=integer_domain(lambda x: None), user_level=True)
>>> _users_given(user_level, 1, None, None)
Invalid(reason='missing_field', detail="user_id: required by the stream's user-level privacy")
>>> _users_given(user_level, 1, "alice", None) is None
True
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, NamedTuple, final

import msgspec
import pydantic_core
from pydantic import TypeAdapter, ValidationError

from privstream.learning.errors import InvariantError
from privstream.schemas import Example
from privstream.schemas.examples import EventTime, Label, Point, Text, UserId

#: The largest message read (8 MiB, what the ingest consumer fetches per partition at most). A
#: larger one is rejected whole (``message_too_large``): the examples topic is created with this
#: limit (``max.message.bytes``), so Kafka refuses such a message before any worker sees it.
MAX_MESSAGE_BYTES = 8 << 20


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


def _in_domain(stream: Stream, x: Any, user_id: str | None, event_time: datetime | None) -> Invalid | None:
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
            invalid = _in_domain(stream, x, None, None)  # the same check again, for its verdict
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
    StreamRule(("wrong_type", "out_of_domain"), lambda stream: True, _in_domain, _in_domain_rows),
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


# --- reading JSON -------------------------------------------------------------------------------


class HugeNumber:
    """A JSON integer with more digits than Python reads (``int`` refuses over 4,300): kept as its
    text so that the example holding it is rejected as ``out_of_range``, not the whole message.
    Neither a number, a string nor a sequence, so no field of the schema takes it."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"HugeNumber({_show(self)})"


def _int_or_huge(text: str) -> int | HugeNumber:
    try:
        return int(text)
    except ValueError:
        return HugeNumber(text)


def read_json(raw: bytes) -> Any:
    """The JSON value of ``raw``, or an :class:`Invalid` (``invalid_json``).

    ``NaN`` and ``Infinity`` literals are read (as floats; the schema then says where they are not
    allowed), and so are integers too long for Python (as :class:`HugeNumber`).

    >>> read_json(b'{"x": NaN}')
    {'x': nan}
    >>> type(read_json(b'[1' + b'0' * 5000 + b']')[0]).__name__
    'HugeNumber'
    """
    try:
        return pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        return _read_json_after(raw, exc)


def _read_json_after(raw: bytes, error: ValueError) -> Any:
    """:func:`read_json` once the strict reading failed with ``error``."""
    if b"NaN" in raw or b"Infinity" in raw:
        try:
            return pydantic_core.from_json(raw)
        except ValueError as exc:
            error = exc
    if str(error).startswith("number out of range"):
        # Rare: the standard library reads the rest alike and hands over each integer's text.
        try:
            data = json.loads(raw.decode("utf-8"), parse_int=_int_or_huge)
        except (ValueError, RecursionError):
            pass
        else:
            if not _lone_surrogate_in(data):  # which the first reader refuses (not UTF-8)
                return data
    return Invalid("invalid_json", f"message: Invalid JSON: {str(error)[:300]}")


def _lone_surrogate_in(data: Any) -> bool:
    """Whether a string in ``data`` holds half of a UTF-16 surrogate pair (``"\\ud800"``)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            stack += value.keys()
            stack += value.values()
        elif type(value) is list:
            stack += value
        elif type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


# --- the schema without pydantic: the fields of ``Example`` in its order -------------------------

#: Labels as ``normalise_label`` maps them (True and False hash as 1 and 0).
_LABELS: dict[object, int] = {0: 0, 1: 1, -1: 0}
#: ``StreamId`` of the schema: 1 to 200 characters of this set, the whole string.
_STREAM_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_MAX_TEXT = 200  # ``user_id`` and ``id``
_ABSENT = object()  # a field not in the message

_STREAM_ID_FORM = "a string of 1 to 200 characters among A-Z a-z 0-9 . _ : -"
_TEXT_FORM = f"a string of at most {_MAX_TEXT} characters, or null"
_USER_ID_FORM = f"a string of at most {_MAX_TEXT} characters without NUL, or null"
_POINT_FORM = "an integer >= 0 or a list of numbers"


def _show(value: object) -> str:
    """A short description of a JSON value, for a detail (bounded whatever the value)."""
    if type(value) is str:
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    if type(value) is int:
        return str(value) if -(10**30) < value < 10**30 else f"an integer of {value.bit_length()} bits"
    if type(value) is HugeNumber:
        return f"an integer of {len(value.text.lstrip('-'))} digits"
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
    if type(value) is HugeNumber:
        return Invalid("out_of_range", f"{field}: {_show(value)}, more than can be read")
    return Invalid("wrong_type", f"{field}: should be {form}, got {_show(value)}")


def _not_finite(field: str, value: object) -> Invalid:
    return Invalid("not_finite", f"{field}: should be a finite number, got {value!r}")


class _Column(NamedTuple):
    """A column of ``ExampleBatch``: its name, its field in ``Example``, pydantic's check of a whole
    column and of one entry (the field's own type), and a faster way to read a column of valid
    entries alike (None when it cannot)."""

    name: str
    field: str
    check: TypeAdapter[list[Any]]
    check_entry: TypeAdapter[Any]
    read: Callable[[list[Any], int], list[Any] | None] | None = None


def _column(
    name: str, field: str, entry: Any, read: Callable[[list[Any], int], list[Any] | None] | None = None
) -> _Column:
    return _Column(name, field, TypeAdapter(list[entry]), TypeAdapter(entry), read)


def _read_labels(column: list[Any], classes: int = 2) -> list[int] | None:
    """The labels as ``normalise_label`` reads them, if every one is a valid label (else None)."""
    if not {int, bool}.issuperset(map(type, column)):
        return None
    if classes != 2:
        labels = [int(y) for y in column]  # True and False as 1 and 0
        return labels if not labels or (min(labels) >= 0 and max(labels) < classes) else None
    read = list(map(_LABELS.get, column))  # True and False hash as 1 and 0
    return None if None in read else read  # type: ignore[return-value]


def _class_label(y: object, classes: int) -> int | None:
    """A label of a stream of ``classes`` > 2 classes, as the schema reads it (None if it is not one)."""
    if type(y) is bool:
        return int(y)
    if type(y) is int and 0 <= y < classes:
        return y
    return None


#: The columns of an ``ExampleBatch``, in the order of ``Example``'s fields.
_COLUMNS = (
    _column("xs", "x", Point),
    _column("ys", "y", Label, _read_labels),
    _column("user_ids", "user_id", UserId | None),
    _column("event_times", "event_time", EventTime | None),
    _column("ids", "id", Text | None),
)
_REQUIRED_COLUMNS = ("xs", "ys")


# --- the fast path: one typed decoding by msgspec --------------------------------------------------


@final  # exact-type checks (`type(x) is PlainExample`) on the hot path narrow only for final classes
class PlainExample(msgspec.Struct, gc=False):
    """A valid single example as the fast path reads it, straight from msgspec: the fields of
    :class:`ValidExample` (``y`` already 0 or 1, no event time), without building a tuple after it.

    msgspec decodes a message into it in one pass, typed (~0.5 µs, a fifth of reading the JSON and
    checking the fields in Python), with types no looser than the schema's; what the schema reads
    differently (a label -1 or true, an event time to parse, a float point, anything invalid) is
    decided by the full checks, so the fast path never changes a verdict (the property tests hold
    :meth:`ExampleValidator.validate` to pydantic's with it)."""

    stream_id: str
    x: (
        Annotated[int, msgspec.Meta(ge=0)]
        | Annotated[list[float], msgspec.Meta(min_length=1, max_length=10_000)]
    )
    y: bool | int
    user_id: str | None = None
    id: str | None = None
    # Kept as their JSON text: a given event time is parsed as the schema parses it; ``xs`` makes
    # the message a batch.
    event_text: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="event_time")
    xs: msgspec.Raw = msgspec.Raw(b"")

    event_time: ClassVar[None] = None  # as a ValidExample's, for the pipeline


_PLAIN = msgspec.json.Decoder(PlainExample)
_NULL = msgspec.Raw(b"null")
#: Brackets (``[`` and ``{``) a message may hold for the fast path: fewer than the nesting the schema's
#: reader refuses (202 levels, where msgspec reads 999), so that both read the same messages. A message
#: this short cannot hold more: only longer ones are counted.
_FAST_BRACKETS = 128
#: The event time as the schema reads it from the parsed JSON value.
_EVENT_TIME = TypeAdapter(EventTime)


class ExampleValidator:
    """Parses raw bytes into examples (or the rows of example batches) of known streams.

    ``domain_checks`` maps each stream id to a function that raises ``ValueError`` when ``x``
    is outside that stream's domain and ``TypeError`` when it is the wrong kind of point (see
    :func:`integer_domain` and :func:`vector_domain`); ``user_level`` names the streams whose
    privacy unit is the user (a ``user_id`` is required); ``event_time_skew`` maps the streams with
    time windows to their public maximum skew from ``clock()``; ``encoders`` maps the tabular streams
    to their row encoders (:data:`RowEncoder`; ``domain_checks`` then checks the encoded vector);
    ``classes`` maps the streams of more than two classes to their number of classes ``K`` (labels
    ``0..K-1``; the others' are 0/1).
    """

    def __init__(
        self,
        domain_checks: Mapping[str, Callable[[object], None]],
        user_level: frozenset[str] = frozenset(),
        *,
        event_time_skew: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
        encoders: Mapping[str, RowEncoder] | None = None,
        classes: Mapping[str, int] | None = None,
    ):
        skews = event_time_skew or {}
        self._encoders = dict(encoders or {})
        #: The streams of K > 2 classes: their labels are read as classes, not as 0/1.
        self._classes = {sid: k for sid, k in (classes or {}).items() if k != 2 and sid in domain_checks}
        self._streams = {
            sid: Stream(check, sid in user_level, skews.get(sid), clock, self._classes.get(sid, 2))
            for sid, check in domain_checks.items()
        }
        # Each stream's rules, chosen once: only those that apply to it run per example.
        self._applying = {
            sid: tuple(rule for rule in STREAM_RULES if rule.applies(stream))
            for sid, stream in self._streams.items()
        }
        self._rules = {sid: tuple(rule.check for rule in rules) for sid, rules in self._applying.items()}
        # Configured ids the schema accepts: one set lookup instead of the pattern, usually.
        self._good_ids = frozenset(sid for sid in domain_checks if _STREAM_ID.fullmatch(sid))
        # Streams of integer points whose one rule is the domain [0, size): the fast path compares.
        self._sizes = {
            sid: check.size
            for sid, check in domain_checks.items()
            if sid in self._good_ids
            and type(check) is IntegerDomain
            and check.size is not None
            and self._rules[sid] == (_in_domain,)
        }

    def read(self, raw: bytes | None) -> PlainExample | ValidExample | ValidRows | Invalid:
        """:meth:`validate` as the ingest pipeline calls it: a plain valid example (the usual message)
        comes as the :class:`PlainExample` msgspec read, with the same fields as a ``ValidExample``.

        The fast path: msgspec decodes the message; a valid example is returned as it is read,
        anything else (invalid, or not plainly valid) goes to the full checks, which decide and name
        what is wrong."""
        # Only ASCII: msgspec does not check the UTF-8 of what it skips; the schema's reader refuses it.
        if (
            raw is None
            or not raw.isascii()
            or len(raw) > MAX_MESSAGE_BYTES
            or (len(raw) > _FAST_BRACKETS and raw.count(b"[") + raw.count(b"{") > _FAST_BRACKETS)
        ):
            return self._validate(raw)
        try:
            example = _PLAIN.decode(raw)
        except (msgspec.DecodeError, RecursionError):  # not valid, or not plainly
            return self._validate(raw)
        stream_id, x, y, user_id, example_id = (
            example.stream_id,
            example.x,
            example.y,
            example.user_id,
            example.id,
        )
        if (
            example.xs
            or stream_id not in self._good_ids
            or stream_id in self._encoders  # a row to encode: the full checks
            or (user_id is not None and (len(user_id) > _MAX_TEXT or "\x00" in user_id))
            or (example_id is not None and len(example_id) > _MAX_TEXT)
        ):
            return self._validate(raw)
        event_text = example.event_text
        timeless = not event_text or event_text == _NULL
        size = self._sizes.get(stream_id)
        if timeless and size is not None and type(x) is int and x < size and type(y) is int and 0 <= y <= 1:
            return example  # the usual message: nothing more to check or to build
        classes = self._classes.get(stream_id)
        label = _LABELS.get(y) if classes is None else _class_label(y, classes)  # True, False: 1, 0
        if label is None or (type(x) is list and not all(map(math.isfinite, x))):
            return self._validate(raw)
        event_time = None
        if not timeless:
            value = pydantic_core.from_json(bytes(event_text))
            if type(value) in (list, dict, bool):
                return self._validate(raw)
            try:
                event_time = _EVENT_TIME.validate_python(value)
            except ValidationError:
                return self._validate(raw)
        stream = self._streams[stream_id]
        for check in self._rules[stream_id]:
            if check(stream, x, user_id, event_time) is not None:
                return self._validate(raw)
        if event_time is None and type(y) is int and label == y:  # 0 or 1, no time: as read
            return example
        return tuple.__new__(ValidExample, (stream_id, x, label, user_id, event_time, example_id))

    def validate(self, raw: bytes | None) -> ValidExample | ValidRows | Invalid:
        """A valid example, the rows of a batch, or why the message is invalid."""
        result = self.read(raw)
        if type(result) is PlainExample:
            return ValidExample(result.stream_id, result.x, result.y, result.user_id, None, result.id)
        return result

    def read_parts(
        self, raw: bytes | None, rows: int
    ) -> Iterator[PlainExample | ValidExample | ValidRows | Invalid]:
        """:meth:`read` in parts, lazily: an ``ExampleBatch`` of more than ``rows`` rows is read
        once and then checked ``rows`` rows at a time, each slice's valid rows and rejected rows
        (numbered in the whole batch) in turn; any other message is one part, as :meth:`read`
        gives it. A row's verdict is the one it gets in the whole batch (each row decides its own
        fate), so the parts together are :meth:`read`'s result.

        >>> from privstream.learning.hypothesis_classes import parse_class_spec
        >>> v = ExampleValidator({"s": integer_domain(parse_class_spec("thresholds:10").check_point)})
        >>> message = b'{"stream_id": "s", "xs": [1, 2, 30, 4, 5], "ys": [0, 1, 1, 0, 1]}'
        >>> [(part.rows, [r.row for r in part.rejected]) for part in v.read_parts(message, 2)]
        [([0, 1], []), ([3], [2]), ([4], [])]
        """
        # A row takes 4 bytes at least (an entry and a comma in xs and in ys): a message of at most
        # 4 * rows bytes holds at most ``rows`` rows, and is one part.
        if raw is None or len(raw) <= 4 * rows or len(raw) > MAX_MESSAGE_BYTES:
            yield self.read(raw)
            return
        data = self._json(raw)
        if type(data) is not dict or "xs" not in data:
            yield self._checked(data)
            return
        message = self._batch_message(data)
        if type(message) is Invalid:
            yield message
            return
        stream_id, columns = message
        total = max(map(len, columns.values()))
        for lo in range(0, total, max(1, rows)):
            yield self._batch_rows(stream_id, columns, lo, min(total, lo + max(1, rows)))

    def _validate(self, raw: bytes | None) -> ValidExample | ValidRows | Invalid:
        """:meth:`validate` without the fast path: the JSON read, then the schema's checks field by
        field, then the stream's."""
        if raw is None:
            return Invalid("invalid_json", "empty message (no value)")
        if len(raw) > MAX_MESSAGE_BYTES:
            return Invalid("message_too_large", f"message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES}")
        return self._checked(self._json(raw))

    def _json(self, raw: bytes) -> Any:
        """The message's JSON value, or why it is not JSON."""
        try:
            return pydantic_core.from_json(raw, allow_inf_nan=False)
        except ValueError as exc:
            return _read_json_after(raw, exc)  # NaN, Infinity or very long integers; or not JSON at all

    def _checked(self, data: Any) -> ValidExample | ValidRows | Invalid:
        """The checks of a message's JSON value (:meth:`_json`)."""
        if type(data) is Invalid:
            return data
        if type(data) is not dict:
            return Invalid("wrong_type", f"message: should be a JSON object, got {_show(data)}")
        if "xs" in data:
            return self._batch(data)
        return self._single(data)

    def _single(self, data: dict[str, Any]) -> ValidExample | Invalid:
        stream_id = data.get("stream_id")  # any JSON value: only a string can name a tabular stream
        encode = self._encoders.get(stream_id) if self._encoders and type(stream_id) is str else None
        vector: list[float] | None = None
        if encode is not None and "x" in data:  # a row: its vector, then the checks as for any vector
            encoded = encode(data["x"])
            if type(encoded) is Invalid:
                return encoded
            vector = encoded
            data = {**data, "x": vector}
        # The encoder's vector is a point of the schema (finite floats, its length): the other fields
        # are checked as beside any point (0 stands in for it), without pydantic where it can.
        example = self._example(data if vector is None else {**data, "x": 0})
        if vector is not None and type(example) is ValidExample:
            example = example._replace(x=vector)
        if example is None:  # only pydantic can tell
            classes = self._classes.get(data["stream_id"])  # a valid stream id, or _example tells
            try:
                context = None if classes is None else {"classes": classes}
                example = ValidExample.of(Example.model_validate(data, context=context))
            except ValidationError as exc:
                return _classify(exc)
        elif type(example) is Invalid:
            return example
        rules = self._rules.get(example.stream_id)
        if rules is None:
            return Invalid("unknown_stream", f"stream {example.stream_id!r} is not configured")
        stream = self._streams[example.stream_id]
        for check in rules:
            invalid = check(stream, example.x, example.user_id, example.event_time)
            if invalid is not None:
                return invalid
        return example

    def _example(self, data: dict[str, Any]) -> ValidExample | Invalid | None:
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
            if type(x) is float and not math.isfinite(x):
                return _not_finite("x", x)
            return _missing_or_wrong("x", x, _POINT_FORM)
        if x < 0:
            return Invalid("out_of_domain", f"x: should be >= 0, got {_show(x)}")
        y = get("y", _ABSENT)
        classes = self._classes.get(stream_id)
        if classes is not None:
            label = _class_label(y, classes)
        else:
            label = _LABELS.get(y) if type(y) is int or type(y) is bool else None
        if label is None:
            if y is _ABSENT or type(y) is HugeNumber:
                return _missing_or_wrong("y", y, "a label")
            if classes is not None:
                return Invalid(
                    "invalid_label",
                    f"y: label must be a class from 0 to {classes - 1} (an integer), got {_show(y)}",
                )
            return Invalid("invalid_label", f"y: label must be 0/1, -1/+1 or a boolean, got {_show(y)}")
        user_id = get("user_id")
        if user_id is not None and (
            type(user_id) is not str or len(user_id) > _MAX_TEXT or "\x00" in user_id
        ):
            return _missing_or_wrong("user_id", user_id, _USER_ID_FORM)
        event_time = get("event_time")
        if event_time is not None:
            if type(event_time) in (list, dict, bool, HugeNumber):
                return _missing_or_wrong("event_time", event_time, "a date and time (ISO 8601)")
            return None  # a time to parse: pydantic's job
        example_id = get("id")
        if example_id is not None and (type(example_id) is not str or len(example_id) > _MAX_TEXT):
            return _missing_or_wrong("id", example_id, _TEXT_FORM)
        # tuple.__new__: half the cost of the NamedTuple's own constructor, on the hot path.
        return tuple.__new__(ValidExample, (stream_id, x, label, user_id, None, example_id))

    # --- batches, row by row ----------------------------------------------------------------------

    def _batch(self, data: dict[str, Any]) -> ValidRows | Invalid:
        message = self._batch_message(data)
        if type(message) is Invalid:
            return message
        stream_id, columns = message
        return self._batch_rows(stream_id, columns, 0, None)

    def _batch_rows(self, stream_id: str, sent: dict[str, list[Any]], lo: int, hi: int | None) -> ValidRows:
        """Rows ``[lo, hi)`` of a batch (``hi`` None: to its end), checked; ``sent``: its columns
        as sent, what a row's reason and its dead letter are made of. Rows are numbered in the
        whole batch."""
        columns = sent if lo == 0 and hi is None else {name: column[lo:hi] for name, column in sent.items()}
        encode = self._encoders.get(stream_id)
        if encode is not None:  # each row's vector; a refused row (None) is then judged as sent
            encoded = [encode(x) for x in columns["xs"]]
            columns = {**columns, "xs": [None if type(e) is Invalid else e for e in encoded]}
        values, failed = _check_columns(columns, self._classes.get(stream_id, 2))
        why = {i: self._row_invalid(stream_id, sent, lo + i) for i in sorted(failed)}
        # The stream's rules in their order, each on the rows no earlier check rejected.
        stream = self._streams[stream_id]
        xs, users, times = values["xs"], values.get("user_ids"), values.get("event_times")
        for rule in self._applying[stream_id]:
            if rule.check_rows is not None:
                rule.check_rows(stream, xs, users, times, why)
                continue
            for i, x in enumerate(xs):
                if i not in why:
                    invalid = rule.check(stream, x, users[i] if users else None, times[i] if times else None)
                    if invalid is not None:
                        why[i] = invalid
        ids, rows = values.get("ids"), len(xs)
        if not why:
            return ValidRows(
                stream_id, list(range(lo, lo + rows)), values["xs"], values["ys"], users, times, ids, []
            )
        kept = [i for i in range(rows) if i not in why]

        def pick(column: list[Any]) -> list[Any]:
            return [column[i] for i in kept]

        return ValidRows(
            stream_id,
            [lo + i for i in kept],
            pick(values["xs"]),
            pick(values["ys"]),
            None if users is None else pick(users),
            None if times is None else pick(times),
            None if ids is None else pick(ids),
            [RejectedRow(lo + i, why[i], _row_message(stream_id, sent, lo + i)) for i in sorted(why)],
        )

    def _batch_message(self, data: dict[str, Any]) -> tuple[str, dict[str, list[Any]]] | Invalid:
        """What concerns every row of a batch: its stream, and columns that are lists (the ones it
        gives, by name); else why the whole message is rejected."""
        stream_id = data.get("stream_id", _ABSENT)
        if type(stream_id) is not str or (
            stream_id not in self._good_ids and not _STREAM_ID.fullmatch(stream_id)
        ):
            return _missing_or_wrong("stream_id", stream_id, _STREAM_ID_FORM)
        columns: dict[str, list[Any]] = {}
        for name, *_ in _COLUMNS:
            column = data.get(name, _ABSENT)
            if (column is None or column is _ABSENT) and name not in _REQUIRED_COLUMNS:
                continue  # an optional column left out
            if type(column) is not list:
                return _missing_or_wrong(name, column, "a list with an entry per row")
            columns[name] = column
        if not columns["xs"]:
            return Invalid("wrong_type", "xs: should have at least 1 row")
        if stream_id not in self._streams:
            return Invalid("unknown_stream", f"stream {stream_id!r} is not configured")
        return stream_id, columns

    def _row_invalid(self, stream_id: str, columns: dict[str, list[Any]], i: int) -> Invalid:
        """Why row ``i`` is invalid: a given column without an entry for it, else the reason the row
        gets as a single example (the same check, so a row's reason never depends on the batch)."""
        for name, field, *_ in _COLUMNS:
            column = columns.get(name)
            if column is not None and i >= len(column):
                return Invalid(
                    "missing_field",
                    f"{field}: {name} has no entry for row {i} ({len(column)} entries)",
                )
        result = self._single(_row(stream_id, columns, i))
        if type(result) is not Invalid:  # the column's check and the field's are the same type
            return Invalid("wrong_type", f"row {i}: an entry is not of its field's type")
        return result


def _check_columns(columns: dict[str, list[Any]], classes: int = 2) -> tuple[dict[str, list[Any]], set[int]]:
    """The columns as the schema reads them (labels of ``classes`` classes), all as long as the
    longest (an entry a row lacks, or the schema rejects, is None), and the rows with such an entry."""
    rows = max(map(len, columns.values()))
    context = None if classes == 2 else {"classes": classes}
    values: dict[str, list[Any]] = {}
    failed: set[int] = set()
    for name, _, check_column, check_entry, read in _COLUMNS:
        column = columns.get(name)
        if column is None:
            continue
        missing = rows - len(column)
        failed.update(range(len(column), rows))
        fast = read(column, classes) if read is not None else None
        if fast is not None:
            values[name] = fast + [None] * missing
            continue
        try:
            values[name] = check_column.validate_python(column, context=context) + [None] * missing
        except ValidationError as exc:
            bad = {err["loc"][0] for err in exc.errors(include_url=False, include_input=False)}
            failed.update(bad)  # type: ignore[arg-type]
            # the good entries converted one by one (the bad ones' rows are rejected)
            entry = check_entry.validate_python
            values[name] = [None if i in bad else entry(v, context=context) for i, v in enumerate(column)] + [
                None
            ] * missing
    return values, failed


def _row(stream_id: str, columns: dict[str, list[Any]], i: int) -> dict[str, Any]:
    """Row ``i`` of a batch as the single example it stands for (its fields as given)."""
    row: dict[str, Any] = {"stream_id": stream_id}
    for name, field, *_ in _COLUMNS:
        column = columns.get(name)
        if column is not None and i < len(column):
            row[field] = column[i]
    return row


def _row_message(stream_id: str, columns: dict[str, list[Any]], i: int) -> bytes:
    """Row ``i`` as a single-example message (JSON; a number too long to read as a string)."""
    return json.dumps(_row(stream_id, columns, i), ensure_ascii=False, default=str).encode(
        "utf-8", "surrogatepass"
    )


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


def _classify(exc: ValidationError) -> Invalid:
    """Map pydantic's first error to one of :data:`SCHEMA_REASONS` or :data:`VALUE_REASONS` (what
    pydantic decides). The first field that fails names the reason; a NaN or infinite point, or a
    number too long to read, anywhere in that field's errors, is named as such."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    kind, loc = err["type"], tuple(err.get("loc", ()))
    field = loc[:1]
    where = ".".join(str(p) for p in loc) or "message"
    detail = f"{where}: {err['msg']}"[:500]
    for other in errors:
        if tuple(other.get("loc", ()))[:1] != field:
            break
        value, at = other.get("input"), ".".join(str(p) for p in other["loc"])
        if type(value) is HugeNumber:
            return Invalid("out_of_range", f"{at}: {_show(value)}, more than can be read")
        if field == ("x",) and (
            other["type"] == "finite_number" or (type(value) is float and not math.isfinite(value))
        ):
            return _not_finite(at, value)
    if kind == "json_invalid":
        return Invalid("invalid_json", detail)
    if kind == "missing":
        return Invalid("missing_field", detail)
    if field == ("y",) and kind == "value_error":
        return Invalid("invalid_label", detail)
    if field == ("x",) and kind in ("greater_than_equal", "less_than"):
        return Invalid("out_of_domain", detail)
    return Invalid("wrong_type", detail)
