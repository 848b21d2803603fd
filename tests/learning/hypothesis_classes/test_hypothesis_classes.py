"""Spec parsing, class definitions (checked against the issue's formulas), file loading, errors."""

from __future__ import annotations

import numpy as np
import pytest

from privstream.learning.errors import ClassFileError, ClassSpecError, DomainError, LearningInputError
from privstream.learning.hypothesis_classes import (
    FiniteClass,
    HypothesisClass,
    Intervals,
    Points,
    Thresholds,
    load_class_file,
    parse_class_spec,
)


def definition_matrix(kind: str, n: int) -> np.ndarray:
    """The classes exactly as the issue defines them, enumerated naively."""
    x = np.arange(n)
    if kind == "thresholds":
        rows = [x >= t for t in range(n + 1)]
    elif kind == "points":
        rows = [x == i for i in range(n)] + [np.zeros(n, dtype=bool)]
    else:
        rows = [(a <= x) & (x < b) for a in range(n + 1) for b in range(a, n + 1)]
    return np.unique(np.array(rows, dtype=bool), axis=0)


@pytest.mark.parametrize("kind", ["thresholds", "points", "intervals"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_structured_classes_match_their_definitions(kind: str, n: int) -> None:
    cls = parse_class_spec(f"{kind}:{n}")
    m = cls.matrix()
    assert cls.size == m.shape[0] == len({tuple(r) for r in m.tolist()})
    assert (np.unique(m, axis=0) == definition_matrix(kind, n)).all()
    assert cls.domain_size == n and cls.spec == f"{kind}:{n}"


def test_spec_forms() -> None:
    assert parse_class_spec("thresholds:65536").domain_size == 65536
    assert parse_class_spec("thresholds:2^32").spec == "thresholds:4294967296"
    assert parse_class_spec(" Intervals:2**10 ").spec == "intervals:1024"
    assert isinstance(parse_class_spec("points:1_000"), Points)
    big = parse_class_spec("thresholds:2^62")  # the largest domain a spec names
    assert isinstance(big, Thresholds) and big.size == 2**62 + 1
    assert parse_class_spec("intervals:4611686018427387904").size == 2**62 * (2**62 + 1) // 2 + 1
    assert isinstance(parse_class_spec("intervals:3"), Intervals)


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "thresholds",
        "thresholds:",
        "thresholds:abc",
        "thresholds:0",
        "thresholds:-3",
        "thresholds:2^",
        "thresholds:1.5",
        "cubes:3",
        "points:2^100000",
        "thresholds:2^63",
        "intervals:4611686018427387905",
        "points:" + "9" * 5000,
        "thresholds:3:4",
    ],
)
def test_bad_specs_raise_clear_value_errors(spec: str) -> None:
    with pytest.raises(ClassSpecError) as info:
        parse_class_spec(spec)
    assert isinstance(info.value, ValueError) and isinstance(info.value, LearningInputError)
    assert str(info.value)


def test_structured_hypotheses_by_index_for_huge_domains() -> None:
    n = 2**63  # beyond the specs' limit: the class objects compute exactly on any domain
    t = Thresholds(n)
    assert t.hypothesis(5).predict(4) == 0 and t.hypothesis(5).predict(5) == 1
    assert t.hypothesis(n).predict(n - 1) == 0  # the all-zero cut
    iv = Intervals(n)
    last = iv.hypothesis(iv.size - 1)  # lexicographically last: [n-1, n)
    assert last.predict(n - 1) == 1 and last.predict(n - 2) == 0
    assert iv.hypothesis(0).to_dict() == {"kind": "runs", "domain": n, "first": 0, "changes": []}


def test_check_point() -> None:
    cls: HypothesisClass = parse_class_spec("points:10")
    cls.check_point(0)
    cls.check_point(np.int64(9))
    for bad in (-1, 10, 2.0, "3", None, True):
        with pytest.raises(DomainError):
            cls.check_point(bad)


def test_file_classes_npy_and_csv(tmp_path) -> None:
    m = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 1]], dtype=np.int64)
    np.save(tmp_path / "c.npy", m)
    np.save(tmp_path / "b.npy", m.astype(bool)[::-1])
    (tmp_path / "c.csv").write_text("1,0,1\n0,0,0\n\n1, 0, 1\n0,1,1\n")
    a, b, c = (parse_class_spec(str(tmp_path / f)) for f in ("c.npy", "b.npy", "c.csv"))
    for cls in (a, b, c):
        assert isinstance(cls, FiniteClass)
        assert (cls.size, cls.domain_size) == (3, 3)  # duplicate rows are one hypothesis
    assert a.fingerprint == b.fingerprint == c.fingerprint  # same set of functions
    assert a.spec == str(tmp_path / "c.npy")
    assert {tuple(a.hypothesis(i).truth_table().tolist()) for i in range(3)} == {
        (True, False, True),
        (False, False, False),
        (False, True, True),
    }


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", "", "empty class"),
        ("blank.csv", "\n\n", "empty class"),
        ("ragged.csv", "1,0,1\n0,1\n", "line 2 has 2 values, expected 3"),
        ("two.csv", "1,0\n0,2\n", "line 2, column 2: '2' is not 0 or 1"),
        ("header.csv", "a,b\n0,1\n", "line 1, column 1"),
        ("two.npy", np.array([[0, 1], [2, 0]]), "row 1, column 0 is 2"),
        ("float.npy", np.array([[0.0, 1.0]]), "dtype float64"),
        ("flat.npy", np.array([0, 1]), "must be 2-D"),
        ("none.npy", np.zeros((0, 3), dtype=bool), "empty class"),
        ("nocols.npy", np.zeros((3, 0), dtype=bool), "empty class"),
    ],
)
def test_bad_class_files(tmp_path, name: str, content, message: str) -> None:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        np.save(path, content)
    with pytest.raises(ClassFileError, match=message):
        load_class_file(path)


def test_missing_and_unsupported_files(tmp_path) -> None:
    with pytest.raises(OSError):
        parse_class_spec(str(tmp_path / "missing.npy"))
    with pytest.raises(ClassFileError, match=r"\.npy or \.csv"):
        load_class_file(tmp_path / "class.txt")
    (tmp_path / "pickle.npy").write_bytes(b"garbage")
    with pytest.raises(ClassFileError, match=r"not a plain \.npy"):
        load_class_file(tmp_path / "pickle.npy")


def test_dual_class_is_distinct_columns() -> None:
    m = np.array([[1, 1, 0], [0, 0, 1]], dtype=bool)
    dual = FiniteClass(m, "m").dual()
    assert (dual.size, dual.domain_size) == (2, 2)  # columns 0 and 1 coincide


@pytest.mark.parametrize("spec", ["thresholds:9", "points:7", "intervals:8"])
def test_version_space_of_matches_filtering_the_matrix(spec: str) -> None:
    cls = parse_class_spec(spec)
    m = cls.matrix()
    rng = np.random.default_rng(2)
    for _ in range(50):
        xs = rng.integers(0, cls.domain_size, rng.integers(0, 5))
        ys = m[rng.integers(0, cls.size)][xs] if rng.random() < 0.7 else rng.integers(0, 2, xs.shape[0])
        consistent = int((m[:, xs] == np.asarray(ys, dtype=bool)).all(axis=1).sum())
        vs = cls.version_space_of(xs.tolist(), np.asarray(ys).tolist())
        assert (vs.size() if vs is not None else 0) == consistent
    assert cls.evaluate(0, np.arange(cls.domain_size)).tolist() == m[0].astype(int).tolist()
