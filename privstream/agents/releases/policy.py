"""The release policy: what a stream releases, what each release costs, and the rules that turn the
charge into the (ε, δ) its learner runs at.

A stream's :class:`ReleasePolicy` lists its :class:`Product` s (each charged separately per node);
a node of level j costs each product its level's (ε, δ) (:meth:`Product.cost`). Two public rules
then decide the learner's own parameters, both group privacy (:func:`learner_privacy`):

* at the user level one user changes up to ``user_contribution_bound`` rows;
* a capped node whose n is private keeps a subset of its examples: an addition can become a
  replacement inside it, two changes (:func:`cap_halves_epsilon`).

>>> policy = ReleasePolicy("s", None, (), privacy_unit="user", user_contribution_bound=2,
...                        expected_size=5, window_kind="time", max_node_examples=10)
>>> learner_privacy(policy, 1.0, 0.0)
(0.25, 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from privstream.agents.ledger_port import PrivacyCost
from privstream.agents.windows import time_family
from privstream.learning.errors import InvariantError
from privstream.learning.guarantees import CapReplacement, GroupPrivacy, Guarantee, Relation, Step
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.schemas import LifetimeBound


@dataclass(frozen=True)
class Product:
    """One private output of every window: a learner's hypothesis or a sanitizer's distribution.

    Each product of a window is charged separately (its own ledger key, its own ε and δ) and
    published on its own public topic.
    """

    topic: Literal["hypotheses", "sanitized"]
    algorithm: Any  # a PrivateLearner (topic "hypotheses") or a Sanitizer (topic "sanitized")
    epsilon: float
    delta: float = 0.0
    labelled: bool = False  # sanitizers: answer Pr[h(x) = y] over (x, y) instead of Pr[h(x) = 1]
    vector: bool = False  # a VectorLearner on feature vectors (learning.private_learners.vector_base)
    level_epsilon: tuple[float, ...] = ()  # ε per level 0..L of the release tree; () means epsilon
    level_delta: tuple[float, ...] = ()

    def cost(self, level: int) -> tuple[float, float]:
        """(ε, δ) of this product's release of a node of ``level``."""
        epsilon = self.level_epsilon[level] if self.level_epsilon else self.epsilon
        delta = self.level_delta[level] if self.level_delta else self.delta
        return epsilon, delta

    @property
    def name(self) -> str:
        return str(self.algorithm.name)

    @property
    def key(self) -> str:
        """The ledger's mechanism key: one charge per (stream, window, product)."""
        return f"{'learner' if self.topic == 'hypotheses' else 'sanitizer'}:{self.name}"


def topic_of_key(key: str) -> str | None:
    """The public topic of a ledger mechanism key (for re-publishing from the outbox); None for a
    quality estimate's, which travels inside a hypothesis release.

    >>> topic_of_key("learner:generic"), topic_of_key("sanitizer:mwem"), topic_of_key("quality:generic:L0")
    ('hypotheses', 'sanitized', None)
    """
    if key.startswith("quality:"):
        return None
    return "sanitized" if key.startswith("sanitizer:") else "hypotheses"


@dataclass(frozen=True)
class ReleasePolicy:
    """Everything the agent needs to release one stream privately."""

    stream_id: str
    hypothesis_class: HypothesisClass | None  # None for a stream of feature vectors
    products: tuple[Product, ...]
    feature_bounds: np.ndarray | None = None  # public (d, 2) bounds of a vector stream
    alpha: float = 0.25
    beta: float = 0.25
    window_kind: str = "count"
    window_size: int = 2000
    window_seconds: float | None = None
    allowed_lateness_seconds: float = 0.0
    # One publication slot (agents.timing). None: no deadline, each release is published when it is
    # computed (offline use and tests only: then the publication time shows the learner's run time).
    publish_delay_seconds: float | None = None
    level_slots: tuple[float, ...] = ()  # a slot per level 0..L (derived); () means publish_delay_seconds
    schedule_start: float | None = None  # Unix seconds: the stream's first time window holds it
    privacy_unit: str = "example"
    user_contribution_bound: int | None = None
    expected_size: int | None = None  # where n is private: the size the algorithms use instead of n
    top_level: int = 0  # the release tree's top level L (levels 0..L)
    lifetime: LifetimeBound | None = None  # the certificate's lifetime bound (None: sequential total)
    user_budget: PrivacyCost | None = None  # user level: each user's lifetime budget (all streams)
    max_node_examples: int | None = None  # the input cap: the examples a learner reads (None: all)
    # ε of the quality estimate of each hypothesis release, scored on the next window (None: none).
    quality_epsilon: float | None = None
    # Spread over the topic's partitions (partition_by 'example' or 'user'): every worker stores its
    # partitions' rows; only the owner of the stream's key partition closes and releases windows.
    partitioned: bool = False
    # A tabular stream's public column declarations (privstream_client.tabular), stated in its
    # certificates so that a subscriber encodes a row as the service did; () for other streams.
    columns: tuple[Mapping[str, Any], ...] = ()

    @property
    def family(self) -> str:
        """Time windows' family; count windows' also needs the store's generation (the agent's)."""
        if self.window_seconds is None:
            raise InvariantError("invariant broken: self.window_seconds is not None")
        return time_family(self.window_seconds)

    def slot(self, level: int) -> float | None:
        """The publication slot of a node of ``level`` (None: no deadlines)."""
        return self.level_slots[level] if self.level_slots else self.publish_delay_seconds

    @property
    def neighbouring_relation(self) -> str:
        # Count windows have a public size: neighbours replace one example. A time window's size
        # depends on the data, so neighbours add or remove one.
        return "replace-one" if self.window_kind == "count" else "add-remove-one"


