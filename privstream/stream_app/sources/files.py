"""Reading labelled examples from files: CSV with a header row, or JSON lines.

Shared by the CLI commands that take ``--examples`` / ``--file``. Labels may be written 0/1,
-1/+1 or true/false (one convention per file) and come back as 0/1.

>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "ex.csv"
>>> _ = p.write_text("x,y\\n3,1\\n5,-1\\n")
>>> xs, ys = read_examples(p)
>>> xs.tolist(), ys.tolist()
([3, 5], [1, 0])
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from privstream.learning.domain import MAX_DOMAIN_SIZE

_LABELS = {"1": 1, "+1": 1, "true": 1, "0": 0, "false": 0, "-1": 0}


class ExampleFileError(ValueError):
    """An example file that cannot be read as labelled examples (message names file and line)."""


def read_examples(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read ``(xs, ys)`` from a CSV file (header row naming ``x`` and ``y``) or JSON lines.

    ``xs`` is ``int64`` (a point at or beyond :data:`~privstream.learning.domain.MAX_DOMAIN_SIZE`
    is outside every class's domain: an error naming the line); ``ys`` is ``uint8`` 0/1. The format
    is chosen by extension (``.csv``; ``.jsonl``/``.ndjson``/``.json``) or, for other names, by
    whether the first non-blank character is ``{``.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json") or (suffix != ".csv" and text.lstrip().startswith("{")):
        rows = _json_lines(p, text)
    else:
        rows = _csv_rows(p, text)
    xs_list: list[int] = []
    ys_list: list[int] = []
    conventions: set[str] = set()
    for where, x, y in rows:
        xs_list.append(_point(p, where, x))
        label, convention = _label(p, where, y)
        ys_list.append(label)
        if convention:
            conventions.add(convention)
    if len(conventions) > 1:
        raise ExampleFileError(f"{p}: labels mix the 0/1 and -1/+1 conventions (both 0 and -1 appear)")
    return np.array(xs_list, dtype=np.int64), np.array(ys_list, dtype=np.uint8)


def _csv_rows(p: Path, text: str) -> list[tuple[str, Any, Any]]:
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        return []
    header = [h.strip().lower() for h in next(csv.reader([lines[0][1]]))]
    if "x" not in header or "y" not in header:
        raise ExampleFileError(f"{p}: line {lines[0][0]}: the CSV needs a header row naming columns x and y")
    ix, iy = header.index("x"), header.index("y")
    out = []
    for lineno, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ExampleFileError(f"{p}: line {lineno}: {len(cells)} fields, the header has {len(header)}")
        out.append((f"line {lineno}", cells[ix].strip(), cells[iy].strip()))
    return out


def _json_lines(p: Path, text: str) -> list[tuple[str, Any, Any]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ExampleFileError(f"{p}: line {lineno}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or "x" not in obj or "y" not in obj:
            raise ExampleFileError(f"{p}: line {lineno}: each line must be a JSON object with fields x and y")
        out.append((f"line {lineno}", obj["x"], obj["y"]))
    return out


def _point(p: Path, where: str, x: Any) -> int:
    """A point of some class's domain: a non-negative integer below ``MAX_DOMAIN_SIZE``."""
    if isinstance(x, str) and x.isascii() and x.isdigit():
        digits = x.lstrip("0") or "0"
        # more digits than the limit has: over it, and never converted (Python refuses thousands)
        value = int(digits) if len(digits) <= len(str(MAX_DOMAIN_SIZE)) else MAX_DOMAIN_SIZE
    elif type(x) is int and x >= 0:
        value = x
    else:
        shown = repr(x) if len(repr(x)) <= 40 else f"{repr(x)[:20]}... ({len(repr(x))} characters)"
        raise ExampleFileError(f"{p}: {where}: x = {shown} is not a non-negative integer")
    if value >= MAX_DOMAIN_SIZE:
        text = str(x) if isinstance(x, str) else f"of {x.bit_length()} bits"
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"
        raise ExampleFileError(
            f"{p}: {where}: x = {shown} is outside every class's domain (a class has at most "
            f"2^{MAX_DOMAIN_SIZE.bit_length() - 1} points)"
        )
    return value


def _label(p: Path, where: str, y: Any) -> tuple[int, str | None]:
    key = str(y).strip().lower() if isinstance(y, str | bool) else (str(y) if type(y) is int else None)
    if key in _LABELS:
        convention = "0/1" if key == "0" else "-1/+1" if key == "-1" else None
        return _LABELS[key], convention
    raise ExampleFileError(f"{p}: {where}: label y = {y!r} is not 0/1, -1/+1 or true/false")


