"""Every registered algorithm's parameter declaration agrees with its factory: each ranged or
audit-only name is one its factory takes, and each default lies in its declared range (a range
that refused the default would refuse every configuration that left it alone)."""

from __future__ import annotations

import inspect

import pytest

from privstream.learning import algorithms as registry
from privstream.learning.online import ONLINE_LEARNERS
from privstream.learning.parameters import declared

REGISTERED = [
    (kind, name) for kind in ("learner", "vector-learner", "sanitizer") for name in registry.names(kind)
]


def signature_names(factory) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(factory).parameters)


@pytest.mark.parametrize(("kind", "name"), REGISTERED)
def test_a_registered_algorithm_declares_only_names_its_factory_takes(kind, name) -> None:
    factory = registry.load(kind, name)
    takes = signature_names(factory)
    assert set(getattr(factory, "parameter_ranges", {})) <= set(takes)
    assert set(getattr(factory, "audit_parameters", ())) <= set(takes)


@pytest.mark.parametrize(
    ("kind", "name"), REGISTERED + [("online learner", name) for name in sorted(ONLINE_LEARNERS)]
)
def test_every_default_is_within_its_declared_range(kind, name) -> None:
    factory = ONLINE_LEARNERS[name] if kind == "online learner" else registry.load(kind, name)
    takes = signature_names(factory)
    for parameter, declared_range in declared(factory, skip=("bounds",)).items():
        default = takes[parameter].default
        if declared_range is not None and default is not inspect.Parameter.empty:
            assert declared_range.contains(default), (parameter, default, declared_range.describe())


def test_the_algorithms_that_declare_ranges_include_the_built_ins_with_numeric_parameters() -> None:
    """The declaration is used: the built-ins whose parameters are numbers say their ranges."""
    ranged = {
        name for kind, name in REGISTERED if getattr(registry.load(kind, name), "parameter_ranges", None)
    }
    built_ins = {"global-stability", "halfspaces", "kernel", "bayes-consistent", "semi-supervised"}
    assert built_ins | {"mwem", "fooling", "hierarchical"} <= ranged