def capped(policy: ReleasePolicy) -> bool:
    """Whether the policy's learners read at most ``max_node_examples`` examples of a node."""
    return policy.max_node_examples is not None


def cap_halves_epsilon(policy: ReleasePolicy) -> bool:
    """Whether the learner of a capped node runs at half the level's ε.

    A capped node's learner reads ``max_node_examples`` of its examples: a uniformly random subset
    of a histogram node (drawn from the release's seed), the first ones by arrival of user rows and
    feature vectors. Count windows (replace-one): replacing an example replaces one kept example or
    none, so the level's ε holds. Where n is private (add/remove-one), adding an example can push
    another out of the kept set: inside it an addition becomes a replacement, two add/remove steps,
    so the learner runs at ε/2 (group privacy). Whether the cap binds depends on the private n, so
    the rule is data-independent: always, for every level (``max_node_examples: null`` keeps every
    example and the whole ε, and gives the learner's run time no public bound).

    >>> time = ReleasePolicy("s", None, (), expected_size=10, max_node_examples=100, window_kind="time")
    >>> count = ReleasePolicy("s", None, (), max_node_examples=100)
    >>> cap_halves_epsilon(time), cap_halves_epsilon(count)
    (True, False)
    """
    return capped(policy) and policy.expected_size is not None


#: The certificate's statement of how users pay at the user level (the individual filter at ingest).
USER_CHARGE_RULE = (
    "individual filter at ingest: a user's first row in a time window charges that user, at once, "
    "for every node of the release tree covering the window (each node once, the sum over the "
    "stream's products of its level's epsilon and delta), whether or not the node keeps the "
    "user's rows; a user whose lifetime user budget cannot pay all of them is excluded from the "
    "window and pays nothing for it; a node then holds each admitted user's first "
    "user_contribution_bound rows; users the cap leaves out are over-charged, which is safe"
)


def cap_parameters(policy: ReleasePolicy) -> dict[str, Any]:
    """The certificate's statement of the input cap and its accounting rule (at the user level,
    with the rule users are charged by: :data:`USER_CHARGE_RULE`)."""
    charge = {"user_charge_rule": USER_CHARGE_RULE} if policy.privacy_unit == "user" else {}
    if not capped(policy):
        return {
            "max_node_examples": None,
            "cap_rule": "uncapped: the learner reads all of a node's examples",
            **charge,
        }
    included = " of the users admitted at ingest" if policy.privacy_unit == "user" else ""
    if samples_at_ingest(policy):
        kept = (
            "a uniformly random subset of max_node_examples examples, kept as they arrive: each "
            "example draws a secret uniform priority at ingest and the node keeps the max_node_examples "
            "of lowest priority (a bottom-k sample; a parent keeps the lowest of its children's), in "
            "a random order drawn from the release's seed"
        )
        addition = (
            "n is private (add/remove-one): an addition either leaves the kept set as it is or puts "
            "the added example in place of the kept one of highest priority (a replacement, two "
            "add/remove steps)"
        )
    else:
        kept = (
            "a uniformly random subset of max_node_examples examples (drawn from the release's seed)"
            if shuffles(policy)
            else f"its first max_node_examples examples by arrival{included}"
        )
        addition = (
            "n is private (add/remove-one), so an addition can become a replacement inside the kept "
            "set (two add/remove steps)"
        )
    rule = f"the learner reads {kept}; " + (
        f"{addition}: the learner runs at half the level's epsilon (group privacy)"
        if cap_halves_epsilon(policy)
        else "n is public (replace-one): a replacement changes at most one kept example, the learner "
        "runs at the level's epsilon"
    )
    return {"max_node_examples": policy.max_node_examples, "cap_rule": rule, **charge}


