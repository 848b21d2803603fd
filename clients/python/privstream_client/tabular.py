"""Tabular rows as feature vectors: numeric and categorical columns, missing values.

A tabular stream declares its columns publicly; one encoder turns a row (a mapping from column
name to cell) into the stream's feature vector, the same on the producer, in the service and at a
subscriber predicting from a row. Every number in a column's declaration is public configuration,
never taken from the data:

* a **numeric** column has public ``bounds`` ``[lo, hi]`` and is one feature (values outside the
  bounds are kept; the learners clip them, and the service counts the clipped values per feature);
* a **categorical** column has its public ``categories`` and is one 0/1 feature per category
  (``name:category``, one-hot); a category it does not declare is refused, or, with
  ``unknown = "other"``, counted in one more feature ``name:other``;
* a column with an ``impute`` value takes that public value where a cell is missing (absent,
  null, NaN or the empty string) and gains a 0/1 feature ``name:missing`` saying so; without one,
  a row with a missing cell is refused.

A refused row raises :class:`RowError`, whose ``reason`` is one of :data:`ROW_REASONS`
(``missing_value``, ``unknown_category``, ``wrong_type``, ``not_finite``).

>>> encoder = TabularEncoder.from_dicts([
...     {"name": "age", "bounds": [0, 100], "impute": 40},
...     {"name": "colour", "categories": ["red", "green"], "unknown": "other"},
... ])
>>> encoder.feature_names
['age', 'age:missing', 'colour:red', 'colour:green', 'colour:other']
>>> encoder.encode({"age": 31, "colour": "green"})
[31.0, 0.0, 0.0, 1.0, 0.0]
>>> encoder.encode({"age": None, "colour": "blue"})
[40.0, 1.0, 0.0, 0.0, 1.0]
>>> encoder.encode({"age": 31})
Traceback (most recent call last):
...
privstream_client.tabular.RowError: colour: missing (no impute value declared)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "MISSING_TEXTS",
    "ROW_REASONS",
    "Column",
    "ColumnError",
    "RowError",
    "TabularEncoder",
]

#: Why a row is refused (a bounded set: the service's dead-letter reasons).
ROW_REASONS = ("missing_value", "unknown_category", "wrong_type", "not_finite")
#: CSV cells read as missing (case-insensitive; also the empty cell).
MISSING_TEXTS = frozenset({"", "na", "nan", "null", "none"})
#: The suffixes of the extra features.
OTHER, MISSING = "other", "missing"


class ColumnError(ValueError):
    """A column declaration that cannot be encoded (one line naming the column)."""


class RowError(ValueError):
    """A row the encoder refuses: ``reason`` (one of :data:`ROW_REASONS`) and a one-line detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _missing(value: object) -> bool:
    return value is None or value == "" or (type(value) is float and math.isnan(value))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Column:
    """One public column: ``numeric`` (with ``bounds``) or ``categorical`` (with ``categories``)."""

    name: str
    kind: Literal["numeric", "categorical"]
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] = ()
    unknown: Literal["refuse", "other"] = "refuse"
    impute: float | str | None = None

    def __post_init__(self) -> None:
        where = f"column {self.name!r}"
        if not isinstance(self.name, str) or not self.name or ":" in self.name:
            raise ColumnError(f"{where}: a column's name is a non-empty string without ':'")
        if self.kind == "numeric":
            if self.bounds is None or self.categories or self.unknown != "refuse":
                raise ColumnError(
                    f"{where}: a numeric column has bounds [lo, hi] (no categories, no unknown)"
                )
            lo, hi = self.bounds
            if not (_number(lo) and _number(hi) and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ColumnError(f"{where}: bounds must be finite numbers lo < hi, got {list(self.bounds)}")
            impute = self.impute
            number = isinstance(impute, int | float) and not isinstance(impute, bool)
            if impute is not None and not (number and lo <= impute <= hi):  # type: ignore[operator]
                raise ColumnError(f"{where}: impute must be a number within the bounds, got {self.impute!r}")
        elif self.kind == "categorical":
            if self.bounds is not None or not self.categories:
                raise ColumnError(
                    f"{where}: a categorical column has a non-empty list of categories (no bounds)"
                )
            if not all(isinstance(c, str) and c != "" for c in self.categories):
                raise ColumnError(f"{where}: categories are non-empty strings")
            if len(set(self.categories)) != len(self.categories):
                raise ColumnError(f"{where}: categories must be distinct")
            if self.unknown not in ("refuse", "other"):
                raise ColumnError(f"{where}: unknown is 'refuse' or 'other', got {self.unknown!r}")
            reserved = {OTHER} if self.unknown == "other" else set()
            if self.impute is not None:
                reserved.add(MISSING)
            if reserved & set(self.categories):
                raise ColumnError(
                    f"{where}: a category named {sorted(reserved & set(self.categories))[0]!r} "
                    "would share its feature's name with the extra feature"
                )
            if self.impute is not None and self.impute not in self.categories:
                raise ColumnError(f"{where}: impute must be one of the categories, got {self.impute!r}")
        else:
            raise ColumnError(f"{where}: kind is 'numeric' or 'categorical', got {self.kind!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Column:
        """A column from its declaration (a config file's table, or a certificate's entry); the
        kind follows from ``bounds`` or ``categories`` when not given."""
        if not isinstance(data, Mapping):
            raise ColumnError(f"a column is a table of name and bounds or categories, got {data!r}"[:200])
        unknown_keys = set(data) - {"name", "kind", "bounds", "categories", "unknown", "impute"}
        name = data.get("name")
        if unknown_keys:
            raise ColumnError(f"column {name!r}: unknown key {sorted(unknown_keys)[0]!r}")
        if data.get("bounds") is not None and data.get("categories") is not None:
            raise ColumnError(
                f"column {name!r}: either bounds (numeric) or categories (categorical), not both"
            )
        if not isinstance(name, str) or not name:
            raise ColumnError(f"a column needs a name (a non-empty string), got {name!r}"[:200])
        given = data.get("kind")
        kind: Literal["numeric", "categorical"] = (
            "categorical"
            if given == "categorical" or (given is None and data.get("categories") is not None)
            else "numeric"
        )
        if given not in (None, "numeric", "categorical"):
            raise ColumnError(f"column {name!r}: kind is 'numeric' or 'categorical', got {given!r}"[:200])
        bounds = data.get("bounds")
        if bounds is not None:
            if not isinstance(bounds, Sequence) or isinstance(bounds, str) or len(bounds) != 2:
                raise ColumnError(f"column {name!r}: bounds is a pair [lo, hi], got {bounds!r}"[:200])
            bounds = (bounds[0], bounds[1])
        elif kind == "numeric" and data.get("categories") is None:
            raise ColumnError(f"column {name!r}: declare its public bounds (numeric) or categories")
        categories = data.get("categories") or ()
        if isinstance(categories, str):
            raise ColumnError(f"column {name!r}: categories is a list of strings")
        return cls(
            name=name,
            kind=kind,
            bounds=bounds,
            categories=tuple(categories),
            unknown=data.get("unknown", "refuse"),
            impute=data.get("impute"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The declaration as it is stated (in a certificate): what :meth:`from_dict` reads back."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "numeric":
            out["bounds"] = [float(self.bounds[0]), float(self.bounds[1])] if self.bounds else None
        else:
            out["categories"] = list(self.categories)
            out["unknown"] = self.unknown
        out["impute"] = self.impute
        return out

    @property
    def feature_names(self) -> list[str]:
        """The features this column becomes, in order."""
        if self.kind == "numeric":
            names = [self.name]
        else:
            names = [f"{self.name}:{c}" for c in self.categories]
            if self.unknown == "other":
                names.append(f"{self.name}:{OTHER}")
        if self.impute is not None:
            names.append(f"{self.name}:{MISSING}")
        return names

    @property
    def feature_bounds(self) -> list[tuple[float, float]]:
        """The public bounds of its features: the column's for a numeric one, [0, 1] for 0/1 ones."""
        numeric = [(float(self.bounds[0]), float(self.bounds[1]))] if self.bounds is not None else []
        return numeric + [(0.0, 1.0)] * (len(self.feature_names) - len(numeric))

    def encode(self, value: object, out: list[float]) -> None:
        """Append this column's features for one cell to ``out`` (:class:`RowError` if refused)."""
        missing = _missing(value)
        if missing:
            if self.impute is None:
                raise RowError("missing_value", f"{self.name}: missing (no impute value declared)")
            value = self.impute
        if self.kind == "numeric":
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise RowError("wrong_type", f"{self.name}: should be a number, got {_show(value)}")
            number = float(value)
            if not math.isfinite(number):
                raise RowError("not_finite", f"{self.name}: should be a finite number, got {number!r}")
            out.append(number)
        else:
            if type(value) is not str:
                raise RowError(
                    "wrong_type", f"{self.name}: should be a category (a string), got {_show(value)}"
                )
            start = len(out)
            out.extend([0.0] * (len(self.categories) + (self.unknown == "other")))
            try:
                out[start + self.categories.index(value)] = 1.0
            except ValueError:
                if self.unknown != "other":
                    raise RowError(
                        "unknown_category",
                        f"{self.name}: {_show(value)} is not one of its {len(self.categories)} categories",
                    ) from None
                out[-1] = 1.0
        if self.impute is not None:
            out.append(1.0 if missing else 0.0)

    def parse_text(self, text: str) -> float | str | None:
        """A CSV cell as a row's value: None where missing (:data:`MISSING_TEXTS`), a number for a
        numeric column, the text for a categorical one. A numeric column's cell that is not a number
        stays text, which :meth:`encode` refuses (``wrong_type``): the row is sent as the file has it."""
        if text.strip().lower() in MISSING_TEXTS:
            return None
        if self.kind == "categorical":
            return text
        try:
            return float(text)
        except ValueError:
            return text


def _show(value: object) -> str:
    """A cell for a one-line message (bounded whatever it is)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    if isinstance(value, list | dict):
        return f"a {type(value).__name__} of {len(value)} items"
    return repr(value)[:60]


class TabularEncoder:
    """Rows of named cells to feature vectors, by public column declarations (see the module)."""

    def __init__(self, columns: Iterable[Column]) -> None:
        self.columns = tuple(columns)
        if not self.columns:
            raise ColumnError("a tabular stream declares at least one column")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ColumnError(
                f"column names must be distinct: {sorted(n for n in names if names.count(n) > 1)[0]!r}"
            )
        self.feature_names: list[str] = [f for c in self.columns for f in c.feature_names]
        if len(set(self.feature_names)) != len(self.feature_names):
            raise ColumnError(
                "two columns give features of the same name (e.g. 'a:b' and a column 'a' "
                "with category 'b'); rename one"
            )
        self.feature_bounds: list[tuple[float, float]] = [b for c in self.columns for b in c.feature_bounds]
        self._names = frozenset(names)

    @classmethod
    def from_dicts(cls, columns: Iterable[Mapping[str, Any]]) -> TabularEncoder:
        """An encoder from column declarations (:meth:`Column.from_dict` each)."""
        return cls(Column.from_dict(c) for c in columns)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The declarations as stated: ``TabularEncoder.from_dicts(e.to_dicts())`` encodes alike."""
        return [c.to_dict() for c in self.columns]

    @property
    def dimension(self) -> int:
        """The length of an encoded row."""
        return len(self.feature_names)

    def encode(self, row: object) -> list[float]:
        """One row (a mapping from column name to cell) as its feature vector; :class:`RowError`
        naming the first column (in declaration order) that refuses it, or a column it does not know."""
        if not isinstance(row, Mapping):
            raise RowError("wrong_type", f"x: should be a row (an object of the columns), got {_show(row)}")
        extra = [k for k in row if k not in self._names]
        if extra:
            raise RowError(
                "wrong_type",
                f"x: unknown column {_show(extra[0])} (the stream's: "
                f"{', '.join(c.name for c in self.columns)})"[:300],
            )
        out: list[float] = []
        for column in self.columns:
            column.encode(row.get(column.name), out)
        return out

    def encode_many(self, rows: Iterable[object]) -> np.ndarray:
        """Rows as an ``(n, d)`` float array (:class:`RowError` at the first row refused)."""
        return np.array([self.encode(row) for row in rows], dtype=np.float64).reshape(-1, self.dimension)

    def parse_text(self, cells: Mapping[str, str]) -> dict[str, float | str | None]:
        """A CSV row (text cells by column name) as a row to send: the declared columns only,
        numbers parsed, missing cells None (:meth:`Column.parse_text`)."""
        return {c.name: c.parse_text(cells.get(c.name) or "") for c in self.columns}
