"""The one registry of algorithms: entry points of the group ``privstream.algorithms``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from privstream.learning import algorithms
from privstream.learning.audit import AUDITS
from privstream.learning.private_learners import LEARNERS, make_learner
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, VECTOR_MODELS
from privstream.learning.sanitizers import SANITIZERS

ROOT = Path(__file__).resolve().parents[2]


def test_every_builtin_is_an_entry_point_of_pyproject_and_every_table_a_view_of_them():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
        algorithms.GROUP
    ]
    views = {
        "learner": LEARNERS,
        "vector-learner": VECTOR_LEARNERS,
        "sanitizer": SANITIZERS,
        "vector-model": VECTOR_MODELS,
        "audit": AUDITS,
    }
    assert set(views) == set(algorithms.KINDS)
    for kind, view in views.items():
        mine = {
            key.partition(".")[2]: target for key, target in declared.items() if key.startswith(kind + ".")
        }
        assert mine and dict(view) == mine, kind
    assert len(declared) == sum(len(v) for v in views.values())  # no key of an unknown kind


def test_every_registered_target_imports():
    for kind in algorithms.KINDS:
        for name in algorithms.names(kind):
            assert callable(algorithms.load(kind, name)), f"{kind}.{name}"


def test_a_name_registered_in_process_is_known_until_removed(monkeypatch):
    target = LEARNERS["generic"]
    monkeypatch.setitem(LEARNERS, "generic-again", target)
    assert "generic-again" in LEARNERS and make_learner("generic-again").name == "generic"
    monkeypatch.undo()
    assert "generic-again" not in LEARNERS
    with pytest.raises(ValueError, match="unknown private learner 'generic-again'"):
        make_learner("generic-again")


def test_an_installed_privstream_reads_the_same_registry_from_its_metadata(monkeypatch):
    """Outside a checkout the entry points come from the installed metadata (pip install)."""
    from importlib import metadata

    ours = [
        ep for ep in metadata.entry_points(group=algorithms.GROUP) if ep.dist and ep.dist.name == "privstream"
    ]
    assert ours, "privstream was installed before its entry points were declared: pip install -e . again"
    checkout = {kind: dict(algorithms.names(kind)) for kind in algorithms.KINDS}
    monkeypatch.setattr(algorithms, "_own_entry_points", lambda: None)
    algorithms.refresh()
    try:
        assert {kind: dict(algorithms.names(kind)) for kind in algorithms.KINDS} == checkout
    finally:
        monkeypatch.undo()
        algorithms.refresh()
