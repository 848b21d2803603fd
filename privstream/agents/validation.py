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

**Adding a rule** is one entry in :data:`STREAM_RULES` (see :mod:`~privstream.agents.validation_rules`).

**Tabular streams** have a row encoder (``encoders``): a single example's ``x``, or each row of a
batch's ``xs``, is a row of named cells that the encoder turns into the feature vector before
anything else checks it, or refuses (``unknown_category``, ``missing_value``, ``wrong_type``,
``not_finite``: :data:`ENCODING_REASONS` are its own). The dead letter of a refused row holds the row
as sent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec
import pydantic_core
from pydantic import ValidationError

from privstream.agents.validation_batches import BatchValidation
from privstream.agents.validation_rules import (
    ENCODING_REASONS,
    INVALID_REASONS,
    SCHEMA_REASONS,
    STREAM_RULES,
    VALUE_REASONS,
    IntegerDomain,
    Invalid,
    RejectedRow,
    RowEncoder,
    Stream,
    StreamRule,
    ValidExample,
    ValidRows,
    in_domain,
    integer_domain,
    vector_domain,
)
from privstream.agents.validation_schema import (
    ABSENT,
    EVENT_TIME,
    FAST_BRACKETS,
    JSON_NULL,
    LABELS,
    MAX_MESSAGE_BYTES,
    MAX_TEXT,
    PLAIN_DECODER,
    POINT_FORM,
    STREAM_ID,
    STREAM_ID_FORM,
    TEXT_FORM,
    USER_ID_FORM,
    HugeNumber,
    PlainExample,
    class_label,
    classify,
    missing_or_wrong,
    not_finite,
    read_json,
    read_json_after,
    show_value,
)
from privstream.schemas import Example

__all__ = [
    "ENCODING_REASONS",
    "INVALID_REASONS",
    "MAX_MESSAGE_BYTES",
    "SCHEMA_REASONS",
    "STREAM_RULES",
    "VALUE_REASONS",
    "ExampleValidator",
    "HugeNumber",
    "IntegerDomain",
    "Invalid",
    "PlainExample",
    "RejectedRow",
    "RowEncoder",
    "Stream",
    "StreamRule",
    "ValidExample",
    "ValidRows",
    "integer_domain",
    "read_json",
    "vector_domain",
]


class ExampleValidator(BatchValidation):
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
        self._good_ids = frozenset(sid for sid in domain_checks if STREAM_ID.fullmatch(sid))
        # Streams of integer points whose one rule is the domain [0, size): the fast path compares.
        self._sizes = {
            sid: check.size
            for sid, check in domain_checks.items()
            if sid in self._good_ids
            and type(check) is IntegerDomain
            and check.size is not None
            and self._rules[sid] == (in_domain,)
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
            or (len(raw) > FAST_BRACKETS and raw.count(b"[") + raw.count(b"{") > FAST_BRACKETS)
        ):
            return self._validate(raw)
        try:
            example = PLAIN_DECODER.decode(raw)
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
            or (user_id is not None and (len(user_id) > MAX_TEXT or "\x00" in user_id))
            or (example_id is not None and len(example_id) > MAX_TEXT)
        ):
            return self._validate(raw)
        event_text = example.event_text
        timeless = not event_text or event_text == JSON_NULL
        size = self._sizes.get(stream_id)
        if timeless and size is not None and type(x) is int and x < size and type(y) is int and 0 <= y <= 1:
            return example  # the usual message: nothing more to check or to build
        classes = self._classes.get(stream_id)
        label = LABELS.get(y) if classes is None else class_label(y, classes)  # True, False: 1, 0
        if label is None or (type(x) is list and not all(map(math.isfinite, x))):
            return self._validate(raw)
        event_time = None
        if not timeless:
            value = pydantic_core.from_json(bytes(event_text))
            if type(value) in (list, dict, bool):
                return self._validate(raw)
            try:
                event_time = EVENT_TIME.validate_python(value)
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
            return read_json_after(raw, exc)  # NaN, Infinity or very long integers; or not JSON at all

    def _checked(self, data: Any) -> ValidExample | ValidRows | Invalid:
        """The checks of a message's JSON value (:meth:`_json`)."""
        if type(data) is Invalid:
            return data
        if type(data) is not dict:
            return Invalid("wrong_type", f"message: should be a JSON object, got {show_value(data)}")
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
                return classify(exc)
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
        stream_id = get("stream_id", ABSENT)
        if type(stream_id) is not str or (
            stream_id not in self._good_ids and not STREAM_ID.fullmatch(stream_id)
        ):
            return missing_or_wrong("stream_id", stream_id, STREAM_ID_FORM)
        x = get("x", ABSENT)
        if type(x) is not int:  # bool is not int here, as for the schema's StrictInt
            if type(x) is list:
                return None  # a feature vector: pydantic checks (and converts) its items
            if type(x) is float and not math.isfinite(x):
                return not_finite("x", x)
            return missing_or_wrong("x", x, POINT_FORM)
        if x < 0:
            return Invalid("out_of_domain", f"x: should be >= 0, got {show_value(x)}")
        y = get("y", ABSENT)
        classes = self._classes.get(stream_id)
        if classes is not None:
            label = class_label(y, classes)
        else:
            label = LABELS.get(y) if type(y) is int or type(y) is bool else None
        if label is None:
            if y is ABSENT or type(y) is HugeNumber:
                return missing_or_wrong("y", y, "a label")
            if classes is not None:
                return Invalid(
                    "invalid_label",
                    f"y: label must be a class from 0 to {classes - 1} (an integer), got {show_value(y)}",
                )
            return Invalid("invalid_label", f"y: label must be 0/1, -1/+1 or a boolean, got {show_value(y)}")
        user_id = get("user_id")
        if user_id is not None and (type(user_id) is not str or len(user_id) > MAX_TEXT or "\x00" in user_id):
            return missing_or_wrong("user_id", user_id, USER_ID_FORM)
        event_time = get("event_time")
        if event_time is not None:
            if type(event_time) in (list, dict, bool, HugeNumber):
                return missing_or_wrong("event_time", event_time, "a date and time (ISO 8601)")
            return None  # a time to parse: pydantic's job
        example_id = get("id")
        if example_id is not None and (type(example_id) is not str or len(example_id) > MAX_TEXT):
            return missing_or_wrong("id", example_id, TEXT_FORM)
        # tuple.__new__: half the cost of the NamedTuple's own constructor, on the hot path.
        return tuple.__new__(ValidExample, (stream_id, x, label, user_id, None, example_id))
