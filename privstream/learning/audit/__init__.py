"""The empirical privacy audit: the harness and the registry of every audit spec.

* :mod:`.harness`: :func:`audit` (an honest lower confidence bound on ε from many runs on a
  neighbouring pair), :class:`AuditSpec`, :func:`run_audit`, and the exact checks
  :func:`privacy_loss` and :func:`hockey_stick`; it imports no mechanism and no learner.
* :mod:`.registry`: :data:`AUDITS`, every spec by name (``privstream audit NAME``), declared next to
  the code it audits (``mechanisms/audit_specs.py``, each learner's ``audit_specs.py``, ...).
"""

from privstream.learning.audit.harness import (
    AuditResult,
    AuditSpec,
    MechanismFactory,
    audit,
    clopper_pearson,
    hockey_stick,
    privacy_loss,
    run_audit,
)
from privstream.learning.audit.registry import AUDITS, audit_spec, audit_spec_factory

__all__ = [
    "AUDITS",
    "AuditResult",
    "AuditSpec",
    "MechanismFactory",
    "audit",
    "audit_spec",
    "audit_spec_factory",
    "clopper_pearson",
    "hockey_stick",
    "privacy_loss",
    "run_audit",
]
