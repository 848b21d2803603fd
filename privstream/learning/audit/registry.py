"""Every audit spec by name: :data:`AUDITS` maps a name to the ``"module:function"`` that builds it
(the ``audit`` entry points of :mod:`privstream.learning.algorithms`).

Each mechanism, learner and sanitizer declares its :class:`~privstream.learning.audit.harness.AuditSpec`
next to its code (OpenDP-style); this registry only names them, as strings imported on first use
(like :data:`~privstream.learning.private_learners.base.LEARNERS`), so neither it nor the harness
imports any learner. A learner, vector learner or sanitizer is registered under its own registry
name (``"generic"``, ``"bayes-consistent"``, ``"mwem"``, ...: the contract suite checks it);
further pairs of one algorithm are named ``"<name>-<case>"``.

>>> spec = audit_spec("exponential")
>>> spec.name, sorted(spec.broken)
('exponential', ['epsilon_doubled', 'no_noise'])
>>> audit_spec("svm")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown audit 'svm'; auditable: above_threshold, bayes-consistent, ...
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from privstream.learning import algorithms
from privstream.learning.audit.harness import AuditSpec

__all__ = ["AUDITS", "audit_spec", "audit_spec_factory"]

#: Audit name -> ``"module:function"``; the function returns the :class:`AuditSpec` (keyword
#: ``epsilon`` where the claim can be chosen): the registry's ``audit`` entry points.
AUDITS: MutableMapping[str, str] = algorithms.names("audit")


def audit_spec_factory(name: str) -> Callable[..., AuditSpec]:
    """The function registered as ``name`` (its module imported now); raises ``ValueError`` if unknown."""
    if not isinstance(name, str) or name not in AUDITS:
        raise ValueError(f"unknown audit {name!r}; auditable: {', '.join(sorted(AUDITS))}")
    factory: Callable[..., AuditSpec] = algorithms.load("audit", name)
    return factory


def audit_spec(name: str, **params: Any) -> AuditSpec:
    """The :class:`AuditSpec` registered as ``name``, built with ``params`` (e.g. ``epsilon``)."""
    return audit_spec_factory(name)(**params)
