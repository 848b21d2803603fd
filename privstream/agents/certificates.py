"""The one certificate builder: a release message from an algorithm's result and what it was charged.

The service's release agent (:func:`privstream.agents.releases.certificate.release_bytes`) and the
offline command line (``privstream learn`` / ``privstream sanitize``) both build their releases
here, so their certificates differ only in the frame each states (a node of the release tree and
its ledger entry, or a file). The algorithm contributes what its result states about itself
(``certificate_fields``, ``published_fields`` and ``privacy_guarantee``); the caller the charge,
the group-privacy steps to the privacy unit, and the frame.

The result's guarantee is checked against the charge first: a result that spent more, or states
another neighbouring relation, raises :class:`~privstream.learning.guarantees.GuaranteeError` and
no release is made.

>>> from privstream.learning.private_learners import make_learner
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> hclass = parse_class_spec("thresholds:64")
>>> result = make_learner("generic").fit(hclass, list(range(64)), [int(x >= 9) for x in range(64)],
...                                      epsilon=1.0, rng=seeded(0))
>>> release = build_release(result, Charge(epsilon=1.0, delta=0.0, neighbouring_relation="replace-one"),
...     stream_id="s", hypothesis_class="thresholds:64", algorithm="generic", n_public=True,
...     sample_size=64, randomness="seeded", library_version="0")
>>> release.certificate.guarantee.algorithm_epsilon, release.certificate.parameters["learner"]
(1.0, 'generic')
>>> build_release(result, Charge(epsilon=0.5, delta=0.0, neighbouring_relation="replace-one"),
...     stream_id="s", hypothesis_class="thresholds:64", algorithm="generic", n_public=True,
...     sample_size=64, randomness="seeded", library_version="0")
Traceback (most recent call last):
...
privstream.learning.guarantees.GuaranteeError: the algorithm spent epsilon 1 where 0.5 was charged
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from privstream.learning.guarantees import Guarantee, GuaranteeError, Relation, Step, shortfall
from privstream.learning.private_learners.base import PrivateRelease
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease


@dataclass(frozen=True, kw_only=True)
class Charge:
    """What a release is charged per privacy unit, under which relation, and the group-privacy steps
    from the algorithm's rows to that unit (:func:`privstream.agents.releases.policy.release_steps`).

    ``algorithm_relation``: the relation the algorithm must hold under, when it is not the
    release's (None: the same)."""

    epsilon: float
    delta: float
    neighbouring_relation: Relation
    privacy_unit: Literal["example", "user"] = "example"
    steps: tuple[Step, ...] = ()
    algorithm_relation: Relation | None = None

    @property
    def required(self) -> Guarantee:
        """What the algorithm may spend on its rows for this charge."""
        relation = self.algorithm_relation or self.neighbouring_relation
        return Guarantee.required(self.epsilon, self.delta, relation=relation, steps=self.steps)


def build_release(
    result: PrivateRelease,
    charge: Charge,
    *,
    stream_id: str,
    hypothesis_class: str,
    algorithm: str,
    n_public: bool,
    sample_size: int | None,
    parameters: Mapping[str, Any] | None = None,
    **frame: Any,
) -> HypothesisRelease | SanitizedRelease:
    """The release of ``result`` (by the algorithm named ``algorithm``), charged ``charge``.

    ``n_public``: whether n is public (else ``accuracy_guarantee_holds`` is null: even that bit
    would depend on n); ``sample_size``: the public n, or None; ``parameters``: the caller's own
    (the input cap and its rule, a run number), after the algorithm's; ``frame``: the remaining
    :class:`~privstream.schemas.Certificate` fields (window, ledger, lifetime, publication,
    randomness, library version, ...).
    """
    problem = shortfall(charge.required, result.privacy_guarantee)
    if problem is not None:
        raise GuaranteeError(problem)
    fields = result.certificate_fields()
    published = result.published_fields()
    role = "learner" if "hypothesis" in published else "sanitizer"
    certificate = Certificate(
        mechanism=fields["mechanism"],
        epsilon=charge.epsilon,
        delta=charge.delta,
        neighbouring_relation=charge.neighbouring_relation,
        privacy_unit=charge.privacy_unit,
        guarantee=result.privacy_guarantee.statement(charge.steps, unit=charge.privacy_unit),
        privacy=fields["privacy"],
        sample_size=sample_size,
        parameters={
            **fields["parameters"],
            role: algorithm,
            "algorithm_epsilon": result.epsilon,
            "algorithm_delta": result.delta,
            **(parameters or {}),
        },
        proper=fields["proper"],
        dp_outputs=fields["dp_outputs"],
        accuracy_guarantee_holds=fields["accuracy_guarantee_holds"] if n_public else None,
        theorem_sample_size=fields["theorem_sample_size"],
        **frame,
    )
    common = {"stream_id": stream_id, "hypothesis_class": hypothesis_class, "certificate": certificate}
    if role == "learner":
        return HypothesisRelease(**common, **published)
    return SanitizedRelease(**common, **published)
