"""``privstream plan`` through the CLI entry point: JSON, the table, the progress bar, bad input."""

from __future__ import annotations

import json

import pytest

from privstream.learning.private_learners import LEARNERS
from privstream.learning.sanitizers import SANITIZERS
from privstream.stream_app.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_json_is_one_object_with_every_candidate(capsys) -> None:
    code, out, err = run(
        capsys,
        "plan",
        "thresholds:2^16",
        "--epsilon",
        "1",
        "--alpha",
        "0.1",
        "--json",
        "--budget",
        "20",
        "--runs",
        "4",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["hypothesis_class"] == "thresholds:65536" and doc["epsilon"] == 1.0 and doc["alpha"] == 0.1
    names = {c["name"] for c in doc["candidates"]}
    assert set(LEARNERS) | set(SANITIZERS) <= names
    generic = next(c for c in doc["candidates"] if c["name"] == "generic")
    assert generic["applies"] and isinstance(generic["theorem_sample_size"], float)
    assert generic["theorem_sample_size_log10"] > 0 and generic["status"] == "measured"
    assert doc["recommendation"]["learner"] in LEARNERS
    assert "[" in err and "100.0%" in err  # the progress bar, on stderr


def test_plan_table_and_only(capsys) -> None:
    code, out, err = run(
        capsys,
        "plan",
        "points:64",
        "--epsilon",
        "1",
        "--alpha",
        "0.2",
        "--only",
        "generic",
        "--no-progress",
        "--runs",
        "3",
    )
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("class points:64")
    assert any(line.startswith("learner    generic") for line in lines)
    assert lines[-1].startswith("recommendation: learner generic")


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "nonsense:5", "--epsilon", "1", "--alpha", "0.1"],
        ["plan", "thresholds:8", "--epsilon", "-1", "--alpha", "0.1"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "1.5"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "0.1", "--budget", "0"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "0.1", "--only", "svm"],
    ],
)
def test_bad_input_exits_2_with_one_clear_line(capsys, argv) -> None:
    code, out, err = run(capsys, *argv, "--no-progress")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privstream plan: error:")
