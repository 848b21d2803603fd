"""The one registry of algorithms: Python entry points of the group ``privstream.algorithms``.

Every learner, vector learner, sanitizer, released vector model and audit spec is an entry point
named ``"<kind>.<name>"`` whose value is the ``"module:attribute"`` of its factory, imported on
first use. The built-in ones are declared in privstream's own ``pyproject.toml`` exactly as a third
party declares its own in theirs::

    [project.entry-points."privstream.algorithms"]
    "learner.my-learner" = "my_package.learner:MyLearner"

Kinds: ``learner`` (:class:`~privstream.learning.private_learners.base.PrivateLearner`),
``vector-learner`` (:class:`~privstream.learning.private_learners.vector_base.VectorLearner`),
``sanitizer`` (:class:`~privstream.learning.sanitizers.base.Sanitizer`), ``vector-model`` (a
released model kind with ``from_dict``) and ``audit`` (a function returning an
:class:`~privstream.learning.audit.harness.AuditSpec`). :data:`LEARNERS` and the other tables are
views of this registry; :func:`privstream.testing.check_algorithm` checks a registered algorithm
against the contract.

A development checkout reads privstream's own entry points from its ``pyproject.toml`` (so a new
built-in needs no reinstall); an installed privstream reads them from its metadata.

>>> sorted(names("sanitizer"))
['fooling', 'hierarchical', 'mwem']
>>> names("learner")["generic"]
'privstream.learning.private_learners.generic.learner:GenericLearner'
"""

from __future__ import annotations

import functools
import importlib
import tomllib
from collections.abc import Iterator, MutableMapping
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = ["GROUP", "KINDS", "Kind", "Names", "load", "names", "refresh"]

GROUP = "privstream.algorithms"
Kind = Literal["learner", "vector-learner", "sanitizer", "vector-model", "audit"]
KINDS: tuple[Kind, ...] = get_args(Kind)

_CHECKOUT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _own_entry_points() -> dict[str, str] | None:
    """privstream's entry points from the checkout's pyproject.toml, or None if not a checkout."""
    if not (_CHECKOUT.is_file() and (_CHECKOUT.parent / "privstream" / "__init__.py").is_file()):
        return None
    with _CHECKOUT.open("rb") as f:
        project = tomllib.load(f).get("project", {})
    if project.get("name") != "privstream":
        return None
    table: dict[str, str] = project.get("entry-points", {}).get(GROUP, {})
    return dict(table)


@functools.cache
def _table() -> dict[Kind, dict[str, str]]:
    """Kind -> name -> target, from every installed distribution's entry points (privstream's own
    from the checkout when there is one)."""
    own = _own_entry_points()
    found: dict[str, str] = dict(own or {})
    for ep in metadata.entry_points(group=GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        if own is not None and dist == "privstream":
            continue  # the checkout's declaration wins over a stale installed copy
        found.setdefault(ep.name, ep.value)
    table: dict[Kind, dict[str, str]] = {kind: {} for kind in KINDS}
    for key, target in sorted(found.items()):
        kind, _, name = key.partition(".")
        if kind in table and name:
            table[kind][name] = target
    return table


def refresh() -> None:
    """Read the entry points again (after installing a distribution in a running process)."""
    _table.cache_clear()


class Names(MutableMapping[str, str]):
    """A live view of one kind's registered names -> ``"module:attribute"`` targets.

    Assigning a name registers it in this process only (tests, a worker's ``sitecustomize``);
    deleting it unregisters it.
    """

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self._local: dict[str, str] = {}
        self._removed: set[str] = set()

    def _merged(self) -> dict[str, str]:
        merged = {k: v for k, v in _table()[self.kind].items() if k not in self._removed}
        merged.update(self._local)
        return merged

    def __getitem__(self, name: str) -> str:
        return self._merged()[name]

    def __setitem__(self, name: str, target: str) -> None:
        self._removed.discard(name)
        self._local[name] = target

    def __delitem__(self, name: str) -> None:
        if name not in self._merged():
            raise KeyError(name)
        self._local.pop(name, None)
        self._removed.add(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._merged()))

    def __len__(self) -> int:
        return len(self._merged())

    def __repr__(self) -> str:
        return f"Names({self.kind!r}: {sorted(self._merged())})"


_VIEWS: dict[Kind, Names] = {kind: Names(kind) for kind in KINDS}


def names(kind: Kind) -> Names:
    """The registered names of ``kind`` (a live view)."""
    return _VIEWS[kind]


def load(kind: Kind, name: str) -> Any:
    """The factory registered as ``name`` of ``kind``, its module imported now; ``KeyError`` if
    none is."""
    module, _, attr = names(kind)[name].partition(":")
    return getattr(importlib.import_module(module), attr)
