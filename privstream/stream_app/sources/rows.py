"""Files of tabular rows to send to a tabular stream: a CSV with a header naming the columns, or
JSON lines whose ``x`` is an object of cells.

Rows go out as the file has them (cells by column name, numbers parsed, empty cells as null): the
service encodes them and dead-letters the rows its columns refuse, so a file is never rewritten on
the way. What is wrong with the file itself (no header, a column missing or unknown, a label that is
not one of the stream's classes) is refused before anything is sent; labels are read as the service
reads them (0/1, -1/+1 or true/false, or 0 to K-1 on a stream of K classes) and sent as 0..K-1.

>>> import pathlib, tempfile
>>> from privstream_client.tabular import TabularEncoder
>>> p = pathlib.Path(tempfile.mkdtemp()) / "rows.csv"
>>> _ = p.write_text("age,plan,y\\n31,pro,1\\n,free,0\\n")
>>> encoder = TabularEncoder.from_dicts([{"name": "age", "bounds": [18, 90], "impute": 40},
...                                     {"name": "plan", "categories": ["free", "pro"]}])
>>> read_row_file(p, encoder)
[{'x': {'age': 31.0, 'plan': 'pro'}, 'y': 1}, {'x': {'age': None, 'plan': 'free'}, 'y': 0}]
>>> _ = p.write_text("age,plan,y\\n31,pro,2\\n")
>>> read_row_file(p, encoder)
Traceback (most recent call last):
...
privstream.stream_app.sources.files.ExampleFileError: ...: line 2: label y = '2' is not 0/1, ...
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from privstream_client.tabular import TabularEncoder

from privstream.stream_app.sources.files import ExampleFileError, read_labels

#: Columns of a CSV sent as the example's own fields rather than cells of its row.
FIELD_COLUMNS = ("y", "id", "user_id", "event_time")


def read_row_file(path: str | Path, encoder: TabularEncoder, classes: int = 2) -> list[dict[str, Any]]:
    """The examples (``x`` a row, ``y``, and ``id``/``user_id``/``event_time`` where the file has
    them) of a CSV or JSON-lines file, for a stream of ``encoder``'s columns and ``classes`` labels;
    :class:`ExampleFileError` naming the line for a malformed file or a label outside the classes."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExampleFileError(f"{p}: not a UTF-8 text file") from None
    if p.suffix.lower() in (".jsonl", ".ndjson", ".json") or text.lstrip().startswith("{"):
        examples, where = _json_rows(p, text)
    else:
        examples, where = _csv_rows(p, text, encoder)
    labels = read_labels(p, [(w, e["y"]) for w, e in zip(where, examples, strict=True)], classes)
    return [{**e, "y": y} for e, y in zip(examples, labels, strict=True)]


def _csv_rows(p: Path, text: str, encoder: TabularEncoder) -> tuple[list[dict[str, Any]], list[str]]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or ()]
    if not header:
        raise ExampleFileError(f"{p}: the CSV needs a header row naming its columns and y")
    reader.fieldnames = header
    columns = [c.name for c in encoder.columns]
    missing = [c for c in [*columns, "y"] if c not in header]
    extra = [h for h in header if h not in columns and h not in FIELD_COLUMNS]
    if missing or extra:
        raise ExampleFileError(
            f"{p}: the header must name the stream's columns {columns} and y"
            + (f"; missing {missing}" if missing else "")
            + (f"; not columns of the stream {extra}" if extra else "")
        )
    examples, lines = [], []
    for cells in reader:
        where = f"line {reader.line_num}"
        if None in cells:  # more cells than the header
            raise ExampleFileError(f"{p}: {where}: more fields than the header has")
        example: dict[str, Any] = {"x": encoder.parse_text({k: v or "" for k, v in cells.items()})}
        example["y"] = cells["y"]  # read with the others, against the stream's classes
        for field in FIELD_COLUMNS[1:]:
            if cells.get(field):
                example[field] = cells[field]
        examples.append(example)
        lines.append(where)
    if not examples:
        raise ExampleFileError(f"{p}: no rows after the header")
    return examples, lines


def _json_rows(p: Path, text: str) -> tuple[list[dict[str, Any]], list[str]]:
    examples, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ExampleFileError(f"{p}: line {number}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("x"), dict) or "y" not in data:
            raise ExampleFileError(f"{p}: line {number}: needs x (an object of cells by column) and y")
        examples.append({k: v for k, v in data.items() if k in ("x", *FIELD_COLUMNS)})
        lines.append(f"line {number}")
    if not examples:
        raise ExampleFileError(f"{p}: no rows")
    return examples, lines
