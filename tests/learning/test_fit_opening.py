"""Every finite-class learner and sanitizer validates its ``fit`` arguments in one shared place."""

from __future__ import annotations

import inspect

import pytest

from privstream.learning import algorithms
from privstream.learning.private_learners.base import check_fit

CASES = [("learner", n) for n in algorithms.names("learner")] + [
    ("sanitizer", n) for n in algorithms.names("sanitizer")
]


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_fit_opens_with_the_shared_check(kind, name):
    source = inspect.getsource(algorithms.load(kind, name).fit)
    shared = "check_fit(" if kind == "learner" else "check_sanitizer_fit("
    assert shared in source
    for copied in ("check_privacy_parameters(", "check_accuracy_parameter(", "check_expected_size("):
        assert copied not in source, f"{name}.fit validates {copied[:-1]} itself"


def test_the_shared_check_refuses_each_bad_argument():
    from privstream.learning.hypothesis_classes import parse_class_spec

    hclass = parse_class_spec("thresholds:8")
    good = {"epsilon": 1.0, "delta": 0.0, "alpha": 0.1, "beta": 0.1, "expected_size": None}
    assert check_fit(hclass, [1, 2], [0, 1], **good).points.tolist() == [1, 2]
    for key, bad in (("epsilon", 0.0), ("delta", 1.0), ("alpha", 1.0), ("beta", 0.0), ("expected_size", 0)):
        with pytest.raises(ValueError, match=key):
            check_fit(hclass, [1, 2], [0, 1], **{**good, key: bad})
    with pytest.raises(ValueError):
        check_fit(hclass, [9], [0], **good)  # outside the domain
