"""A release's bytes: the certificate that states its guarantee, around the DP output.

Everything here is a function of the policy (public), the node's public description, the ledger's
receipt of the charge and the learner's result (the DP output and the parameters it states): no
raw example reaches the bytes.

>>> milliseconds(1767225600.25), milliseconds(None)
(1767225600250, None)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from privstream.agents.ledger_port import ChargeReceipt
from privstream.agents.releases.policy import (
    Product,
    ReleasePolicy,
    cap_parameters,
    node_sample_size,
    release_steps,
)
from privstream.learning.private_learners import LearnerResult
from privstream.learning.private_learners.vector_base import VectorLearnerResult
from privstream.learning.sanitizers import SanitizerResult
from privstream.schemas import (
    Certificate,
    HypothesisRelease,
    Publication,
    SanitizedRelease,
    WindowInfo,
)

#: What is published at a release's deadline, as its certificate states it.
DEADLINE_RULE = (
    "at scheduled_at the release is published with scheduled_at as its record's timestamp: the learner's "
    "output if its fit finished by then, otherwise a data-independent default (the learner's fit on a "
    "public stand-in input, same parameters and randomness, charged the same), prepared before the fit; "
    "public pages show it from scheduled_at on"
)


def theorem_fields(result: Any) -> dict[str, Any]:
    """A vector learner's theorem and guarantee, as the offline CLI states them
    (``VectorLearnerResult.certificate_fields``); nothing for the other results."""
    if isinstance(result, VectorLearnerResult):
        return {"theorem": result.theorem, "guarantee": result.guarantee}
    return {}


def release_bytes(
    policy: ReleasePolicy,
    product: Product,
    result: LearnerResult | SanitizerResult | VectorLearnerResult,
    info: WindowInfo,
    receipt: ChargeReceipt,
    *,
    randomness: str,
    level: int,
    public_id: str,
    deadline: float | None,
    library_version: str,
) -> bytes:
    """The release of ``product`` for node ``info`` (of ``level``), as published: its certificate
    states the charge (the product's cost at the level), the ledger's receipt, the publication
    slot and the learner's stated parameters."""
    # n is public only for count windows of examples: at the user level, how many examples
    # survive the per-user bound depends on how much each user sent (uncharged, private).
    n_public = policy.window_kind == "count" and policy.privacy_unit == "example"
    is_learner = product.topic == "hypotheses"
    epsilon, delta = product.cost(level)
    publication = None
    if deadline is not None:
        slot = policy.slot(level)
        assert slot is not None
        publication = Publication(
            scheduled_at=datetime.fromtimestamp(deadline, UTC),
            publish_delay_seconds=slot,
            max_node_examples=policy.max_node_examples,
            rule=DEADLINE_RULE,
        )
    certificate = Certificate(
        mechanism=result.mechanism,
        epsilon=epsilon,
        delta=delta,
        level=level,
        lifetime=policy.lifetime,
        composition=(
            "sequential"
            if policy.lifetime is None
            else "individual-filter"
            if policy.privacy_unit == "user"
            else "tree"
        ),
        neighbouring_relation=policy.neighbouring_relation,
        privacy_unit=policy.privacy_unit,
        guarantee=result.privacy_guarantee.statement(
            release_steps(policy), unit="user" if policy.privacy_unit == "user" else "example"
        ),
        privacy=result.privacy,
        user_contribution_bound=policy.user_contribution_bound,
        window=info,
        sample_size=node_sample_size(policy, level) if n_public else None,  # a count node's n: public
        ledger_entry_id=public_id,
        ledger_id=receipt.ledger_id,
        ledger_epoch=receipt.ledger_epoch,
        epsilon_budget_remaining=receipt.remaining.epsilon,
        delta_budget_remaining=receipt.remaining.delta,
        publication=publication,
        parameters={
            **result.parameters,
            **theorem_fields(result),
            "learner" if is_learner else "sanitizer": product.name,
            "algorithm_epsilon": result.epsilon,
            "algorithm_delta": result.delta,
            **cap_parameters(policy),
        },
        proper=result.proper if isinstance(result, LearnerResult | VectorLearnerResult) else False,
        dp_outputs=result.dp_outputs,
        accuracy_guarantee_holds=result.accuracy_guarantee_holds if n_public else None,
        theorem_sample_size=result.theorem_sample_size,
        randomness=randomness,
        library_version=library_version,
    )
    spec = result.hypothesis_class if product.vector else policy.hypothesis_class.spec  # type: ignore[union-attr]
    common = {"stream_id": policy.stream_id, "hypothesis_class": spec, "certificate": certificate}
    release: HypothesisRelease | SanitizedRelease
    if isinstance(result, VectorLearnerResult):
        release = HypothesisRelease(**common, hypothesis=result.model.to_dict())
    elif isinstance(result, LearnerResult):
        release = HypothesisRelease(**common, hypothesis=result.hypothesis.to_dict())
    else:
        release = SanitizedRelease(
            **common, distribution=result.distribution.to_dict(), labelled=product.labelled
        )
    return release.model_dump_json().encode()


def milliseconds(moment: float | datetime | None) -> int | None:
    """A Kafka record timestamp (Unix milliseconds) of a moment, or None (the send time).

    >>> milliseconds(1767225600.25), milliseconds(None)
    (1767225600250, None)
    """
    if moment is None:
        return None
    seconds = moment.timestamp() if isinstance(moment, datetime) else moment
    return round(seconds * 1000)