def _class_label(p: Path, where: str, y: Any, classes: int) -> tuple[int, str | None]:
    """A label of a stream of ``classes`` labels: 0/1 (or -1/+1, true/false) when it has 2, else an
    integer from 0 to ``classes - 1`` (true and false read as 1 and 0), as the service takes them."""
    if classes == 2:
        return _label(p, where, y)
    key = str(y).strip().lower() if isinstance(y, str | bool) else (str(y) if type(y) is int else None)
    if key in ("true", "false"):
        return _LABELS[key], None
    if key is not None and key.isascii() and key.isdigit() and int(key) < classes:
        return int(key), None
    raise ExampleFileError(f"{p}: {where}: label y = {y!r} is not a class of the stream (0 to {classes - 1})")


def read_labels(path: Path, labelled: list[tuple[str, Any]], classes: int = 2) -> list[int]:
    """The labels ``(where, y)`` of a file for a stream of ``classes`` labels, read as the service
    reads them (0/1, -1/+1 or true/false; 0 to K-1 with K above 2); :class:`ExampleFileError` naming
    the line of the first that is not one, or for a file mixing 0/1 with -1/+1.

    >>> read_labels(Path("f.csv"), [("line 2", "-1"), ("line 3", 1)]), read_labels(Path("f"), [("", 2)], 3)
    ([0, 1], [2])
    >>> read_labels(Path("f.csv"), [("line 2", "3")], 3)
    Traceback (most recent call last):
    ...
    privstream.stream_app.sources.files.ExampleFileError: f.csv: line 2: label y = '3' is not...(0 to 2)
    """
    labels, conventions = [], set()
    for where, y in labelled:
        label, convention = _class_label(path, where, y, classes)
        labels.append(label)
        if convention:
            conventions.add(convention)
    if len(conventions) > 1:
        raise ExampleFileError(f"{path}: labels mix the 0/1 and -1/+1 conventions (both 0 and -1 appear)")
    return labels


def read_vector_examples(path: str | Path, classes: int = 2) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read feature vectors from a CSV file with a header: column ``y`` is the label, every other
    column a real feature.

    Returns ``(X, y, feature_names)``: ``X`` is float ``(n, d)``; ``y`` is float, 0/1 with ``NaN``
    for an empty label cell (an unlabelled row); labels may be written 0/1, -1/+1 or true/false.
    With ``classes`` K above 2, a label is an integer from 0 to K-1.

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "v.csv"
    >>> _ = p.write_text("a,b,y\\n0.5,2,1\\n0.25,-1,\\n")
    >>> X, y, names = read_vector_examples(p)
    >>> X.tolist(), y.tolist()[0], bool(np.isnan(y[1])), names
    ([[0.5, 2.0], [0.25, -1.0]], 1.0, True, ['a', 'b'])
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ExampleFileError(f"{p}: empty file (a CSV with a header row naming column y is needed)")
    header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
    lowered = [h.lower() for h in header]
    if lowered.count("y") != 1 or len(header) < 2:
        raise ExampleFileError(
            f"{p}: line {lines[0][0]}: the header must name one label column y "
            "and at least one feature column"
        )
    iy = lowered.index("y")
    names = [h for i, h in enumerate(header) if i != iy]
    rows: list[list[float]] = []
    labels: list[float] = []
    conventions: set[str] = set()
    for lineno, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ExampleFileError(f"{p}: line {lineno}: {len(cells)} fields, the header has {len(header)}")
        row = []
        for i, cell in enumerate(cells):
            if i == iy:
                continue
            try:
                value = float(cell)
            except ValueError:
                where = f"{p}: line {lineno}: {header[i]} = {cell.strip()!r}"
                raise ExampleFileError(f"{where} is not a number") from None
            if not np.isfinite(value):
                raise ExampleFileError(f"{p}: line {lineno}: {header[i]} = {cell.strip()!r} is not finite")
            row.append(value)
        rows.append(row)
        label = cells[iy].strip()
        if not label:
            labels.append(float("nan"))
            continue
        value, convention = _class_label(p, f"line {lineno}", label, classes)
        labels.append(float(value))
        if convention:
            conventions.add(convention)
    if len(conventions) > 1:
        raise ExampleFileError(f"{p}: labels mix the 0/1 and -1/+1 conventions (both 0 and -1 appear)")
    X = np.array(rows, dtype=np.float64).reshape(len(rows), len(names))
    return X, np.array(labels, dtype=np.float64), names


