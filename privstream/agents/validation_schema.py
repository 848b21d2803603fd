"""Reading a message's JSON and checking ``Example``'s fields without pydantic, as pydantic would:
steps 1 and 2 of :mod:`privstream.agents.validation`. The rule: a verdict here is the one the schema
gives (the property tests hold it to pydantic's), at a bounded cost and with a bounded detail
whatever the input; a batch's columns are read as the schema reads them, row by row where one fails.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, NamedTuple, final

import msgspec
import pydantic_core
from pydantic import TypeAdapter, ValidationError

from privstream.agents.validation_rules import Invalid
from privstream.schemas.examples import EventTime, Label, Point, Text, UserId

#: The largest message read (8 MiB, what the ingest consumer fetches per partition at most). A
#: larger one is rejected whole (``message_too_large``): the examples topic is created with this
#: limit (``max.message.bytes``), so Kafka refuses such a message before any worker sees it.
MAX_MESSAGE_BYTES = 8 << 20


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
        return f"HugeNumber({show_value(self)})"


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
        return read_json_after(raw, exc)


def read_json_after(raw: bytes, error: ValueError) -> Any:
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
LABELS: dict[object, int] = {0: 0, 1: 1, -1: 0}
#: ``StreamId`` of the schema: 1 to 200 characters of this set, the whole string.
STREAM_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
MAX_TEXT = 200  # ``user_id`` and ``id``
ABSENT = object()  # a field not in the message

STREAM_ID_FORM = "a string of 1 to 200 characters among A-Z a-z 0-9 . _ : -"
TEXT_FORM = f"a string of at most {MAX_TEXT} characters, or null"
USER_ID_FORM = f"a string of at most {MAX_TEXT} characters without NUL, or null"
POINT_FORM = "an integer >= 0 or a list of numbers"


def show_value(value: object) -> str:
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


def missing_or_wrong(field: str, value: object, form: str) -> Invalid:
    if value is ABSENT:
        return Invalid("missing_field", f"{field}: required")
    if type(value) is HugeNumber:
        return Invalid("out_of_range", f"{field}: {show_value(value)}, more than can be read")
    return Invalid("wrong_type", f"{field}: should be {form}, got {show_value(value)}")


def not_finite(field: str, value: object) -> Invalid:
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
    read = list(map(LABELS.get, column))  # True and False hash as 1 and 0
    return None if None in read else read  # type: ignore[return-value]


def class_label(y: object, classes: int) -> int | None:
    """A label of a stream of ``classes`` > 2 classes, as the schema reads it (None if it is not one)."""
    if type(y) is bool:
        return int(y)
    if type(y) is int and 0 <= y < classes:
        return y
    return None


#: The columns of an ``ExampleBatch``, in the order of ``Example``'s fields.
BATCH_COLUMNS = (
    _column("xs", "x", Point),
    _column("ys", "y", Label, _read_labels),
    _column("user_ids", "user_id", UserId | None),
    _column("event_times", "event_time", EventTime | None),
    _column("ids", "id", Text | None),
)
REQUIRED_COLUMNS = ("xs", "ys")


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


PLAIN_DECODER = msgspec.json.Decoder(PlainExample)
JSON_NULL = msgspec.Raw(b"null")
#: Brackets (``[`` and ``{``) a message may hold for the fast path: fewer than the nesting the schema's
#: reader refuses (202 levels, where msgspec reads 999), so that both read the same messages. A message
#: this short cannot hold more: only longer ones are counted.
FAST_BRACKETS = 128
#: The event time as the schema reads it from the parsed JSON value.
EVENT_TIME = TypeAdapter(EventTime)


def check_columns(columns: dict[str, list[Any]], classes: int = 2) -> tuple[dict[str, list[Any]], set[int]]:
    """The columns as the schema reads them (labels of ``classes`` classes), all as long as the
    longest (an entry a row lacks, or the schema rejects, is None), and the rows with such an entry."""
    rows = max(map(len, columns.values()))
    context = None if classes == 2 else {"classes": classes}
    values: dict[str, list[Any]] = {}
    failed: set[int] = set()
    for name, _, check_column, check_entry, read in BATCH_COLUMNS:
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


def row_of(stream_id: str, columns: dict[str, list[Any]], i: int) -> dict[str, Any]:
    """Row ``i`` of a batch as the single example it stands for (its fields as given)."""
    row: dict[str, Any] = {"stream_id": stream_id}
    for name, field, *_ in BATCH_COLUMNS:
        column = columns.get(name)
        if column is not None and i < len(column):
            row[field] = column[i]
    return row


def row_message(stream_id: str, columns: dict[str, list[Any]], i: int) -> bytes:
    """Row ``i`` as a single-example message (JSON; a number too long to read as a string)."""
    return json.dumps(row_of(stream_id, columns, i), ensure_ascii=False, default=str).encode(
        "utf-8", "surrogatepass"
    )


def classify(exc: ValidationError) -> Invalid:
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
            return Invalid("out_of_range", f"{at}: {show_value(value)}, more than can be read")
        if field == ("x",) and (
            other["type"] == "finite_number" or (type(value) is float and not math.isfinite(value))
        ):
            return not_finite(at, value)
    if kind == "json_invalid":
        return Invalid("invalid_json", detail)
    if kind == "missing":
        return Invalid("missing_field", detail)
    if field == ("y",) and kind == "value_error":
        return Invalid("invalid_label", detail)
    if field == ("x",) and kind in ("greater_than_equal", "less_than"):
        return Invalid("out_of_domain", detail)
    return Invalid("wrong_type", detail)
