"""``privstream evaluate --epsilon``: each release's error as a private estimate with an interval."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.learning.hypotheses import hypothesis_from_dict
from privstream.stream_app.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def scored(tmp_path, capsys):
    """Two releases of thresholds:1024 learned on 2,000 noisy examples, and fresh examples to score."""
    rng = np.random.default_rng(0)
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    for path, n in ((train, 2000), (test, 4000)):
        xs = rng.integers(0, 1024, size=n)
        ys = (xs >= 307) ^ (rng.random(n) < 0.1)
        path.write_text("x,y\n" + "".join(f"{x},{int(y)}\n" for x, y in zip(xs, ys, strict=True)))
    _, out, _ = run(
        capsys,
        "learn",
        "thresholds:1024",
        "--examples",
        str(train),
        "--epsilon",
        "1",
        "--seed",
        "3",
        "--runs",
        "2",
        "--json",
    )
    releases = tmp_path / "releases.jsonl"
    releases.write_text(out)
    return releases, test


def exact_errors(releases, test) -> list[float]:
    lines = test.read_text().splitlines()[1:]
    xs = np.array([int(line.split(",")[0]) for line in lines])
    ys = np.array([int(line.split(",")[1]) for line in lines])
    out = []
    for line in releases.read_text().splitlines():
        h = hypothesis_from_dict(json.loads(line)["hypothesis"])
        out.append(float(np.mean(h.predict(xs) != ys)))
    return out


@pytest.mark.parametrize("size_public", [False, True])
def test_each_release_gets_a_private_estimate_whose_interval_holds_its_error(
    capsys, scored, size_public
) -> None:
    releases, test = scored
    flags = ["--size-public"] if size_public else []
    argv = [
        "evaluate",
        "--release",
        str(releases),
        "--examples",
        str(test),
        "--epsilon",
        "0.5",
        "--seed",
        "7",
    ]
    code, out, err = run(capsys, *argv, *flags, "--json")
    assert code == 0
    estimates = [json.loads(line) for line in out.splitlines()]
    assert len(estimates) == 2 and all(e["private"] for e in estimates)
    for estimate, exact in zip(estimates, exact_errors(releases, test), strict=True):
        assert estimate["low"] <= exact <= estimate["high"]
        assert abs(estimate["error"] - exact) < 0.01  # 4,000 examples at ε = 0.5: a few counts of noise
        assert (estimate["size"] == 4000) is size_public and (estimate["noisy_size"] is None) is size_public
    assert "NOT private" in err and "2 x 0.5 = 1" in err  # the seed's warning and the spend of two


def test_the_text_line_says_what_was_spent(capsys, scored) -> None:
    releases, test = scored
    code, out, _ = run(
        capsys, "evaluate", "--release", str(releases), "--examples", str(test), "--epsilon", "1"
    )
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and all(
        "private error estimate" in line and "ε = 1 spent" in line for line in lines
    )


def test_without_epsilon_the_exact_error_is_printed_as_before(capsys, scored) -> None:
    releases, test = scored
    code, out, _ = run(capsys, "evaluate", "--release", str(releases), "--examples", str(test), "--json")
    assert code == 0
    assert [json.loads(line)["error"] for line in out.splitlines()] == exact_errors(releases, test)


@pytest.mark.parametrize(("flag", "value"), [("--epsilon", "0"), ("--epsilon", "nan"), ("--confidence", "1")])
def test_bad_privacy_parameters_are_one_line_exit_2(capsys, scored, flag, value) -> None:
    releases, test = scored
    argv = ["evaluate", "--release", str(releases), "--examples", str(test), "--epsilon", "1", flag, value]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
