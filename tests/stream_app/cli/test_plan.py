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
    # the publication slot a stream needs with each candidate, for nodes of 100,000 examples
    assert doc["node_size"] == 100_000
    assert generic["publish_delay_seconds"] >= 0.25 and generic["node_fit_seconds"] > 0
    # measured as the worker measures it, part by part
    parts = generic["slot_parts"]
    assert parts["examples"] == 100_000 and parts["slot_seconds"] == generic["publish_delay_seconds"]
    assert set(parts["seconds"]) == {"load", "ship", "score", "default", "prepare", "fit", "respawn"}


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
    generic = next(line for line in lines if line.startswith("learner    generic"))
    assert float(generic.split()[4]) >= 0.25  # the slot column: publish_delay_seconds
    assert lines[-2].startswith("recommendation: learner generic")
    assert lines[-1].startswith("slot: publish_delay_seconds the worker derives for count windows of 100,000")


def test_plan_without_the_slot(capsys) -> None:
    argv = ["plan", "points:64", "--epsilon", "1", "--alpha", "0.2", "--only", "generic", "--runs", "3"]
    code, out, err = run(capsys, *argv, "--no-progress", "--node-size", "0", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["node_size"] is None and doc["candidates"][0]["publish_delay_seconds"] is None


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "nonsense:5", "--epsilon", "1", "--alpha", "0.1"],
        ["plan", "thresholds:8", "--epsilon", "-1", "--alpha", "0.1"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "1.5"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "0.1", "--budget", "0"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "0.1", "--only", "svm"],
        ["plan", "thresholds:8", "--epsilon", "1", "--alpha", "0.1", "--node-size", "-1"],
    ],
)
def test_bad_input_exits_2_with_one_clear_line(capsys, argv) -> None:
    code, out, err = run(capsys, *argv, "--no-progress")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privstream plan: error:")
