"""Canonical hypothesis forms: equal functions <-> equal dicts, round trips, patches."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.errors import DomainError, HypothesisFormatError
from privstream.learning.hypotheses import (
    BitsHypothesis,
    RunsHypothesis,
    hypothesis_from_dict,
    hypothesis_from_runs,
    hypothesis_from_table,
    patched,
)

tables = st.integers(1, 300).flatmap(
    lambda n: st.lists(st.booleans(), min_size=n, max_size=n).map(lambda v: np.array(v, dtype=bool))
)


@settings(max_examples=60, deadline=None)
@given(tables, tables)
def test_dicts_equal_iff_functions_equal(a: np.ndarray, b: np.ndarray) -> None:
    ha, hb = hypothesis_from_table(a), hypothesis_from_table(b)
    same = a.shape == b.shape and bool((a == b).all())
    assert (ha.to_dict() == hb.to_dict()) == same
    assert (ha == hb) == same
    if same:
        assert hash(ha) == hash(hb)


@settings(max_examples=60, deadline=None)
@given(tables)
def test_round_trip_through_json_and_runs(t: np.ndarray) -> None:
    h = hypothesis_from_table(t)
    again = hypothesis_from_dict(json.loads(json.dumps(h.to_dict())))
    assert again == h
    assert (again.truth_table() == t).all()
    assert (h.predict(np.arange(t.shape[0])) == t).all()
    assert [h.predict(x) for x in range(t.shape[0])] == t.astype(int).tolist()
    first, changes = h.change_points()
    assert hypothesis_from_runs(t.shape[0], first, changes) == h


def test_representation_rule_depends_only_on_the_function() -> None:
    # 1 change point on 64 points: runs; 2 change points on 64 points: bits.
    assert isinstance(hypothesis_from_runs(64, 0, [5]), RunsHypothesis)
    assert isinstance(hypothesis_from_runs(64, 0, [5, 9]), BitsHypothesis)
    assert hypothesis_from_runs(64, 0, [5, 9]) == hypothesis_from_table(
        np.array([5 <= x < 9 for x in range(64)])
    )


def test_huge_domains_use_python_ints() -> None:
    n = 2**70
    h = hypothesis_from_runs(n, 0, [2**65, 2**65 + 1])
    assert h.predict(2**65) == 1 and h.predict(2**65 + 1) == 0 and h.predict(n - 1) == 0
    xs = np.array([0, 2**65, 2**69], dtype=object)
    assert h.predict(xs).tolist() == [0, 1, 0]
    assert h.to_dict() == {"kind": "runs", "domain": n, "first": 0, "changes": [2**65, 2**65 + 1]}
    with pytest.raises(DomainError, match="outside the domain"):
        h.predict(n)


def test_patched_matches_pointwise_definition() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 64, 500):
        for _ in range(20):
            t = rng.random(n) < rng.random()
            if rng.random() < 0.5:  # structured-looking base: a threshold
                t = np.arange(n) >= rng.integers(0, n + 1)
            patches = {int(x): int(rng.integers(0, 2)) for x in rng.integers(0, n, rng.integers(0, 6))}
            expect = t.copy()
            for x, y in patches.items():
                expect[x] = bool(y)
            assert patched(hypothesis_from_table(t), patches) == hypothesis_from_table(expect)


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "runs", "domain": 10, "first": 0, "changes": [3, 3]},
        {"kind": "runs", "domain": 10, "first": 2, "changes": []},
        {"kind": "runs", "domain": 0, "first": 0, "changes": []},
        {"kind": "runs", "domain": 10, "first": 0, "changes": [1, 2]},  # canonical form is bits
        {"kind": "bits", "domain": 10, "bits": "AAA="},  # constant: canonical form is runs
        {"kind": "bits", "domain": 10, "bits": "not base64!"},
        {"kind": "cubes", "domain": 10},
        {"domain": 10},
    ],
)
def test_malformed_or_non_canonical_dicts_are_rejected(bad: dict) -> None:
    with pytest.raises(HypothesisFormatError):
        hypothesis_from_dict(bad)
