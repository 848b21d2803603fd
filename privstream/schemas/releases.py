"""Public releases: a private hypothesis (or sanitized data) with its privacy certificate.

Everything on the public topics is one of these. The certificate states what a subscriber
needs to trust the release: the mechanism, (ε, δ), the neighbouring relation,
the privacy unit, whether privacy is information-theoretic or computational, the window, the
sample size, the ledger entry, the budget left, the parameters, the DP outputs, the library
version, and whether the paper's accuracy theorem holds at them.

No JSON number in a release exceeds 2^53 in magnitude (:mod:`privstream.schemas.numbers`):
larger values in ``parameters``, ``dp_outputs``, ``hypothesis`` and ``distribution`` are decimal
strings, and the theorem's sample size is a float (null beyond 2^53) with its log10.

Schema versions: 2 made ``theorem_sample_size`` a float with ``theorem_sample_size_log10`` and
added ``privacy`` and ``dp_outputs``; 3 names the tree's top level ``lifetime.top_level`` (a
release of version 2 states it as ``lifetime.levels``, which is read the same); 4 adds the
certificate's ``guarantee``: the release's guarantee as data (the algorithm's own (ε, δ) on its
rows and the group-privacy steps that carry it to the privacy unit).

>>> c = Certificate(mechanism="pcl", epsilon=1.0, delta=0.0, neighbouring_relation="replace-one",
...                 privacy="information-theoretic", proper=False, accuracy_guarantee_holds=None,
...                 theorem_sample_size=10**2400, randomness="secure", library_version="0")
>>> c.theorem_sample_size, c.theorem_sample_size_log10
(None, 2400.0)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, model_validator

from privstream.schemas.numbers import MAX_SAFE_INTEGER, JsonSafeDict, PublicMessage, theorem_size_fields

RELEASE_SCHEMA_VERSION = 4

NeighbouringRelation = Literal["replace-one", "add-remove-one"]
PrivacyUnit = Literal["example", "user"]
PrivacyKind = Literal["information-theoretic", "computational"]

_Offset = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]
_WITHIN_RANGE = "numbers beyond 2^53 in magnitude are written as decimal strings (privstream.schemas.numbers)"


class WindowInfo(PublicMessage):
    """Which examples a release was computed from: a window, or a node of the release tree.

    A node of level j covers the level-0 windows ``first_window..last_window`` (2^j of them);
    ``start``/``end`` are the node's whole sequence or time range.
    """

    window_id: str = Field(description="deterministic id (a node's, e.g. 't60-L3-5'): replays reproduce it")
    kind: Literal["count", "time", "file"]
    start: _Offset | datetime | None = Field(default=None, description="first offset index or start time")
    end: _Offset | datetime | None = Field(
        default=None, description="last offset index (exclusive) or end time"
    )
    first_window: int | None = Field(
        default=None,
        ge=-MAX_SAFE_INTEGER,
        le=MAX_SAFE_INTEGER,
        description="index of the first level-0 window covered (inclusive)",
    )
    last_window: int | None = Field(
        default=None,
        ge=-MAX_SAFE_INTEGER,
        le=MAX_SAFE_INTEGER,
        description="index of the last level-0 window covered (inclusive)",
    )


class LifetimeBound(PublicMessage):
    """What one example (or user) can lose to all of a stream's releases, for ever, and why."""

    epsilon: float = Field(ge=0, description="lifetime ε per example (per user at the user level)")
    delta: float = Field(ge=0, lt=1)
    epsilon_budget: float = Field(ge=0, description="the configured lifetime budget it stays within")
    delta_budget: float = Field(ge=0, lt=1)
    top_level: int = Field(
        ge=0,
        le=20,
        validation_alias=AliasChoices("top_level", "levels"),
        description="the tree's top level L (levels 0..L)",
    )
    level_epsilon: list[float] = Field(description="ε per level: the learner's plus the sanitizer's")
    quality_epsilon: float | None = Field(
        default=None,
        ge=0,
        exclude_if=lambda epsilon: epsilon is None,  # absent from a stream without estimates
        description="ε of each quality estimate scored on a window's examples (up to top_level + 1 per "
        "window, in epsilon); null: none",
    )
    rule: str = Field(description="the composition argument that gives the bound, in words")


