"""``privstream learn``, ``evaluate`` and ``audit`` through the CLI entry point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream import __version__
from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import generic_sample_size
from privstream.schemas import HypothesisRelease
from privstream.stream_app.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def examples(tmp_path):
    """Realizable thresholds:1024 data (target t* = 307), 300 examples."""
    xs = np.random.default_rng(0).integers(0, 1024, size=300)
    path = tmp_path / "window-7.csv"
    path.write_text("x,y\n" + "".join(f"{x},{int(x >= 307)}\n" for x in xs))
    return path, xs, (xs >= 307).astype(np.uint8)


def test_learn_json_is_a_release_with_its_certificate(capsys, examples) -> None:
    path, _, _ = examples
    code, out, err = run(
        capsys,
        "learn",
        "thresholds:1024",
        "--examples",
        str(path),
        "--epsilon",
        "0.5",
        "--seed",
        "7",
        "--json",
    )
    assert code == 0
    assert "NOT private" in err
    (line,) = out.splitlines()
    release = HypothesisRelease.model_validate_json(line)
    assert release.stream_id == "window-7" and release.hypothesis_class == "thresholds:1024"
    cert = release.certificate
    assert (cert.mechanism, cert.epsilon, cert.delta, cert.neighbouring_relation, cert.privacy_unit) == (
        "generic-exponential",
        0.5,
        0.0,
        "replace-one",
        "example",
    )
    assert cert.window is not None and cert.window.kind == "file" and cert.window.end == 300
    assert cert.sample_size == 300 and cert.proper and cert.randomness == "seeded"
    assert cert.library_version == __version__
    assert cert.theorem_sample_size == generic_sample_size(1025, 0.25, 0.25, 0.5)
    assert cert.accuracy_guarantee_holds is (cert.theorem_sample_size <= 300)
    assert cert.parameters["learner"] == "generic" and cert.parameters["alpha"] == 0.25
    h = hypothesis_from_dict(release.hypothesis)
    hclass = parse_class_spec("thresholds:1024")
    assert h in {hclass.hypothesis(t) for t in range(hclass.size)}  # proper, canonical
    # Reproducible with the same seed (and therefore not private).
    assert (
        run(
            capsys,
            "learn",
            "thresholds:1024",
            "--examples",
            str(path),
            "--epsilon",
            "0.5",
            "--seed",
            "7",
            "--json",
        )[1]
        == out
    )


def test_learn_runs_report_total_cost_and_secure_default(capsys, examples) -> None:
    path, _, _ = examples
    code, out, err = run(
        capsys,
        "learn",
        "intervals:1024",
        "--examples",
        str(path),
        "--epsilon",
        "0.5",
        "--runs",
        "3",
        "--json",
    )
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3
    assert [d["certificate"]["parameters"]["run"] for d in lines] == [0, 1, 2]
    assert all(d["certificate"]["randomness"] == "secure" for d in lines)
    assert "3 x epsilon = 1.5" in err and "NOT private" not in err


def test_learn_human_readable(capsys, examples) -> None:
    path, _, _ = examples
    code, out, _ = run(capsys, "learn", "points:1024", "--examples", str(path), "--epsilon", "1")
    assert code == 0
    assert "(1, 0)-DP, replace-one, generic-exponential, secure randomness" in out
    assert "theorem needs n = " in out


def test_evaluate_scores_each_release(capsys, examples, tmp_path) -> None:
    path, xs, ys = examples
    _, out, _ = run(
        capsys,
        "learn",
        "thresholds:1024",
        "--examples",
        str(path),
        "--epsilon",
        "0.05",
        "--seed",
        "1",
        "--runs",
        "2",
        "--json",
    )
    releases = tmp_path / "releases.jsonl"
    releases.write_text(out + "\n")  # a trailing blank line is ignored
    code, got, _ = run(capsys, "evaluate", "--release", str(releases), "--examples", str(path), "--json")
    assert code == 0
    results = [json.loads(line) for line in got.splitlines()]
    assert len(results) == 2
    for line, res in zip(out.splitlines(), results, strict=True):
        h = hypothesis_from_dict(json.loads(line)["hypothesis"])
        mistakes = int(np.count_nonzero(h.predict(xs) != ys))
        assert res == {"error": mistakes / 300, "n": 300, "mistakes": mistakes}


def test_audit_generic_passes_and_catches_its_broken_variant(capsys) -> None:
    code, out, _ = run(capsys, "audit", "generic", "--runs", "2000", "--json")
    d = json.loads(out)
    assert code == 0 and d["passed"] and not d["exceeds_claim"]
    assert d["claimed_epsilon"] == 1.0 and d["epsilon_lower_bound"] <= 1.0
    assert d["exact_privacy_loss"] == pytest.approx(0.8857, abs=1e-4)
    code, out, _ = run(capsys, "audit", "generic", "--variant", "no_noise", "--runs", "1000", "--json")
    d = json.loads(out)
    assert code == 1 and d["exceeds_claim"] and d["epsilon_lower_bound"] > 1.0
    assert d["epsilon_estimate"] is None  # infinite: ERM never outputs the all-zero function under S


def test_audit_other_epsilon_and_registered_mechanism(capsys) -> None:
    code, out, _ = run(capsys, "audit", "generic", "--epsilon", "0.5", "--runs", "1000", "--json")
    assert code == 0 and json.loads(out)["claimed_epsilon"] == 0.5
    code, out, _ = run(capsys, "audit", "exponential", "--runs", "2000", "--seed", "2")
    assert code == 0 and "PASS" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["learn", "thresholds:1024", "--epsilon", "0"], "epsilon must be > 0"),
        (["learn", "thresholds:1024", "--epsilon", "1", "--learner", "svm"], "known: bayes-consistent, gen"),
        (["learn", "thresholds:100", "--epsilon", "1"], "outside the domain [0, 100)"),
        (["learn", "thresholds:1024", "--epsilon", "1", "--runs", "0"], "--runs must be at least 1"),
        (["learn", "cubes:3", "--epsilon", "1"], "unknown class spec"),
        (["audit", "nope"], "unknown audit 'nope'"),
        (["audit", "generic", "--variant", "nope"], "known: no_noise, sensitivity_understated"),
        (["audit", "laplace", "--epsilon", "2"], "--epsilon is not supported"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, examples, argv, message) -> None:
    path, _, _ = examples
    if argv[0] == "learn":
        argv = [*argv, "--examples", str(path)]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_bad_labels_and_bad_release_files(capsys, tmp_path, examples) -> None:
    path, _, _ = examples
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    code, _, err = run(capsys, "learn", "thresholds:8", "--examples", str(bad), "--epsilon", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "label" in err
    release = tmp_path / "release.jsonl"
    release.write_text('{"stream_id": "s"}\n')
    code, _, err = run(capsys, "evaluate", "--release", str(release), "--examples", str(path))
    assert code == 2 and f"{release}: line 1: not a release" in err
    small = tmp_path / "small.csv"
    small.write_text("x,y\n1,1\n")
    _, out, _ = run(capsys, "learn", "thresholds:8", "--examples", str(small), "--epsilon", "1", "--json")
    release.write_text(out)
    code, _, err = run(capsys, "evaluate", "--release", str(release), "--examples", str(path))
    assert code == 2 and "outside the domain [0, 8)" in err
