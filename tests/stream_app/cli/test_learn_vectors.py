"""``privstream learn/evaluate`` with the vector learners (bayes-consistent, semi-supervised, halfspaces)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream import __version__
from privstream.learning.private_learners.vector_base import vector_model_from_dict
from privstream.schemas import HypothesisRelease
from privstream.stream_app.cli import main
from privstream.stream_app.sources.files import ExampleFileError, read_vector_examples


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def labelled(tmp_path):
    """2 features in [0, 1]^2, label 1 iff a + b > 1 (with 10% flips), 2000 rows."""
    gen = np.random.default_rng(0)
    X = gen.random((2000, 2))
    y = ((X.sum(axis=1) > 1) ^ (gen.random(2000) < 0.1)).astype(int)
    path = tmp_path / "vectors.csv"
    rows = (f"{a:.17g},{lab},{b:.17g}\n" for (a, b), lab in zip(X, y, strict=True))
    path.write_text("a,y,b\n" + "".join(rows))
    return path


@pytest.fixture
def partly_labelled(tmp_path):
    """1 feature, target 1[x >= 0.3], 200 labelled rows and 5000 unlabelled (empty y)."""
    x = np.random.default_rng(1).random(5200)
    lines = [f"{v:.17g},{int(v >= 0.3) if i < 200 else ''}\n" for i, v in enumerate(x)]
    path = tmp_path / "ssl.csv"
    path.write_text("x,y\n" + "".join(lines))
    return path


def test_learn_bayes_consistent_prints_one_release_line(capsys, labelled) -> None:
    code, out, err = run(
        capsys,
        "learn",
        "--learner",
        "bayes-consistent",
        "--examples",
        str(labelled),
        "--bounds",
        "0:1",
        "--epsilon",
        "1",
        "--seed",
        "3",
        "--json",
    )
    assert code == 0, err
    (line,) = out.splitlines()
    obj = json.loads(line)
    assert {"hypothesis", "certificate"} <= set(obj)
    release = HypothesisRelease.model_validate_json(line)
    cert = release.certificate
    assert (cert.mechanism, cert.epsilon, cert.delta, cert.neighbouring_relation, cert.privacy_unit) == (
        "pcl",
        1.0,
        0.0,
        "replace-one",
        "example",
    )
    assert cert.sample_size == 2000 and not cert.proper and cert.randomness == "seeded"
    assert cert.accuracy_guarantee_holds is None and cert.library_version == __version__
    assert cert.parameters["learner"] == "bayes-consistent" and cert.parameters["cells_per_axis"] == 7
    model = vector_model_from_dict(release.hypothesis)
    assert model.to_dict() == release.hypothesis and release.hypothesis["bounds"] == [[0.0, 1.0]] * 2
    # reproducible with a seed (hence not private)
    assert (
        run(
            capsys,
            "learn",
            "--learner",
            "bayes-consistent",
            "--examples",
            str(labelled),
            "--bounds",
            "0:1",
            "--epsilon",
            "1",
            "--seed",
            "3",
            "--json",
        )[1]
        == out
    )


def test_evaluate_vector_release(capsys, labelled, tmp_path) -> None:
    _, out, _ = run(
        capsys,
        "learn",
        "--learner",
        "bayes-consistent",
        "--examples",
        str(labelled),
        "--bounds",
        "[[0, 1], [0, 1]]",
        "--epsilon",
        "2",
        "--seed",
        "1",
        "--json",
    )
    release_file = tmp_path / "release.jsonl"
    release_file.write_text(out)
    code, out, err = run(
        capsys, "evaluate", "--release", str(release_file), "--examples", str(labelled), "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["n"] == 2000 and set(result) >= {"error", "n"}
    model = vector_model_from_dict(json.loads(release_file.read_text())["hypothesis"])
    X, y, _ = read_vector_examples(labelled)
    assert result["error"] == pytest.approx(float(np.mean(model.predict(X) != y)))
    assert result["error"] < 0.25  # Bayes error 0.1 on a 7×7 grid


def test_learn_and_evaluate_halfspaces(capsys, labelled, tmp_path) -> None:
    code, out, err = run(
        capsys,
        "learn",
        "--learner",
        "halfspaces",
        "--examples",
        str(labelled),
        "--bounds",
        "0:1",
        "--epsilon",
        "1",
        "--alpha",
        "0.1",
        "--seed",
        "4",
        "--json",
    )
    assert code == 0, err
    release = HypothesisRelease.model_validate_json(out)
    cert = release.certificate
    assert (cert.mechanism, cert.epsilon, cert.delta, cert.proper) == ("halfspace-net-em", 1.0, 0.0, True)
    assert cert.parameters["learner"] == "halfspaces" and cert.parameters["alpha"] == 0.1
    assert cert.parameters["resolution"] == 1000  # ⌈ε·n/2⌉
    assert release.hypothesis["kind"] == "halfspace" and release.hypothesis_class == "halfspaces:2"
    (tmp_path / "r.jsonl").write_text(out)
    _, out, _ = run(
        capsys, "evaluate", "--release", str(tmp_path / "r.jsonl"), "--examples", str(labelled), "--json"
    )
    assert json.loads(out)["error"] < 0.13  # the target a + b > 1 is a halfspace; 10% of labels flipped


def test_learn_and_evaluate_semi_supervised(capsys, partly_labelled, tmp_path) -> None:
    code, out, err = run(
        capsys,
        "learn",
        "--learner",
        "semi-supervised",
        "--examples",
        str(partly_labelled),
        "--bounds",
        "0:1",
        "--epsilon",
        "1",
        "--delta",
        "1e-8",
        "--alpha",
        "0.1",
        "--beta",
        "0.1",
        "--seed",
        "2",
        "--json",
    )
    assert code == 0, err
    release = HypothesisRelease.model_validate_json(out)
    cert = release.certificate
    assert (cert.mechanism, cert.epsilon, cert.delta, cert.proper) == ("pcssl", 1.0, 1e-8, True)
    assert cert.theorem_sample_size is not None and cert.accuracy_guarantee_holds is None
    assert release.hypothesis["kind"] == "stump" and release.hypothesis_class == "stumps:1"
    (tmp_path / "r.jsonl").write_text(out)
    _, out, _ = run(
        capsys,
        "evaluate",
        "--release",
        str(tmp_path / "r.jsonl"),
        "--examples",
        str(partly_labelled),
        "--json",
    )
    result = json.loads(out)
    assert result["n"] == 200  # only labelled rows are scored
    assert result["error"] < 0.15


@pytest.mark.parametrize(
    "extra,message",
    [
        ((), "--bounds is required"),
        (("--bounds", "1:0"), "lo < hi"),
        (("--bounds", "[[0, 1]]"), "1 bounds for 2 features"),
        (("--bounds", "zero:one"), "expected 'lo:hi'"),
        (("--bounds", "0:1", "thresholds:8"), "takes no CLASS"),
    ],
)
def test_bad_bounds_and_arguments_are_one_line_exit_2(capsys, labelled, extra, message) -> None:
    code, out, err = run(
        capsys,
        "learn",
        "--learner",
        "bayes-consistent",
        "--examples",
        str(labelled),
        "--epsilon",
        "1",
        *extra,
    )
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_other_learners_still_need_a_class(capsys, tmp_path) -> None:
    path = tmp_path / "ex.csv"
    path.write_text("x,y\n1,1\n")
    code, _, err = run(capsys, "learn", "--examples", str(path), "--epsilon", "1")
    assert code == 2 and "needs a CLASS" in err


def test_unlabelled_rows_are_refused_by_bayes_consistent(capsys, partly_labelled) -> None:
    code, _, err = run(
        capsys,
        "learn",
        "--learner",
        "bayes-consistent",
        "--examples",
        str(partly_labelled),
        "--bounds",
        "0:1",
        "--epsilon",
        "1",
    )
    assert code == 2 and "semi-supervised" in err


def test_read_vector_examples_errors(tmp_path) -> None:
    cases = {
        "a,b\n1,2\n": "label column y",
        "a,y\n1,2\n": "label y = '2'",
        "a,y\nnan,1\n": "not finite",
        "a,y\nzz,1\n": "not a number",
        "a,y\n1,1,3\n": "3 fields",
        "a,y\n1,0\n2,-1\n": "mix",
    }
    for text, message in cases.items():
        p = tmp_path / "bad.csv"
        p.write_text(text)
        with pytest.raises(ExampleFileError, match=message):
            read_vector_examples(p)
    p = tmp_path / "ok.csv"
    p.write_text("y,f1,f2\n-1,0.5,1e3\n+1,2,3\n")
    X, y, names = read_vector_examples(p)
    assert names == ["f1", "f2"] and y.tolist() == [0.0, 1.0] and X.tolist() == [[0.5, 1000.0], [2.0, 3.0]]
