"""What a registered algorithm's own failure looks like on the command line: one line on stderr,
no traceback, nothing on stdout. A learner that spends more ε than ``--epsilon`` is refused (exit 1:
the user's input is fine, the algorithm is wrong); a parameter the user got wrong stays exit 2."""

from __future__ import annotations

import pytest

from privstream.learning.errors import InvariantError
from privstream.learning.private_learners import LEARNERS, make_learner
from privstream.stream_app.cli import main

HERE = "tests.stream_app.cli.test_algorithm_failures"


class Overspends:
    """A third-party learner: the generic learner run at twice the ε it is given (and saying so)."""

    def __init__(self) -> None:
        self.inner = make_learner("generic")
        self.name = "overspends"

    def fit(self, hclass, xs, ys, *, epsilon, **kwargs):
        return self.inner.fit(hclass, xs, ys, epsilon=2 * epsilon, **kwargs)


class Broken:
    """A third-party learner whose invariant check fails."""

    name = "broken"

    def fit(self, *args, **kwargs):
        raise InvariantError("the noise scale is not positive")


@pytest.fixture
def examples(tmp_path):
    path = tmp_path / "ex.csv"
    path.write_text("x,y\n1,0\n40000,1\n50000,1\n3,0\n")
    return path


@pytest.mark.parametrize(
    ("name", "target", "says"),
    [
        (
            "overspends",
            f"{HERE}:Overspends",
            "privstream learn: refused: the algorithm spent epsilon 2 where 1",
        ),
        ("broken", f"{HERE}:Broken", "privstream learn: internal error: the noise scale is not positive"),
    ],
)
def test_an_algorithm_s_failure_is_one_line_exit_1_and_prints_no_release(
    capsys, monkeypatch, examples, name, target, says
) -> None:
    monkeypatch.delenv("PRIVSTREAM_DEBUG", raising=False)
    monkeypatch.setitem(LEARNERS, name, target)
    argv = ["learn", "thresholds:65536", "--examples", str(examples), "--learner", name, "--epsilon", "1"]
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 1, err
    assert out == ""  # no release printed
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(says), err


def test_the_honest_learner_on_the_same_input_prints_its_release(capsys, examples) -> None:
    argv = ["learn", "thresholds:65536", "--examples", str(examples), "--epsilon", "1"]
    assert main(argv) == 0
    assert capsys.readouterr().out  # the release


def test_debug_shows_the_traceback(monkeypatch, examples) -> None:
    monkeypatch.setenv("PRIVSTREAM_DEBUG", "1")
    monkeypatch.setitem(LEARNERS, "broken", f"{HERE}:Broken")
    with pytest.raises(InvariantError):
        main(
            [
                "learn",
                "thresholds:65536",
                "--examples",
                str(examples),
                "--learner",
                "broken",
                "--epsilon",
                "1",
            ]
        )
