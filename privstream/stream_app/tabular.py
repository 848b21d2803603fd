"""Tabular streams' settings: a stream's public ``columns``, and the feature vector they make.

A stream that declares ``columns`` is a stream of feature vectors whose examples are rows (``x``
an object of cells by column name). The encoder of the client package
(:mod:`privstream_client.tabular`) turns each row into the vector, in the service as at a producer
or a subscriber; from the columns follow the stream's ``features``, ``feature_bounds`` and
``feature_names`` (:func:`derive_vector_fields`), so nothing else needs configuring.

>>> column = ColumnConfig(name="colour", categories=["red", "green"], unknown="other")
>>> column.column.feature_names
['colour:red', 'colour:green', 'colour:other']
>>> fields = derive_vector_fields({"columns": [{"name": "age", "bounds": [0, 99]}, column]})
>>> fields["features"], fields["feature_names"]
(4, ['age', 'colour:red', 'colour:green', 'colour:other'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from privstream_client.tabular import Column, ColumnError, RowError, TabularEncoder
from pydantic import BaseModel, ConfigDict, Field, model_validator

from privstream.agents.validation import INVALID_REASONS, Invalid, RowEncoder

#: The fields a stream's columns determine.
DERIVED = ("features", "feature_bounds", "feature_names")


class ColumnConfig(BaseModel):
    """One public column of a tabular stream (every value here is public configuration)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^:]+$", description="the column's name")
    kind: Literal["numeric", "categorical"] | None = Field(
        default=None, description="'numeric' or 'categorical'; default: categorical if categories are given"
    )
    bounds: tuple[float, float] | None = Field(
        default=None, description="numeric: the public [lo, hi] (values outside are clipped by the learners)"
    )
    categories: list[str] | None = Field(
        default=None, description="categorical: the public categories, each a 0/1 feature 'name:category'"
    )
    unknown: Literal["refuse", "other"] = Field(
        default="refuse",
        description="categorical: a category not declared is refused (dead letter 'unknown_category') or "
        "counted in the feature 'name:other'",
    )
    impute: float | str | None = Field(
        default=None,
        description="the public value of a missing cell (a number within the bounds, or a category), with "
        "a 0/1 feature 'name:missing'; none: a row with a missing cell is refused ('missing_value')",
    )

    @model_validator(mode="after")
    def _encodes(self) -> ColumnConfig:
        try:
            self.column  # noqa: B018  # the client's checks, the one definition of a valid column
        except ColumnError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def column(self) -> Column:
        """The client package's column (what encodes)."""
        return Column.from_dict(self.model_dump(exclude_none=True))


def column_encoder(columns: list[ColumnConfig]) -> TabularEncoder:
    """The encoder of a stream's columns (:class:`ValueError` for columns that clash)."""
    try:
        return TabularEncoder(c.column for c in columns)
    except ColumnError as exc:
        raise ValueError(str(exc)) from None


def derive_vector_fields(data: Any) -> Any:
    """A stream's raw settings with ``features``, ``feature_bounds`` and ``feature_names`` filled
    in from its ``columns`` (a stream with columns states them only as the columns make them: a
    settings dump reads back). Anything malformed is left for the fields' own checks to name."""
    if not isinstance(data, Mapping) or data.get("columns") is None:
        return data
    try:
        encoder = column_encoder(
            [c if isinstance(c, ColumnConfig) else ColumnConfig.model_validate(c) for c in data["columns"]]
        )
    except (ValueError, TypeError):
        return data  # the columns' field check says what is wrong
    derived = {
        "features": encoder.dimension,
        "feature_bounds": [list(b) for b in encoder.feature_bounds],
        "feature_names": list(encoder.feature_names),
    }
    for name in DERIVED:
        given = data.get(name)
        if given is not None and _plain(given) != _plain(derived[name]):
            raise ValueError(
                f"{name}: a stream with columns takes its features, their bounds and names from them "
                f"(leave {name} out)"
            )
    return {**data, **derived}


def _plain(value: Any) -> Any:
    """A value with tuples as lists and numbers as floats, for comparing a dump with what is derived."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def row_encoder(encoder: TabularEncoder) -> RowEncoder:
    """The ingest validation's encoder of a tabular stream: a row's vector, or the :class:`Invalid`
    its refusal makes (a reason of the bounded set, whatever the encoder says).

    >>> encode = row_encoder(TabularEncoder.from_dicts([{"name": "c", "categories": ["a", "b"]}]))
    >>> encode({"c": "b"}), encode({"c": "z"})
    ([0.0, 1.0], Invalid(reason='unknown_category', detail="c: 'z' is not one of its 2 categories"))
    """

    def encode(x: object) -> list[float] | Invalid:
        try:
            return encoder.encode(x)
        except RowError as exc:
            reason = exc.reason if exc.reason in INVALID_REASONS else "wrong_type"
            return Invalid(reason, exc.detail[:500])

    return encode
