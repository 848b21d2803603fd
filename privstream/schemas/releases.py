"""Public releases: a private hypothesis (or sanitized data) with its privacy certificate.

Everything on the public topics is one of these. The certificate states what a subscriber
needs to trust the release (DESIGN.md §4): the mechanism, (ε, δ), the neighbouring relation,
the privacy unit, the window, the sample size, the ledger entry, the budget left, the
parameters, the library version, and whether the paper's accuracy theorem holds at them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RELEASE_SCHEMA_VERSION = 1

NeighbouringRelation = Literal["replace-one", "add-remove-one"]
PrivacyUnit = Literal["example", "user"]


class WindowInfo(BaseModel):
    """Which examples a release was computed from."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    window_id: str = Field(description="deterministic id: replays reproduce it")
    kind: Literal["count", "time", "file"]
    start: int | datetime | None = Field(default=None, description="first offset index or start time")
    end: int | datetime | None = Field(default=None, description="last offset index (exclusive) or end time")


class Certificate(BaseModel):
    """The privacy certificate carried by every release."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    mechanism: str = Field(description="name of the DP algorithm that produced the release")
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, lt=1)
    neighbouring_relation: NeighbouringRelation
    privacy_unit: PrivacyUnit = "example"
    user_contribution_bound: int | None = Field(default=None, ge=1)
    window: WindowInfo | None = None
    sample_size: int | None = Field(
        default=None, ge=0, description="n; null under add-remove-one, where n itself is private"
    )
    ledger_entry_id: str | None = Field(default=None, description="the charge in the privacy ledger")
    composition: Literal["sequential"] = Field(
        default="sequential", description="how the stream's releases add up against its budget"
    )
    epsilon_budget_remaining: float | None = None
    delta_budget_remaining: float | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    proper: bool = Field(description="whether the hypothesis is a member of the class")
    accuracy_guarantee_holds: bool | None = Field(
        description="whether the sample size meets the learner's theorem for (alpha, beta); "
        "null when n is private (time windows): even this one bit would depend on it"
    )
    theorem_sample_size: int | None = Field(
        default=None, description="the n the accuracy theorem needs at these parameters"
    )
    randomness: Literal["secure", "seeded"] = Field(
        description="'seeded' means reproducible and NOT private: for experiments only"
    )
    library_version: str


class HypothesisRelease(BaseModel):
    """A private hypothesis released to the ``hypotheses`` topic (or printed by ``privstream learn``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = RELEASE_SCHEMA_VERSION
    stream_id: str
    hypothesis_class: str = Field(description="the class spec string, e.g. 'thresholds:65536'")
    hypothesis: dict[str, Any] = Field(description="canonical form: equal functions compare equal")
    certificate: Certificate
