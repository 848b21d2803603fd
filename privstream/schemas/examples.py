"""The input event: one labelled example of a named stream.

Labels are 0/1 canonically; ``-1/+1`` and booleans are accepted on input and normalised. A stream
of ``K`` classes (``classes`` in its settings) takes the labels ``0..K-1``: validated with the context
``{"classes": K}``, where ``-1`` is no label (it is 0 only under the binary ``-1/+1`` convention).
``x`` is a point of the stream's domain: a non-negative integer for a stream with a hypothesis
class, or a feature vector (a list of numbers) for a stream of vector features.

>>> Example.model_validate_json('{"stream_id": "s", "x": 3, "y": -1}').y
0
>>> Example.model_validate({"stream_id": "s", "x": [0.5], "y": 7}, context={"classes": 10}).y
7

An :class:`ExampleBatch` is the same fields as columns; entry ``i`` of each column is one row, and
each row is checked as the example it stands for (the column types are the fields' types).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    FiniteFloat,
    StrictInt,
    ValidationInfo,
    model_validator,
)

SCHEMA_VERSION = 1

StreamId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")]
#: A point: an integer of a finite domain {0, ..., N-1}, or a feature vector.
Point = (
    Annotated[StrictInt, Field(ge=0)] | Annotated[list[FiniteFloat], Field(min_length=1, max_length=10_000)]
)


#: The most classes a stream may have (its labels fit a byte).
MAX_CLASSES = 256


def normalise_label(value: Any, classes: int = 2) -> int:
    """Map an accepted label to its class: with 2 classes 0/1, -1/+1 or true/false to 0/1; with
    ``classes`` K > 2 an integer ``0..K-1`` (or true/false, 1/0); raise ValueError otherwise.

    >>> normalise_label(-1), normalise_label(True), normalise_label(9, classes=10)
    (0, 1, 9)
    >>> normalise_label(-1, classes=10)
    Traceback (most recent call last):
    ...
    ValueError: label must be a class from 0 to 9 (an integer), got -1
    """
    # bool first: True == 1 in Python, but we want to accept it explicitly, not by accident.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if 0 <= value < classes:
            return value
        if value == -1 and classes == 2:
            return 0
    if classes == 2:
        raise ValueError(f"label must be 0/1, -1/+1 or a boolean, got {value!r}")
    raise ValueError(f"label must be a class from 0 to {classes - 1} (an integer), got {value!r}")


def _label(value: Any, info: ValidationInfo) -> int:
    """A label of a stream of ``info.context["classes"]`` classes (2 without a context)."""
    context = info.context
    classes = context.get("classes", 2) if isinstance(context, dict) else 2
    return normalise_label(value, classes)


def _utc(value: datetime) -> datetime:
    """A time without a zone is in UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


#: A label as sent (0/1, -1/+1, true/false), read as 0/1; a class 0..K-1 with the context {"classes": K}.
Label = Annotated[int, BeforeValidator(_label)]
#: ``id``: a short text.
Text = Annotated[str, Field(max_length=200)]
#: ``user_id``: a short text without NUL (the window store and the user ledger keep it as text, which
#: PostgreSQL cannot hold with a NUL in it).
UserId = Annotated[str, Field(max_length=200, pattern=r"^[^\x00]*$")]
#: An event time (ISO 8601, or Unix seconds); without a zone it is UTC.
EventTime = Annotated[datetime, AfterValidator(_utc)]


class Example(BaseModel):
    """A labelled example ``(x, y)`` of stream ``stream_id``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    stream_id: StreamId
    x: Point = Field(description="a point of the stream's domain {0, ..., N-1}, or a feature vector")
    y: Label = Field(
        description="label: 0/1 (also accepted: -1/+1, true/false); a class 0..K-1 on a stream of K classes"
    )
    user_id: UserId | None = Field(default=None, description="privacy unit at user level")
    event_time: EventTime | None = Field(default=None, description="when the example happened (UTC)")
    id: Text | None = Field(
        default=None,
        description="the producer's id: an example whose id its stream saw within the stream's "
        "dedup_horizon_seconds is dropped as a repeat",
    )


class ExampleBatch(BaseModel):
    """Many examples of one stream in one message: what high-volume producers should send.

    Columns of equal length; ``user_ids``, ``event_times`` and ``ids`` are optional columns. Row
    ``i`` (entry ``i`` of every column) is one example with the fields' types of :class:`Example`.
    The service reads a batch row by row: a row that is invalid is rejected alone, the others kept.

    >>> ExampleBatch.model_validate_json('{"stream_id": "s", "xs": [1, 2], "ys": [1, -1]}').ys
    [1, 0]
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    stream_id: StreamId
    xs: list[Point] = Field(min_length=1)
    ys: list[Label]
    user_ids: list[UserId | None] | None = None
    event_times: list[EventTime | None] | None = None
    ids: list[Text | None] | None = None

    @model_validator(mode="after")
    def _same_length(self) -> ExampleBatch:
        n = len(self.xs)
        for name in ("ys", "user_ids", "event_times", "ids"):
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise ValueError(f"{name} has {len(column)} entries, xs has {n}")
        return self
