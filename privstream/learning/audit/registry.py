"""Every audit spec by name: :data:`AUDITS` maps a name to the ``"module:function"`` that builds it.

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

import importlib
from collections.abc import Callable
from typing import Any

from privstream.learning.audit.harness import AuditSpec

__all__ = ["AUDITS", "audit_spec", "audit_spec_factory"]

_MECHANISMS = "privstream.learning.mechanisms.audit_specs"
_GENERIC = "privstream.learning.private_learners.generic.audit_specs"
_PROPER = "privstream.learning.private_learners.proper.audit_specs"
_GLOBAL_STABILITY = "privstream.learning.private_learners.global_stability.audit_specs"
_CONSISTENT = "privstream.learning.consistent.audit_specs"
_SANITIZERS = "privstream.learning.sanitizers.audit_specs"
_HIERARCHICAL = "privstream.learning.sanitizers.hierarchical.audit_specs"
_HALFSPACES = "privstream.learning.private_learners.halfspaces.audit_specs"
_KERNEL = "privstream.learning.private_learners.kernel.audit_specs"

#: Audit name -> ``"module:function"``; the function returns the :class:`AuditSpec` (keyword
#: ``epsilon`` where the claim can be chosen).
AUDITS: dict[str, str] = {
    # DP mechanisms (learning/mechanisms/)
    "discrete_laplace": f"{_MECHANISMS}:discrete_laplace_audit_spec",
    "laplace": f"{_MECHANISMS}:laplace_audit_spec",
    "discrete_gaussian": f"{_MECHANISMS}:discrete_gaussian_audit_spec",
    "gaussian": f"{_MECHANISMS}:gaussian_audit_spec",
    "exponential": f"{_MECHANISMS}:exponential_audit_spec",
    "permute_and_flip": f"{_MECHANISMS}:permute_and_flip_audit_spec",
    "stable_histogram_counts": f"{_MECHANISMS}:stable_histogram_counts_audit_spec",
    "stable_histogram_singleton": f"{_MECHANISMS}:stable_histogram_singleton_audit_spec",
    "above_threshold": f"{_MECHANISMS}:above_threshold_audit_spec",
    "quantile": f"{_MECHANISMS}:quantile_audit_spec",
    # private learners (private_learners/base.py: LEARNERS)
    "generic": f"{_GENERIC}:generic_audit_spec",
    "generic-intervals": f"{_GENERIC}:generic_intervals_audit_spec",
    "proper": f"{_PROPER}:proper_audit_spec",
    "global-stability": f"{_GLOBAL_STABILITY}:global_stability_audit_spec",
    "global-stability-add-remove": f"{_GLOBAL_STABILITY}:add_remove_audit_spec",
    "proper-add-remove": f"{_PROPER}:add_remove_audit_spec",
    # vector learners (private_learners/vector_base.py: VECTOR_LEARNERS) and their density step
    "bayes-consistent": f"{_CONSISTENT}:bayes_consistent_audit_spec",
    "bayes-consistent-empty-cell": f"{_CONSISTENT}:empty_cell_audit_spec",
    "semi-supervised": f"{_CONSISTENT}:semi_supervised_audit_spec",
    "pcde": f"{_CONSISTENT}:pcde_audit_spec",
    "halfspaces": f"{_HALFSPACES}:halfspaces_audit_spec",
    "halfspaces-fitted": f"{_HALFSPACES}:fitted_audit_spec",
    "kernel": f"{_KERNEL}:kernel_audit_spec",
    "kernel-spread": f"{_KERNEL}:spread_audit_spec",
    # sanitizers (sanitizers/base.py: SANITIZERS)
    "mwem": f"{_SANITIZERS}:mwem_audit_spec",
    "mwem-zcdp": f"{_SANITIZERS}:mwem_zcdp_audit_spec",
    "mwem-add-remove": f"{_SANITIZERS}:mwem_add_remove_audit_spec",
    "fooling": f"{_SANITIZERS}:fooling_audit_spec",
    "hierarchical": f"{_HIERARCHICAL}:hierarchical_audit_spec",
    "hierarchical-partition": f"{_HIERARCHICAL}:partition_audit_spec",
    "hierarchical-points": f"{_HIERARCHICAL}:points_audit_spec",
}


def audit_spec_factory(name: str) -> Callable[..., AuditSpec]:
    """The function registered as ``name`` (its module imported now); raises ``ValueError`` if unknown."""
    target = AUDITS.get(name) if isinstance(name, str) else None
    if target is None:
        raise ValueError(f"unknown audit {name!r}; auditable: {', '.join(sorted(AUDITS))}")
    module, _, attr = target.partition(":")
    factory: Callable[..., AuditSpec] = getattr(importlib.import_module(module), attr)
    return factory


def audit_spec(name: str, **params: Any) -> AuditSpec:
    """The :class:`AuditSpec` registered as ``name``, built with ``params`` (e.g. ``epsilon``)."""
    return audit_spec_factory(name)(**params)
