"""The input event: one labelled example of a named stream.

Labels are 0/1 canonically; ``-1/+1`` and booleans are accepted on input and normalised.
``x`` is a point of the stream's domain: a non-negative integer for a stream with a hypothesis
class, or a feature vector (a list of numbers) for a stream of vector features.

>>> Example.model_validate_json('{"stream_id": "s", "x": 3, "y": -1}').y
0

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
    model_validator,
)

SCHEMA_VERSION = 1

StreamId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")]
#: A point: an integer of a finite domain {0, ..., N-1}, or a feature vector.
Point = (
    Annotated[StrictInt, Field(ge=0)] | Annotated[list[FiniteFloat], Field(min_length=1, max_length=10_000)]
)


def normalise_label(value: Any) -> int:
    """Map an accepted label (0/1, -1/+1, true/false) to 0/1; raise ValueError otherwise."""
    # bool first: True == 1 in Python, but we want to accept it explicitly, not by accident.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if value in (0, 1):
            return value
        if value == -1:
            return 0
    raise ValueError(f"label must be 0/1, -1/+1 or a boolean, got {value!r}")


def _utc(value: datetime) -> datetime:
    """A time without a zone is in UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


#: A label as sent (0/1, -1/+1, true/false), read as 0/1.
Label = Annotated[int, BeforeValidator(normalise_label)]
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
    y: Label = Field(description="label: 0/1 (also accepted: -1/+1, true/false)")
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
