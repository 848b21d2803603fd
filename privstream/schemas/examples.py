"""The input event: one labelled example of a named stream.

Labels are 0/1 canonically; ``-1/+1`` and booleans are accepted on input and normalised.
``x`` is a point of the stream's domain: a non-negative integer for a stream with a hypothesis
class, or a feature vector (a list of numbers) for a stream of vector features.

>>> Example.model_validate_json('{"stream_id": "s", "x": 3, "y": -1}').y
0
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StrictInt, field_validator, model_validator

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


class Example(BaseModel):
    """A labelled example ``(x, y)`` of stream ``stream_id``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    stream_id: StreamId
    x: Point = Field(description="a point of the stream's domain {0, ..., N-1}, or a feature vector")
    y: int = Field(description="label: 0/1 (also accepted: -1/+1, true/false)")
    user_id: str | None = Field(default=None, max_length=200, description="privacy unit at user level")
    event_time: datetime | None = Field(default=None, description="when the example happened (UTC)")
    id: str | None = Field(default=None, max_length=200, description="producer's id, for deduplication")

    @field_validator("y", mode="before")
    @classmethod
    def _label(cls, value: Any) -> int:
        return normalise_label(value)

    @field_validator("event_time")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class ExampleBatch(BaseModel):
    """Many examples of one stream in one message: what high-volume producers should send.

    Columns of equal length; ``user_ids``, ``event_times`` and ``ids`` are optional columns.

    >>> ExampleBatch.model_validate_json('{"stream_id": "s", "xs": [1, 2], "ys": [1, -1]}').ys
    [1, 0]
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    stream_id: StreamId
    xs: list[Point] = Field(min_length=1, max_length=100_000)
    ys: list[int]
    user_ids: list[str | None] | None = None
    event_times: list[datetime | None] | None = None
    ids: list[str | None] | None = None

    @field_validator("ys", mode="before")
    @classmethod
    def _labels(cls, values: Any) -> Any:
        if not isinstance(values, list):
            return values
        return [normalise_label(v) for v in values]

    @model_validator(mode="after")
    def _same_length(self) -> ExampleBatch:
        n = len(self.xs)
        for name in ("ys", "user_ids", "event_times", "ids"):
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise ValueError(f"{name} has {len(column)} entries, xs has {n}")
        return self