class Publication(PublicMessage):
    """When a release is published, and the public bound on what its learner reads.

    Every time an observer can see (the record's timestamp, its arrival on the topic, a public
    page counting it) follows from ``scheduled_at``, a function of the configuration and the
    worker's clock only, never of how long the learner ran on the data.
    """

    scheduled_at: datetime = Field(
        description="the release's deadline: the end of its publication slot, publish_delay_seconds after "
        "its node closed on the worker's clock (its time window's end plus the allowed lateness, or when its "
        "count window's last example was taken in) or after the stream's previous slot; the Kafka record's "
        "timestamp; public pages show the release from then on"
    )
    publish_delay_seconds: float = Field(gt=0, description="the length of one publication slot")
    max_node_examples: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SAFE_INTEGER,
        description="the input cap: the learner reads at most this many examples (null: uncapped)",
    )
    rule: str = Field(description="what is published at scheduled_at, in words")


class GuaranteeStep(PublicMessage):
    """One group-privacy step of a guarantee's derivation: one change of the unit is ``k`` changes
    of the rows before it, so (ε, δ) becomes (kε, k·e^{(k-1)ε}·δ)."""

    step: Literal["group-privacy", "cap-replacement"] = Field(
        description="'group-privacy': one user changes up to k rows (the contribution bound); "
        "'cap-replacement': inside a capped node whose n is private an addition can push another "
        "example out of the kept set, a replacement (k = 2)"
    )
    k: int = Field(ge=1, le=MAX_SAFE_INTEGER)


class ReleaseGuarantee(PublicMessage):
    """The release's guarantee as data: what its algorithm spent on the rows it read, and the steps
    that carry it to one change of the privacy unit; within the certificate's charged (ε, δ)."""

    epsilon: float = Field(ge=0, description="ε for one change of the privacy unit")
    delta: float = Field(ge=0, lt=1)
    neighbouring_relation: NeighbouringRelation
    unit: Literal["row", "example", "user"] = Field(description="what one neighbouring change changes")
    algorithm_epsilon: float = Field(ge=0, description="the algorithm's own ε on the rows it read")
    algorithm_delta: float = Field(ge=0, lt=1)
    derivation: list[GuaranteeStep] = Field(
        default_factory=list, description="the steps from the algorithm's guarantee to this one, in order"
    )


class Certificate(PublicMessage):
    """The privacy certificate carried by every release."""

    mechanism: str = Field(description="name of the DP algorithm that produced the release")
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, lt=1)
    neighbouring_relation: NeighbouringRelation
    privacy_unit: PrivacyUnit = "example"
    guarantee: ReleaseGuarantee | None = Field(
        default=None,
        description="the guarantee as data, checked against the charge before the release was published",
    )
    privacy: PrivacyKind = Field(
        description="'information-theoretic': (epsilon, delta) hold against any adversary, given ideal "
        "randomness; 'computational': they also rest on a cryptographic assumption (e.g. a keyed PRF "
        "expanding a secret key into the noise), so they hold against efficient adversaries only"
    )
    user_contribution_bound: int | None = Field(default=None, ge=1, le=MAX_SAFE_INTEGER)
    window: WindowInfo | None = None
    sample_size: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="n; null under add-remove-one, where n itself is private",
    )
    ledger_entry_id: str | None = Field(default=None, description="the charge in the privacy ledger")
    ledger_id: str | None = Field(
        default=None,
        max_length=64,
        description="the privacy ledger that charged the release: random, drawn once when the ledger "
        "was created (a release of another ledger id comes from another ledger)",
    )
    ledger_epoch: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="the ledger's epoch when the release was charged: raised at every worker start "
        "(an older copy of the ledger, restored from a backup, states a lower one)",
    )
    composition: Literal["sequential", "tree", "individual-filter"] = Field(
        default="sequential",
        description="how the stream's releases add up against its budget: "
        "'tree': parallel over the disjoint nodes of a level, sequential over the levels; "
        "'individual-filter': per user, only the releases that include them (see lifetime.rule)",
    )
    level: int | None = Field(
        default=None, ge=0, le=20, description="the release tree's level of this release (0: one window)"
    )
    lifetime: LifetimeBound | None = Field(
        default=None, description="the per-example (or per-user) lifetime bound and its composition rule"
    )
    publication: Publication | None = Field(
        default=None, description="the release's deadline and input cap (null: published when computed)"
    )
    epsilon_budget_remaining: float | None = None
    delta_budget_remaining: float | None = None
    parameters: JsonSafeDict = Field(
        default_factory=dict,
        description="the algorithm's configuration (functions of public configuration, and of n only "
        f"where n is public); {_WITHIN_RANGE}",
    )
    dp_outputs: JsonSafeDict = Field(
        default_factory=dict,
        description="values computed by the release's DP mechanisms (noisy counts, selected queries): "
        f"post-processing, safe to publish; their keys depend on the configuration only; {_WITHIN_RANGE}",
    )
    proper: bool = Field(description="whether the hypothesis is a member of the class")
    accuracy_guarantee_holds: bool | None = Field(
        description="whether the sample size meets the learner's theorem for (alpha, beta); "
        "null when n is private (time windows, user level): even this one bit would depend on it; "
        "null too where n is public but the theorem counts a private figure (how many rows are "
        "labelled) or gives no finite sample size"
    )
    theorem_sample_size: float | None = Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="the n the accuracy theorem needs at these parameters, exact when at most 2^53; "
        "null when there is no such n or it exceeds 2^53 (then read theorem_sample_size_log10)",
    )
    theorem_sample_size_log10: float | None = Field(
        default=None, description="log10 of the theorem's n (3 decimals); null when there is no such n"
    )
    randomness: Literal["secure", "seeded"] = Field(
        description="'seeded' means reproducible and NOT private: for experiments only"
    )
    library_version: str

    @model_validator(mode="before")
    @classmethod
    def _theorem_size(cls, data: Any) -> Any:
        """A learner's exact (possibly astronomical) int becomes the float-or-null and its log10."""
        if isinstance(data, dict) and "theorem_sample_size_log10" not in data:
            size = data.get("theorem_sample_size")
            if isinstance(size, int | float) and not isinstance(size, bool):
                value, log10 = theorem_size_fields(size)
                data = {**data, "theorem_sample_size": value, "theorem_sample_size_log10": log10}
        return data


