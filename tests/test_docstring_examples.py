"""Every runnable example in the docstrings of the service and its client runs and prints what it says.

Docstrings carry short ``>>>`` examples (mechanisms, ledger, classes, the demo's summary...);
this runs all of them, so documentation that drifts from the code fails CI.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import privstream_client
import pytest

import privstream

MODULES = sorted(
    m.name
    for package in (privstream, privstream_client)
    for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    if not m.name.endswith("__main__")  # importing it would run the CLI
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see stdout)"


def test_the_package_has_examples() -> None:
    attempted = sum(doctest.testmod(importlib.import_module(n), report=False).attempted for n in MODULES)
    assert attempted >= 50  # 2026-11-24: 61 examples; a collection bug would find none
