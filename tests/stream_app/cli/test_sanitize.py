"""``privstream sanitize`` and ``privstream evaluate --data`` through the CLI entry point; SanitizedView."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream import __version__
from privstream.learning.hypothesis_classes import parse_class_spec, threshold_hypothesis
from privstream.learning.sanitizers.evaluation import class_errors
from privstream.schemas import SanitizedRelease
from privstream.stream_app.cli import main
from privstream.stream_app.sdk import SanitizedView


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def data(tmp_path):
    xs = np.clip(np.random.default_rng(0).normal(20_000, 5_000, 3000).astype(np.int64), 0, 2**16 - 1)
    plain = tmp_path / "window-3.csv"
    plain.write_text("x\n" + "".join(f"{x}\n" for x in xs))
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("x,y\n" + "".join(f"{x},{int(x >= 21_000)}\n" for x in xs))
    return plain, labelled, xs


def sanitize(capsys, tmp_path, data_file, *extra: str, name: str = "release.json"):
    code, out, err = run(
        capsys,
        "sanitize",
        "thresholds:2^16",
        "--data",
        str(data_file),
        "--epsilon",
        "1",
        "--seed",
        "5",
        "--json",
        *extra,
    )
    assert code == 0, err
    path = tmp_path / name
    path.write_text(out)
    return path, out


def test_sanitize_prints_one_release_with_its_certificate(capsys, tmp_path, data) -> None:
    plain, _, xs = data
    _, out = sanitize(capsys, tmp_path, plain)
    (line,) = out.splitlines()
    release = SanitizedRelease.model_validate_json(line)
    assert release.stream_id == "window-3" and release.hypothesis_class == "thresholds:65536"
    assert not release.labelled and release.distribution["domain"] == 2**16
    cert = release.certificate  # the default for a 1-D integer class: the hierarchical sanitizer
    assert (cert.mechanism, cert.epsilon, cert.delta) == ("hierarchical", 1.0, 0.0)
    assert cert.neighbouring_relation == "replace-one"
    assert cert.randomness == "seeded" and cert.sample_size == 3000 and cert.window.end == 3000
    assert cert.library_version == __version__ and cert.parameters["sanitizer"] == "hierarchical"
    assert cert.parameters["neighbouring_relation"] == "replace-one" and cert.parameters["fanout"] == 2
    assert cert.accuracy_guarantee_holds is False and cert.theorem_sample_size is None
    view = SanitizedView.from_json(line)
    h = threshold_hypothesis(2**16, 20_000)
    assert view.answer(h) == view.answer(h.to_dict())
    assert abs(view.answer(h) - float((xs >= 20_000).mean())) < 0.1
    mx, mean = class_errors(parse_class_spec("thresholds:2^16"), view.distribution, xs)
    assert view.max_error_on(xs) == pytest.approx(mx) and view.mean_error_on(xs) == pytest.approx(mean)


def test_mwem_and_the_default_for_class_files(capsys, tmp_path, data) -> None:
    plain, _, _ = data
    _, out = sanitize(capsys, tmp_path, plain, "--sanitizer", "mwem", "--rounds", "10")
    cert = SanitizedRelease.model_validate_json(out).certificate
    assert (cert.mechanism, cert.parameters["sanitizer"], cert.parameters["rounds"]) == ("mwem", "mwem", 10)
    assert cert.parameters["composition"] == "basic" and cert.theorem_sample_size > 3000
    matrix = tmp_path / "class.csv"
    matrix.write_text("1,0,0,1\n0,1,1,0\n1,1,0,0\n")
    small = tmp_path / "small.csv"
    small.write_text("x\n" + "".join(f"{x % 4}\n" for x in range(200)))
    code, out, err = run(
        capsys, "sanitize", str(matrix), "--data", str(small), "--epsilon", "1", "--seed", "1", "--json"
    )
    assert code == 0, err  # the default for a class file is mwem (hierarchical refuses files)
    assert SanitizedRelease.model_validate_json(out).certificate.mechanism == "mwem"
    assert "1-D integer classes" in one_line_error(
        capsys, "sanitize", str(matrix), "--data", str(small), "--epsilon", "1", "--sanitizer", "hierarchical"
    )


def test_sanitize_is_reproducible_with_a_seed_only(capsys, tmp_path, data) -> None:
    plain, _, _ = data
    _, a = sanitize(capsys, tmp_path, plain, name="a.json")
    _, b = sanitize(capsys, tmp_path, plain, name="b.json")
    assert a == b
    code, out, _ = run(
        capsys, "sanitize", "thresholds:2^16", "--data", str(plain), "--epsilon", "1", "--json"
    )
    assert code == 0 and SanitizedRelease.model_validate_json(out).certificate.randomness == "secure"


def test_evaluate_data_prints_the_errors(capsys, tmp_path, data) -> None:
    plain, labelled, _ = data
    release, _ = sanitize(capsys, tmp_path, plain)
    code, out, _ = run(capsys, "evaluate", "--release", str(release), "--data", str(plain), "--json")
    assert code == 0
    got = json.loads(out)
    assert set(got) == {"max_error", "mean_error", "n"} and got["n"] == 3000
    assert 0 <= got["mean_error"] <= got["max_error"] < 0.2
    lab_release, _ = sanitize(capsys, tmp_path, labelled, name="lab.json")
    assert SanitizedRelease.model_validate_json(lab_release.read_text()).labelled
    code, out, _ = run(capsys, "evaluate", "--release", str(lab_release), "--data", str(labelled), "--json")
    assert code == 0 and json.loads(out)["max_error"] < 0.25
    code, out, _ = run(capsys, "evaluate", "--release", str(release), "--data", str(plain))
    assert code == 0 and "max error" in out


def test_fooling_through_the_cli(capsys, tmp_path, data) -> None:
    plain, _, _ = data
    code, out, err = run(
        capsys,
        "sanitize",
        "thresholds:64",
        "--data",
        str(plain),
        "--sanitizer",
        "fooling",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--rounds",
        "2",
        "--json",
    )
    assert code == 2 and "outside the domain" in err  # the data are on 2^16
    small = tmp_path / "small.csv"
    small.write_text("x\n" + "".join(f"{x % 64}\n" for x in range(3000)))
    code, out, err = run(
        capsys,
        "sanitize",
        "thresholds:64",
        "--data",
        str(small),
        "--sanitizer",
        "fooling",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--rounds",
        "2",
        "--seed",
        "1",
        "--json",
    )
    assert code == 0, err
    cert = SanitizedRelease.model_validate_json(out).certificate
    assert cert.mechanism == "fooling-mw" and cert.delta == 1e-6 and cert.parameters["learner"] == "proper"


def one_line_error(capsys, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_bad_input_gives_one_line_and_exit_2(capsys, tmp_path, data) -> None:
    plain, labelled, _ = data
    empty = tmp_path / "empty.csv"
    empty.write_text("x\n")
    assert "no data points" in one_line_error(
        capsys, "sanitize", "thresholds:2^16", "--data", str(empty), "--epsilon", "1"
    )
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    assert "empty data file" in one_line_error(
        capsys, "sanitize", "thresholds:2^16", "--data", str(blank), "--epsilon", "1"
    )
    outside = tmp_path / "outside.csv"
    outside.write_text("x\n5\n70000\n")
    assert "outside the domain" in one_line_error(
        capsys, "sanitize", "thresholds:2^16", "--data", str(outside), "--epsilon", "1"
    )
    noheader = tmp_path / "noheader.csv"
    noheader.write_text("5\n6\n")
    assert "header" in one_line_error(
        capsys, "sanitize", "thresholds:2^16", "--data", str(noheader), "--epsilon", "1"
    )
    assert "delta" in one_line_error(
        capsys,
        "sanitize",
        "thresholds:2^16",
        "--data",
        str(plain),
        "--sanitizer",
        "fooling",
        "--epsilon",
        "1",
    )
    assert "epsilon" in one_line_error(
        capsys, "sanitize", "thresholds:2^16", "--data", str(plain), "--epsilon", "0"
    )
    release, _ = sanitize(capsys, tmp_path, plain)
    # domain mismatch: data from a bigger domain than the release's class
    assert "outside the domain" in one_line_error(
        capsys, "evaluate", "--release", str(release), "--data", str(outside), "--json"
    )
    # a release whose distribution is over another domain than its class
    obj = json.loads(release.read_text())
    obj["distribution"]["domain"] = 2**17
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(obj))
    assert "domain" in one_line_error(capsys, "evaluate", "--release", str(tampered), "--data", str(plain))
    assert "labelled" in one_line_error(
        capsys, "evaluate", "--release", str(release), "--data", str(labelled)
    )
    assert "needs --examples" in one_line_error(capsys, "evaluate", "--release", str(release))
    broken = tmp_path / "broken.json"
    broken.write_text('{"stream_id": "x"}\n')
    assert "not a sanitized release" in one_line_error(
        capsys, "evaluate", "--release", str(broken), "--data", str(plain)
    )


def test_evaluate_examples_still_scores_hypothesis_releases(capsys, tmp_path, data) -> None:
    _, labelled, _ = data
    code, out, _ = run(
        capsys,
        "learn",
        "thresholds:2^16",
        "--examples",
        str(labelled),
        "--epsilon",
        "1",
        "--seed",
        "2",
        "--json",
    )
    assert code == 0
    hyp = tmp_path / "hyp.json"
    hyp.write_text(out)
    code, out, _ = run(capsys, "evaluate", "--release", str(hyp), "--examples", str(labelled), "--json")
    assert code == 0 and set(json.loads(out)) == {"error", "n", "mistakes"}
    assert "hypothesis release" in one_line_error(
        capsys, "evaluate", "--release", str(hyp), "--data", str(labelled)
    )