def read_query_data(path: str | Path) -> tuple[Any, Any]:
    """``(xs, ys or None)`` from a CSV with header ``x`` (and optionally ``y``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ExampleFileError(f"{p}: empty data file (need a header naming x, then one point per line)")
    header = [h.strip().lower() for h in next(csv.reader([lines[0][1]]))]
    if "x" not in header:
        raise ExampleFileError(f"{p}: line {lines[0][0]}: the CSV needs a header row naming column x")
    ix, iy = header.index("x"), (header.index("y") if "y" in header else None)
    xs: list[int] = []
    ys: list[int] = []
    for lineno, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ExampleFileError(f"{p}: line {lineno}: {len(cells)} fields, the header has {len(header)}")
        xs.append(_point(p, f"line {lineno}", cells[ix].strip()))
        if iy is not None:
            ys.append(_label(p, f"line {lineno}", cells[iy].strip())[0])
    if not xs:
        raise ExampleFileError(f"{p}: no data points after the header")
    return np.array(xs, dtype=np.int64), (np.array(ys, dtype=np.uint8) if iy is not None else None)


def read_vector_stream_file(
    path: str | Path, feature_names: list[str] | None = None, classes: int = 2
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Labelled feature vectors to send to a stream: a CSV with a header (column ``y`` the label,
    the others features, by name) or JSON lines with ``x`` a list of numbers and ``y``.

    With ``feature_names`` (the stream's configured names), a CSV's columns are taken by those names,
    in that order (other columns are an error, so that a typo cannot pass unnoticed). Every row needs
    a label: 0/1 (or -1/+1, true/false), or with ``classes`` K above 2 an integer from 0 to K-1 (a
    label outside them is an error naming its line). Returns ``(X, y, names)``: float ``(n, d)``,
    uint8 labels, the features' names (JSON lines: ``feature_names`` or ``x1..xd``).

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "v.jsonl"
    >>> _ = p.write_text('{"x": [0.5, 2], "y": 1}\\n{"x": [1, -1], "y": -1}\\n')
    >>> X, y, names = read_vector_stream_file(p)
    >>> X.tolist(), y.tolist(), names
    ([[0.5, 2.0], [1.0, -1.0]], [1, 0], ['x1', 'x2'])
    >>> _ = p.write_text('{"x": [0.5, 2], "y": 2}\\n{"x": [1, -1], "y": 0}\\n')
    >>> read_vector_stream_file(p, classes=3)[1].tolist()
    [2, 0]
    >>> read_vector_stream_file(p, classes=2)
    Traceback (most recent call last):
    ...
    privstream.stream_app.sources.files.ExampleFileError: ...: line 1: label y = 2 is not 0/1, ...true/false
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json") or (suffix != ".csv" and text.lstrip().startswith("{")):
        rows: list[list[float]] = []
        labels: list[int] = []
        conventions: set[str] = set()
        for where, x, y in _json_lines(p, text):
            if not isinstance(x, list) or not x or not all(_is_number(v) for v in x):
                raise ExampleFileError(f"{p}: {where}: x must be a list of finite numbers (a feature vector)")
            if rows and len(x) != len(rows[0]):
                raise ExampleFileError(
                    f"{p}: {where}: x has {len(x)} features, the first line {len(rows[0])}"
                )
            rows.append([float(v) for v in x])
            label, convention = _class_label(p, where, y, classes)
            labels.append(label)
            if convention:
                conventions.add(convention)
        if len(conventions) > 1:
            raise ExampleFileError(f"{p}: labels mix the 0/1 and -1/+1 conventions (both 0 and -1 appear)")
        d = len(rows[0]) if rows else len(feature_names or ())
        if feature_names is not None and d != len(feature_names):
            raise ExampleFileError(f"{p}: x has {d} features, the stream {len(feature_names)}")
        names = list(feature_names) if feature_names is not None else [f"x{t + 1}" for t in range(d)]
        return np.array(rows, dtype=np.float64).reshape(len(rows), d), np.array(labels, np.uint8), names
    X, y, names = read_vector_examples(p, classes)
    if np.isnan(y).any():
        line = int(np.flatnonzero(np.isnan(y))[0])
        raise ExampleFileError(f"{p}: data row {line + 1} has no label y (every example sent needs one)")
    if feature_names is not None:
        missing = [f for f in feature_names if f not in names]
        extra = [f for f in names if f not in feature_names]
        if missing or extra:
            raise ExampleFileError(
                f"{p}: the columns must be the stream's features {feature_names} and y"
                + (f"; missing {missing}" if missing else "")
                + (f"; not features of the stream {extra}" if extra else "")
            )
        X = X[:, [names.index(f) for f in feature_names]]
        names = list(feature_names)
    return X, y.astype(np.uint8), names


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and bool(np.isfinite(v))
