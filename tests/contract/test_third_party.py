"""A third-party learner, written in a test folder, registers through an entry point and passes
the shipped contract (:func:`privstream.testing.check_algorithm`).

The distribution is installed the way pip would: a ``*.dist-info`` folder with the entry points
of the group ``privstream.algorithms``, in a directory on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from privstream.learning import algorithms as registry
from privstream.learning.private_learners import LEARNERS, make_learner
from privstream.stream_app.settings import StreamConfig
from privstream.testing import check_algorithm

THIRD_PARTY = Path(__file__).resolve().parent / "thirdparty"

ENTRY_POINTS = """\
[privstream.algorithms]
learner.tiny = tiny_learner:TinyLearner
audit.tiny = tiny_learner:tiny_audit_spec
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """``tiny-privstream`` installed into a fresh site directory, found by the registry."""
    site = tmp_path / "site"
    info = site / "tiny_privstream-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-privstream\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(THIRD_PARTY))
    registry.refresh()
    yield
    monkeypatch.undo()
    sys.modules.pop("tiny_learner", None)
    registry.refresh()


def test_a_third_party_learner_is_unknown_before_it_is_installed():
    assert "tiny" not in LEARNERS
    with pytest.raises(AssertionError, match="no learner is registered as 'tiny'"):
        check_algorithm("learner", "tiny")


def test_a_third_party_learner_registers_by_entry_point_and_passes_the_contract(installed):
    assert "tiny" in LEARNERS and make_learner("tiny").name == "tiny"
    # the service's settings take it by name, as a built-in
    stream = StreamConfig(
        name="s",
        hypothesis_class="thresholds:64",
        release={
            "learner": "tiny",
            "epsilon": 1.0,
            "epsilon_budget": 10.0,
            "window": {"kind": "count", "size": 50},
        },
    )
    assert stream.release is not None and stream.release.learner == "tiny"
    ran = check_algorithm("learner", "tiny")
    assert {"cli_matches_service", "audit_holds", "timing_inputs_run", "zero_examples_released"} <= set(ran)
