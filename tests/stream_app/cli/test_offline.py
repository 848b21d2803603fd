"""``privstream dims`` and ``privstream online`` through the CLI entry point."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from privstream.stream_app.cli import main
from privstream.stream_app.sources.files import ExampleFileError, read_examples


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dims_json_structured_huge(capsys) -> None:
    code, out, _ = run(capsys, "dims", "thresholds:2^62", "--json")  # the largest domain
    assert code == 0
    d = json.loads(out)
    assert d == {
        "class": "thresholds:4611686018427387904",
        "size": 2**62 + 1,
        "domain": 2**62,
        "littlestone": 62,
        "vc": 1,
        "threshold": 2**62,
        "dual_littlestone": 62,
        "dual_vc": 1,
    }


def test_dims_json_file_class_and_witness(capsys, tmp_path) -> None:
    rows = [[int(a <= x < b) for x in range(6)] for a in range(7) for b in range(a, 7)]
    (tmp_path / "iv.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    code, out, _ = run(capsys, "dims", str(tmp_path / "iv.csv"), "--json", "--witness")
    d = json.loads(out)
    assert code == 0
    assert {
        k: d[k] for k in ("size", "domain", "littlestone", "vc", "threshold", "dual_littlestone", "dual_vc")
    } == {
        "size": 22,
        "domain": 6,
        "littlestone": 4,
        "vc": 2,
        "threshold": 6,
        "dual_littlestone": 2,
        "dual_vc": 2,
    }

    def depth(t) -> int:
        return 0 if t is None else 1 + min(depth(t["0"]), depth(t["1"]))

    assert depth(d["witness"]) == 4


def test_dims_human_readable(capsys) -> None:
    code, out, _ = run(capsys, "dims", "intervals:24")
    assert code == 0
    assert "littlestone:      7" in out and "size:             301" in out


def test_online_csv_json(capsys, tmp_path) -> None:
    f = tmp_path / "ex.csv"
    f.write_text("x,y\n" + "".join(f"{x},{int(x >= 300)}\n" for x in (500, 100, 300, 299, 301, 0)))
    code, out, _ = run(capsys, "online", "thresholds:1000", "--examples", str(f), "--json")
    d = json.loads(out)
    assert code == 0
    assert d["examples"] == 6 and d["realizable"] is True
    assert d["mistake_bound"] == 9 and 0 < d["mistakes"] <= 9
    assert d["final_predictor"] == {"kind": "runs", "domain": 1000, "first": 0, "changes": [300]}


def test_online_jsonl_with_signed_and_boolean_labels(capsys, tmp_path) -> None:
    f = tmp_path / "ex.jsonl"
    f.write_text('{"x": 1, "y": 1, "stream_id": "s"}\n{"x": 2, "y": -1}\n\n{"x": 1, "y": 1}\n')
    code, out, _ = run(capsys, "online", "points:5", "--examples", str(f), "--json")
    d = json.loads(out)
    assert code == 0 and (d["examples"], d["mistakes"], d["realizable"]) == (3, 1, True)
    g = tmp_path / "ex2.jsonl"
    g.write_text('{"x": 1, "y": true}\n{"x": 2, "y": true}\n{"x": 1, "y": false}\n')
    code, out, _ = run(capsys, "online", "points:5", "--examples", str(g), "--json")
    d = json.loads(out)  # the extended SOA on points+empty: 3 mistakes > d = 1
    assert (d["mistakes"], d["mistake_bound"], d["realizable"]) == (3, 1, False)
    assert d["final_predictor"]["kind"] == "runs" or d["final_predictor"]["kind"] == "bits"


def test_online_human_readable_and_tie(capsys, tmp_path) -> None:
    f = tmp_path / "ex.csv"
    f.write_text("y,x\n1,3\n")  # column order comes from the header
    code, out, _ = run(capsys, "online", "thresholds:4", "--examples", str(f), "--tie", "0")
    assert code == 0
    assert "examples:        1" in out and "mistakes:        0 (bound 2)" in out
    assert "realizable:      yes" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dims", "cubes:3"], "unknown class spec 'cubes:3'"),
        (["dims", "thresholds:zero"], "is not a positive integer"),
        (["dims", "{tmp}/empty.csv"], "empty class"),
        (["dims", "{tmp}/ragged.csv"], "ragged rows"),
        (["dims", "{tmp}/bad.npy"], "not 0 or 1"),
        (["dims", "{tmp}/missing.npy"], "No such file"),
        (
            ["online", "thresholds:4", "--examples", "{tmp}/outside.csv"],
            "point 7 is outside the domain [0, 4)",
        ),
        (["online", "thresholds:4", "--examples", "{tmp}/label.csv"], "line 2: label y = '2'"),
        (["online", "thresholds:4", "--examples", "{tmp}/noheader.csv"], "header row naming columns x and y"),
        (["online", "thresholds:4", "--examples", "{tmp}/missing.csv"], "No such file"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, tmp_path, argv, message) -> None:
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "ragged.csv").write_text("0,1\n1\n")
    np.save(tmp_path / "bad.npy", np.array([[0, 3]]))
    (tmp_path / "outside.csv").write_text("x,y\n1,0\n7,1\n")
    (tmp_path / "label.csv").write_text("x,y\n1,2\n")
    (tmp_path / "noheader.csv").write_text("1,0\n")
    code, out, err = run(capsys, *(a.format(tmp=tmp_path) for a in argv))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"privstream {argv[0]}: error: ") and message in err


def test_read_examples_formats_and_errors(tmp_path) -> None:
    f = tmp_path / "big.csv"
    f.write_text(f"x,y,note\n{2**62 - 1},true,a\n5,FALSE,b\n")  # the largest point of any domain
    xs, ys = read_examples(f)
    assert xs.dtype == np.int64 and xs.tolist() == [2**62 - 1, 5] and ys.tolist() == [1, 0]
    g = tmp_path / "ex.txt"  # no known extension: sniffed as JSON lines
    g.write_text('{"x": 3, "y": "+1"}\n')
    xs, ys = read_examples(g)
    assert xs.dtype == np.int64 and xs.tolist() == [3] and ys.tolist() == [1]
    cases = {
        "mix.csv": ("x,y\n1,0\n2,-1\n", "mix the 0/1 and -1/+1"),
        "neg.csv": ("x,y\n-1,1\n", "not a non-negative integer"),
        "float.jsonl": ('{"x": 1.5, "y": 1}\n', "not a non-negative integer"),
        "fields.jsonl": ('{"x": 1}\n', "fields x and y"),
        "broken.jsonl": ('{"x": 1,\n', "line 1: not JSON"),
        "short.csv": ("x,y\n1\n", "line 2: 1 fields"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ExampleFileError, match=re.escape(message)):
            read_examples(tmp_path / name)
    (tmp_path / "none.csv").write_text("x,y\n")
    xs, ys = read_examples(tmp_path / "none.csv")
    assert xs.shape == ys.shape == (0,)