class ErrorEstimate(PublicMessage):
    """The DP outputs of a quality estimate: the error count's noisy value (and the size's, where it
    is private), and what follows from them by post-processing."""

    error: float = Field(ge=0, le=1, description="the estimated error rate, clipped to [0, 1]")
    low: float = Field(ge=0, le=1, description="the interval's lower end")
    high: float = Field(ge=0, le=1, description="the interval's upper end")
    noisy_errors: int = Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER, description="the noisy error count")
    noisy_size: int | None = Field(
        default=None,
        ge=-MAX_SAFE_INTEGER,
        le=MAX_SAFE_INTEGER,
        description="the noisy number of examples scored where it is private (null: size is public)",
    )


class ReleaseEvaluation(PublicMessage):
    """A private estimate of an earlier hypothesis release's error, scored on the examples of the
    window this release was computed from (examples the scored release never saw)."""

    release: str = Field(description="the ledger_entry_id of the release scored")
    level: int = Field(ge=0, le=20, description="the scored release's level in the release tree")
    window_id: str = Field(description="the window whose examples it was scored on")
    ledger_entry_id: str = Field(description="the estimate's own charge in the privacy ledger")
    epsilon: float = Field(gt=0, description="ε of the estimate, spent on the scored window's examples")
    delta: float = Field(default=0.0, ge=0, lt=1)
    neighbouring_relation: NeighbouringRelation
    confidence: float = Field(gt=0, lt=1, description="the probability the interval holds the true error")
    size: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="the examples scored where public (count windows)",
    )
    estimate: ErrorEstimate
    rule: str = Field(description="what the interval states, in words")


class HypothesisRelease(PublicMessage):
    """A private hypothesis released to the ``hypotheses`` topic (or printed by ``privstream learn``)."""

    schema_version: int = RELEASE_SCHEMA_VERSION
    stream_id: str
    hypothesis_class: str = Field(description="the class spec string, e.g. 'thresholds:65536'")
    hypothesis: JsonSafeDict = Field(
        description=f"canonical form: equal functions compare equal; {_WITHIN_RANGE}"
    )
    certificate: Certificate
    evaluations: list[ReleaseEvaluation] = Field(
        default_factory=list,
        exclude_if=lambda evaluations: not evaluations,  # absent from a release that carries none
        description="private estimates of the error of the releases that ended just before this "
        "release's window, scored on its examples (streams with quality_epsilon; else empty)",
    )
