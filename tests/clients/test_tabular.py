"""The client's tabular encoder: rows of named cells to the feature vectors of public columns."""

from __future__ import annotations

import math

import numpy as np
import pytest
from privstream_client.tabular import Column, ColumnError, RowError, TabularEncoder

COLUMNS = [
    {"name": "age", "bounds": [18, 90], "impute": 40},
    {"name": "plan", "categories": ["free", "pro", "team"]},
    {"name": "city", "categories": ["paris", "lyon"], "unknown": "other", "impute": "paris"},
    {"name": "spend", "kind": "numeric", "bounds": [0, 500]},
]


@pytest.fixture
def encoder() -> TabularEncoder:
    return TabularEncoder.from_dicts(COLUMNS)


def test_features_are_named_per_column_in_order_with_their_bounds(encoder: TabularEncoder) -> None:
    assert encoder.feature_names == [
        "age",
        "age:missing",
        "plan:free",
        "plan:pro",
        "plan:team",
        "city:paris",
        "city:lyon",
        "city:other",
        "city:missing",
        "spend",
    ]
    assert encoder.feature_bounds == [(18.0, 90.0)] + [(0.0, 1.0)] * 8 + [(0.0, 500.0)]
    assert encoder.dimension == 10


def test_a_complete_row_is_one_hot_and_numbers_kept_unclipped(encoder: TabularEncoder) -> None:
    row = {"age": 95, "plan": "team", "city": "lyon", "spend": 12.5}
    assert encoder.encode(row) == [95.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 12.5]


@pytest.mark.parametrize("missing", [None, "", math.nan, "absent"])
def test_a_missing_cell_takes_the_public_value_and_sets_its_indicator(
    encoder: TabularEncoder, missing: object
) -> None:
    row: dict[str, object] = {"plan": "free", "spend": 3}
    if missing != "absent":
        row["age"] = missing
        row["city"] = missing
    x = encoder.encode(row)
    assert x[:2] == [40.0, 1.0]
    assert x[5:9] == [1.0, 0.0, 0.0, 1.0]  # imputed 'paris', and its indicator


def test_an_unknown_category_goes_to_other_where_declared_else_is_refused(encoder: TabularEncoder) -> None:
    x = encoder.encode({"age": 30, "plan": "pro", "city": "nice", "spend": 1})
    assert x[5:9] == [0.0, 0.0, 1.0, 0.0]
    with pytest.raises(RowError) as refused:
        encoder.encode({"age": 30, "plan": "gold", "city": "nice", "spend": 1})
    assert refused.value.reason == "unknown_category"
    assert "plan" in str(refused.value)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"age": 30, "city": "lyon", "spend": 1}, "missing_value"),  # plan has no impute value
        ({"age": 30, "plan": "pro", "city": "lyon", "spend": None}, "missing_value"),
        ({"age": "30", "plan": "pro", "city": "lyon", "spend": 1}, "wrong_type"),
        ({"age": True, "plan": "pro", "city": "lyon", "spend": 1}, "wrong_type"),
        ({"age": 30, "plan": 1, "city": "lyon", "spend": 1}, "wrong_type"),
        ({"age": 30, "plan": "pro", "city": "lyon", "spend": math.inf}, "not_finite"),
        ({"age": 30, "plan": "pro", "city": "lyon", "spend": 1, "zip": "75001"}, "wrong_type"),
        ([30, "pro", "lyon", 1], "wrong_type"),
    ],
)
def test_refusals_name_their_reason(encoder: TabularEncoder, row: object, reason: str) -> None:
    with pytest.raises(RowError) as refused:
        encoder.encode(row)
    assert refused.value.reason == reason


def test_csv_cells_parse_by_column_kind(encoder: TabularEncoder) -> None:
    cells = {"age": "NA", "plan": "pro", "city": "", "spend": "7.25", "ignored": "x"}
    row = encoder.parse_text(cells)
    assert row == {"age": None, "plan": "pro", "city": None, "spend": 7.25}
    assert encoder.encode(row)[:2] == [40.0, 1.0]
    unreadable = encoder.parse_text({**cells, "spend": "lots"})
    assert unreadable["spend"] == "lots"  # kept as the file has it: the encoder refuses it
    with pytest.raises(RowError, match="spend") as refused:
        encoder.encode(unreadable)
    assert refused.value.reason == "wrong_type"


def test_declarations_round_trip_and_encode_alike(encoder: TabularEncoder) -> None:
    again = TabularEncoder.from_dicts(encoder.to_dicts())
    rows = [{"age": 20, "plan": "free", "city": "x", "spend": 9}, {"plan": "team", "spend": 0}]
    np.testing.assert_array_equal(again.encode_many(rows), encoder.encode_many(rows))
    assert again.encode_many([]).shape == (0, 10)


@pytest.mark.parametrize(
    ("columns", "says"),
    [
        ([{"name": "a", "bounds": [1, 1]}], "lo < hi"),
        ([{"name": "a", "bounds": [0, 1], "impute": 2}], "within the bounds"),
        ([{"name": "a", "categories": []}], "non-empty list of categories"),
        ([{"name": "a", "categories": ["x", "x"]}], "distinct"),
        ([{"name": "a", "categories": ["x"], "impute": "y"}], "one of the categories"),
        ([{"name": "a", "categories": ["other"], "unknown": "other"}], "share its feature's name"),
        ([{"name": "a", "categories": ["x"], "unknown": "maybe"}], "refuse"),
        ([{"name": "a", "bounds": [0, 1], "categories": ["x"]}], "not both"),
        ([{"name": "a", "bounds": [0, 1]}, {"name": "a", "bounds": [0, 2]}], "distinct"),
        ([{"name": "a", "categories": ["b"]}, {"name": "a:b", "bounds": [0, 1]}], "without ':'"),
        ([{"name": "a", "bound": [0, 1]}], "unknown key"),
        ([], "at least one column"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_it(columns: list[dict[str, object]], says: str) -> None:
    with pytest.raises(ColumnError, match=says) as refused:
        TabularEncoder.from_dicts(columns)
    assert "\n" not in str(refused.value)


def test_a_column_states_what_from_dict_reads_back() -> None:
    column = Column.from_dict({"name": "c", "categories": ["a"], "unknown": "other"})
    assert Column.from_dict(column.to_dict()) == column