def shuffles(policy: ReleasePolicy) -> bool:
    """Whether a node's rows are put in a random order before the learner reads them: a histogram
    node (an integer class at the example level) is expanded in sorted order, not arrival order."""
    return policy.feature_bounds is None and policy.privacy_unit == "example"


def samples_at_ingest(policy: ReleasePolicy) -> bool:
    """Whether a node keeps a bottom-k sample of its examples as they arrive: a capped integer
    class at the example level whose n is private (time windows), so that a node's storage, its
    close and its release read at most ``max_node_examples`` rows whatever its private size.
    Count windows (n public) keep their rows, whose number is public.

    >>> samples_at_ingest(ReleasePolicy("s", None, (), expected_size=10, max_node_examples=100,
    ...                                 window_kind="time"))
    True
    """
    return shuffles(policy) and cap_halves_epsilon(policy) and policy.window_kind == "time"


def node_expected_size(policy: ReleasePolicy, level: int) -> int:
    """The size the algorithms of a node of ``level`` use where n is private: ``expected_size·2^j``,
    at most the cap of a capped node."""
    if policy.expected_size is None:
        raise InvariantError("invariant broken: policy.expected_size is not None")
    size = policy.expected_size << level
    cap = policy.max_node_examples  # capped(policy): a cap is set
    return min(size, cap) if cap is not None else size


def node_sample_size(policy: ReleasePolicy, level: int) -> int:
    """A count node's public n: ``size·2^j`` examples, at most the cap of a capped node."""
    size = policy.window_size << level
    cap = policy.max_node_examples  # capped(policy): a cap is set
    return min(size, cap) if cap is not None else size


def release_steps(policy: ReleasePolicy) -> tuple[Step, ...]:
    """The group-privacy steps from a learner's guarantee on its rows to the release's per unit: a
    user changes up to ``user_contribution_bound`` rows; an addition inside a capped node whose n is
    private is a replacement, two changes (:func:`cap_halves_epsilon`).

    >>> user = ReleasePolicy("s", None, (), privacy_unit="user", user_contribution_bound=2, expected_size=5)
    >>> release_steps(user)
    (GroupPrivacy(k=2),)
    """
    steps: list[Step] = []
    if policy.privacy_unit == "user":
        if policy.user_contribution_bound is None:
            raise ValueError(f"stream {policy.stream_id}: the user level needs a user_contribution_bound")
        steps.append(GroupPrivacy(policy.user_contribution_bound))
    if cap_halves_epsilon(policy):
        steps.append(CapReplacement())
    return tuple(steps)


def algorithm_relation(policy: ReleasePolicy) -> Relation:
    """The relation the learners' guarantee must hold under: replace-one where n is public (they get
    no ``expected_size``), add/remove-one where it is private."""
    return "replace-one" if policy.expected_size is None else "add-remove-one"


def required_guarantee(policy: ReleasePolicy, epsilon: float, delta: float) -> Guarantee:
    """What a learner may spend on its rows for a release charged (``epsilon``, ``delta``) per unit
    (group privacy through :func:`release_steps`); its result's guarantee is checked against it."""
    return Guarantee.required(
        epsilon, delta, relation=algorithm_relation(policy), steps=release_steps(policy)
    )


def learner_privacy(policy: ReleasePolicy, epsilon: float, delta: float) -> tuple[float, float]:
    """The (ε, δ) a learner runs at for a release charged (``epsilon``, ``delta``): group privacy
    where one unit changes several of its examples (:func:`release_steps`).

    >>> user = ReleasePolicy("s", None, (), privacy_unit="user", user_contribution_bound=2, expected_size=5)
    >>> learner_privacy(user, 1.0, 0.0)
    (0.5, 0.0)
    """
    required = required_guarantee(policy, epsilon, delta)
    return required.epsilon, required.delta


def largest_input(policy: ReleasePolicy, level: int | None = None) -> int:
    """The most examples a learner of a node of ``level`` (default: the top level) can read: a count
    node's public n, else the input cap (a ``ValueError`` where n is private and nothing caps it)."""
    if policy.expected_size is None:
        return node_sample_size(policy, policy.top_level if level is None else level)
    if policy.max_node_examples is None:
        raise ValueError(
            f"stream {policy.stream_id}: no input cap bounds the learner's run time (max_node_examples is "
            "null and n is private); set publish_delay_seconds"
        )
    return policy.max_node_examples
