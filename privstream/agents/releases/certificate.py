"""A release's bytes: the certificate that states its guarantee, around the DP output.

Everything here is a function of the policy (public), the node's public description, the ledger's
receipt of the charge and the learner's result (the DP output and the parameters it states): no
raw example reaches the bytes.

>>> milliseconds(1767225600.25), milliseconds(None)
(1767225600250, None)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from privstream.agents.certificates import Charge, build_release
from privstream.agents.ledger_port import ChargeReceipt
from privstream.agents.releases.policy import (
    Product,
    ReleasePolicy,
    algorithm_relation,
    cap_parameters,
    node_sample_size,
    release_steps,
)
from privstream.learning.guarantees import Relation
from privstream.learning.private_learners.base import PrivateRelease
from privstream.learning.private_learners.vector_base import VectorLearnerResult
from privstream.schemas import HypothesisRelease, Publication, ReleaseEvaluation, WindowInfo

#: What is published at a release's deadline, as its certificate states it.
DEADLINE_RULE = (
    "at scheduled_at the release is published with scheduled_at as its record's timestamp: the learner's "
    "output if its fit finished by then, otherwise a data-independent default (the learner's fit on a "
    "public stand-in input, same parameters and randomness, charged the same), prepared before the fit; "
    "public pages show it from scheduled_at on. Whether the default went out is visible and is decided "
    "by the clock: the work before the deadline is bounded by public sizes (the input cap, the slot "
    "measured on public inputs of its size), but a fit slowed past its slot by the machine's load or by "
    "this node's data releases the default; that probability is not bounded here and not part of "
    "epsilon and delta (each such default is counted and alerted for the operator)"
)


def release_bytes(
    policy: ReleasePolicy,
    product: Product,
    result: PrivateRelease,
    info: WindowInfo,
    receipt: ChargeReceipt,
    *,
    randomness: str,
    level: int,
    public_id: str,
    deadline: float | None,
    library_version: str,
    evaluations: Sequence[ReleaseEvaluation] = (),
) -> bytes:
    """The release of ``product`` for node ``info`` (of ``level``), as published: its certificate
    states the charge (the product's cost at the level), the ledger's receipt, the publication
    slot and the learner's stated parameters (:func:`privstream.agents.certificates.build_release`);
    a hypothesis release carries the quality ``evaluations`` scored on its window (:mod:`.quality`)."""
    # n is public only for count windows of examples: at the user level, how many examples
    # survive the per-user bound depends on how much each user sent (uncharged, private).
    n_public = policy.window_kind == "count" and policy.privacy_unit == "example"
    epsilon, delta = product.cost(level)
    publication = None
    if deadline is not None:
        slot = policy.slot(level)
        if slot is None:
            raise ValueError(f"stream {policy.stream_id}: a release with a deadline needs a publication slot")
        publication = Publication(
            scheduled_at=datetime.fromtimestamp(deadline, UTC),
            publish_delay_seconds=slot,
            max_node_examples=policy.max_node_examples,
            rule=DEADLINE_RULE,
        )
    charge = Charge(
        epsilon=epsilon,
        delta=delta,
        neighbouring_relation=policy_relation(policy),
        privacy_unit="user" if policy.privacy_unit == "user" else "example",
        steps=release_steps(policy),
        algorithm_relation=algorithm_relation(policy),
    )
    spec = result.hypothesis_class if isinstance(result, VectorLearnerResult) else class_spec(policy)
    release = build_release(
        result,
        charge,
        stream_id=policy.stream_id,
        hypothesis_class=spec,
        algorithm=product.name,
        n_public=n_public,
        sample_size=node_sample_size(policy, level) if n_public else None,  # a count node's n: public
        parameters={**cap_parameters(policy), **column_parameters(policy)},
        level=level,
        lifetime=policy.lifetime,
        composition=(
            "sequential"
            if policy.lifetime is None
            else "individual-filter"
            if policy.privacy_unit == "user"
            else "tree"
        ),
        user_contribution_bound=policy.user_contribution_bound,
        window=info,
        ledger_entry_id=public_id,
        ledger_id=receipt.ledger_id,
        ledger_epoch=receipt.ledger_epoch,
        epsilon_budget_remaining=receipt.remaining.epsilon,
        delta_budget_remaining=receipt.remaining.delta,
        publication=publication,
        randomness=randomness,
        library_version=library_version,
    )
    if evaluations and isinstance(release, HypothesisRelease):
        release = release.model_copy(update={"evaluations": list(evaluations)})
    return release.model_dump_json().encode()


def column_parameters(policy: ReleasePolicy) -> dict[str, Any]:
    """A tabular stream's certificate states its columns (public configuration): what a subscriber
    needs to predict from a row.

    >>> column_parameters(ReleasePolicy("s", None, (), columns=({"name": "a", "kind": "numeric"},)))
    {'columns': [{'name': 'a', 'kind': 'numeric'}]}
    """
    return {"columns": [dict(c) for c in policy.columns]} if policy.columns else {}


def class_spec(policy: ReleasePolicy) -> str:
    """The spec of a class stream's hypothesis class (a vector result states its own)."""
    if policy.hypothesis_class is None:
        raise ValueError(f"stream {policy.stream_id} has no hypothesis class (a stream of feature vectors)")
    return policy.hypothesis_class.spec


def policy_relation(policy: ReleasePolicy) -> Relation:
    """The release's neighbouring relation (:attr:`ReleasePolicy.neighbouring_relation`), typed."""
    return "replace-one" if policy.neighbouring_relation == "replace-one" else "add-remove-one"


def milliseconds(moment: float | datetime | None) -> int | None:
    """A Kafka record timestamp (Unix milliseconds) of a moment, or None (the send time).

    >>> milliseconds(1767225600.25), milliseconds(None)
    (1767225600250, None)
    """
    if moment is None:
        return None
    seconds = moment.timestamp() if isinstance(moment, datetime) else moment
    return round(seconds * 1000)
