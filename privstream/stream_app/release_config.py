"""A stream's private releases as configured: the windows that group its examples, the learner and
the sanitizer with their parameters, and the privacy parameters. The rule: a configuration that
loads is one the worker can run within its lifetime budget; the algorithms' parameters are
checked by name and range, and the algorithms built with them, before anything is created.

>>> ReleaseConfig(epsilon_budget=1.0, top_level=1).learner_epsilons
[0.5, 0.5]
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from privstream.learning.errors import InvariantError
from privstream.learning.parameters import ACCURACY_TARGETS, check_registered
from privstream.learning.private_learners.base import LEARNERS
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS
from privstream.learning.sanitizers.base import SANITIZERS
from privstream.stream_app.suggestions import unknown_name

log = logging.getLogger(__name__)


class WindowConfig(BaseModel):
    """How examples are grouped for private releases.

    ``count`` windows (the default) hold ``size`` consecutive examples of the stream: n is public
    and neighbouring windows differ by replacing one example. ``time`` windows hold the examples
    whose event time falls in ``[k*seconds, (k+1)*seconds)``; their size is private (add/remove-one).

    Time windows close on the worker's clock, never on the data: window k closes when the clock
    passes ``(k+1)*seconds + allowed_lateness_seconds``, whether or not it holds examples, and every
    window from the stream's start on is closed, charged and released. An ``event_time`` further
    than ``max_event_time_skew_seconds`` from the worker's clock (either way) is dead-lettered
    (``event_time_out_of_range``) before it touches a window, so no example can move the schedule.

    Every release (count and time windows) is published at a deadline: the end of its slot of
    ``publish_delay_seconds`` on the stream's learner, which starts when its node closes or when the
    stream's previous slot ends. At the deadline the learner's output goes out if its fit finished,
    otherwise a data-independent default charged the same. Unset, the slot is derived at start-up
    from the learner's run time on public inputs of the input cap's size (``privstream plan
    --node-size`` shows the same advice).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["count", "time"] = "count"
    size: int = Field(default=2000, ge=1, le=10_000_000, description="examples per count window")
    seconds: float | None = Field(default=None, gt=0, description="length of a time window")
    allowed_lateness_seconds: float = Field(default=0.0, ge=0)
    max_event_time_skew_seconds: float = Field(
        default=300.0,
        gt=0,
        description="time windows: an event_time further than this from the worker's "
        "clock (future or past) is dead-lettered as event_time_out_of_range (public)",
    )
    publish_delay_seconds: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="the publication slot: a release is published this long after its node closes (or "
        "after the stream's previous slot), with its learner's output if the fit finished, else a "
        "data-independent default charged the same. Unset: derived at start-up from the learner's run "
        "time on public inputs of max_node_examples examples",
    )

    @model_validator(mode="after")
    def _time_needs_length(self) -> WindowConfig:
        if self.kind == "time" and self.seconds is None:
            raise ValueError("a time window needs 'seconds'")
        return self


class ReleaseConfig(BaseModel):
    """A stream's private releases: the window, the learner, and the privacy parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    learner: str = Field(default="generic", description="private learner, e.g. 'generic'")
    learner_params: dict[str, Any] = Field(default_factory=dict, description="e.g. alpha, beta")
    sanitizer: str | None = Field(
        default=None,
        description="also release a sanitizer: 'hierarchical' (the most accurate for "
        "thresholds, intervals and points), 'mwem' (also class files) or 'fooling'",
    )
    sanitizer_params: dict[str, Any] = Field(default_factory=dict)
    sanitizer_epsilon: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="ε of each sanitizer release, at every level (default: "
        "the sanitizer's even share of the lifetime budget)",
    )
    sanitizer_level_epsilon: list[float] | None = Field(
        default=None, description="ε of the sanitizer per level 0..top_level (instead of sanitizer_epsilon)"
    )
    sanitizer_delta: float | None = Field(default=None, ge=0, lt=1, description="default: delta")
    sanitizer_labelled: bool = Field(default=False, description="answer Pr[h(x) = y] instead of Pr[h(x) = 1]")
    window: WindowConfig = Field(default_factory=WindowConfig)
    top_level: int = Field(
        default=0,
        ge=0,
        le=20,
        description="the release tree's top level L: releases at levels 0..L (L + 1 levels), a level-j "
        "release learning from 2^j consecutive windows; every example is in one node per level. "
        "0: windows only",
    )
    epsilon: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="ε of each learner release, at every level (default: the "
        "lifetime budget, minus the sanitizer's share, split evenly over the levels)",
    )
    level_epsilon: list[float] | None = Field(
        default=None, description="ε of the learner per level 0..top_level (instead of epsilon)"
    )
    delta: float = Field(default=0.0, ge=0, lt=1, description="δ of each release, at every level")
    epsilon_budget: float = Field(
        gt=0,
        description="lifetime ε per example (per user at the user level): the sum over the levels of "
        "the ε of the releases an example is in (parallel composition within a level)",
    )
    delta_budget: float = Field(default=0.0, ge=0, lt=1, description="lifetime δ, as epsilon_budget")
    privacy_unit: Literal["example", "user"] = "example"
    user_contribution_bound: int | None = Field(
        default=None, ge=1, description="with privacy_unit=user: examples kept per user and window"
    )
    on_budget_exhausted: Literal["stop"] = Field(
        default="stop", description="stop releasing (the online SOA keeps serving)"
    )
    expected_size: int | None = Field(
        default=None,
        ge=1,
        le=2**53,
        description="where a window's size n is private (time windows, privacy_unit 'user'): the number "
        "of examples you expect per window. The algorithms derive every published parameter from it "
        "instead of n, and their guarantee holds under add/remove-one neighbours whatever the actual n. "
        "Required there; not allowed with count windows at the example level, where n is public",
    )

    quality_epsilon: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="a private measure of each hypothesis release's quality: each release is scored on "
        "the next window's examples, an ε-DP error count with a confidence interval published with "
        "that window's release, charged to those examples (up to top_level + 1 estimates per window: "
        "one per level whose node ends just before it). null: no estimates",
    )

    max_node_examples: int | None = Field(
        default=100_000,
        ge=1,
        le=2**53,
        description="the input cap: the examples a learner reads of a node of the release tree (a "
        "uniformly random subset of a histogram node, the first ones by arrival of user rows and feature "
        "vectors; stated in the certificate), so its run time has a public bound. Where n is private a "
        "capped node's learner runs at half the level's ε (an addition can become a replacement inside "
        "the kept set). null: read every example (no public run-time bound: then set "
        "publish_delay_seconds where n is private)",
    )

    @model_validator(mode="before")
    @classmethod
    def _levels_renamed(cls, data: Any) -> Any:
        # ``levels`` read as a count of levels, but it is the top level (levels 0..L): renamed.
        if isinstance(data, dict) and "levels" in data:
            if "top_level" in data:
                raise ValueError("levels is the old name of top_level: give top_level only")
            data = dict(data)
            data["top_level"] = data.pop("levels")
            log.warning(
                "release setting 'levels' is deprecated: write top_level = %s (the top level of the "
                "release tree: releases at levels 0..%s)",
                data["top_level"],
                data["top_level"],
            )
        return data

    @field_validator("learner")
    @classmethod
    def _known_learner(cls, name: str) -> str:
        if name not in LEARNERS and name not in VECTOR_LEARNERS:
            raise ValueError(unknown_name("learner", name, [*LEARNERS, *VECTOR_LEARNERS]))
        return name

    @field_validator("sanitizer")
    @classmethod
    def _known_sanitizer(cls, name: str | None) -> str | None:
        if name is not None and name not in SANITIZERS:
            raise ValueError(unknown_name("sanitizer", name, SANITIZERS))
        return name

    @field_validator("learner_params")
    @classmethod
    def _learner_takes(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # The names and ranges the learner declares, checked by name before it is built.
        learner = info.data.get("learner")
        if not isinstance(learner, str):  # refused by its own validator
            return params
        if learner in VECTOR_LEARNERS:
            check_registered("vector-learner", learner, params)
        else:
            check_registered("learner", learner, params, extra=ACCURACY_TARGETS)
        return params

    @field_validator("sanitizer_params")
    @classmethod
    def _sanitizer_takes(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        sanitizer = info.data.get("sanitizer")
        if isinstance(sanitizer, str):
            check_registered("sanitizer", sanitizer, params)
        elif params and "sanitizer" in info.data:  # no sanitizer (not a refused one): they would be ignored
            raise ValueError(
                "sanitizer_params without a sanitizer: set sanitizer, or remove sanitizer_params"
            )
        return params

    @model_validator(mode="after")
    def _algorithms_build(self) -> ReleaseConfig:
        # The learner and the sanitizer are built with their parameters as the worker builds them,
        # so a parameter they refuse stops the settings, in one line, before anything starts.
        from privstream.learning.private_learners import make_learner
        from privstream.learning.private_learners.vector_base import make_vector_learner
        from privstream.learning.sanitizers import make_sanitizer

        params = dict(self.learner_params)
        try:
            if self.learner in VECTOR_LEARNERS:
                make_vector_learner(self.learner, **params)
            else:
                for target in ("alpha", "beta"):  # the accuracy targets the release agent reads
                    value = params.pop(target, 0.25)
                    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                        raise ValueError(f"{target} must be a number in (0, 1), got {value!r}")
                make_learner(self.learner, **params)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"learner_params {_given(self.learner_params)} of {self.learner!r}: {exc}"
            ) from None
        if self.sanitizer is not None:
            try:
                make_sanitizer(self.sanitizer, **self.sanitizer_params)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"sanitizer_params {_given(self.sanitizer_params)} of {self.sanitizer!r}: {exc}"
                ) from None
        return self

    @model_validator(mode="after")
    def _consistent(self) -> ReleaseConfig:
        if self.privacy_unit == "user" and self.user_contribution_bound is None:
            raise ValueError("privacy_unit 'user' needs user_contribution_bound")
        if self.privacy_unit == "example" and self.user_contribution_bound is not None:
            raise ValueError("user_contribution_bound applies only to privacy_unit 'user'")
        if self.n_private and self.expected_size is None:
            raise ValueError(
                "expected_size is required when a window's size is private (time windows or privacy_unit "
                "'user'): set it to the number of examples you expect per window; the algorithms use it "
                "instead of the private n for every parameter they publish"
            )
        if not self.n_private and self.expected_size is not None:
            raise ValueError(
                "expected_size applies only where a window's size is private (time windows or "
                "privacy_unit 'user'); count windows at the example level publish n"
            )
        if self.n_private and self.max_node_examples is None and self.window.publish_delay_seconds is None:
            raise ValueError(
                "max_node_examples is null and a window's size is private: nothing bounds the learner's run "
                "time, so the publication slot cannot be derived; set window.publish_delay_seconds"
            )
        if self.privacy_unit == "user" and self.window.kind == "count":
            # A count window at the user level is cut by a private count: how many examples the
            # users sent decides where the windows end. The public clock cuts instead.
            raise ValueError(
                "privacy_unit 'user' needs time windows (window kind 'time'): count windows would be cut "
                "by the number of examples users send, which is private at the user level"
            )
        for name in ("level_epsilon", "sanitizer_level_epsilon"):
            values = getattr(self, name)
            if values is not None and (len(values) != self.top_level + 1 or min(values) <= 0):
                raise ValueError(
                    f"{name} needs {self.top_level + 1} positive values (levels 0..{self.top_level}), "
                    f"got {values}"
                )
        if self.quality_epsilon is not None and self.privacy_unit == "user":
            # A user's rows can lie in the scored window several times over (up to the bound), and
            # the individual filter charges users, not windows: not supported.
            raise ValueError(
                "quality_epsilon applies only to privacy_unit 'example' (a user's examples can all "
                "lie in the window a release is scored on)"
            )
        if self.level_epsilon is not None and self.epsilon is not None:
            raise ValueError("give epsilon (every level) or level_epsilon (per level), not both")
        if self.sanitizer_level_epsilon is not None and self.sanitizer_epsilon is not None:
            raise ValueError("give sanitizer_epsilon or sanitizer_level_epsilon, not both")
        if self.sanitizer is None and (self.sanitizer_level_epsilon or self.sanitizer_epsilon):
            raise ValueError("sanitizer_epsilon is set but no sanitizer is")
        epsilon, delta = self.lifetime_cost
        if min(self.learner_epsilons) <= 0 or (self.sanitizer and min(self.sanitizer_epsilons) <= 0):
            raise ValueError(
                f"the sanitizer's ε leaves no budget for the learner (epsilon_budget "
                f"{self.epsilon_budget}, sanitizer per level {self.sanitizer_epsilons})"
            )
        if epsilon > self.epsilon_budget * (1 + 1e-9):
            raise ValueError(
                f"the releases cost ε={epsilon:g} per example over the {self.top_level + 1} levels (learner "
                f"{self.learner_epsilons}, sanitizer {self.sanitizer_epsilons}"
                + (f", quality estimates {self.quality_epsilons}" if self.quality_epsilons else "")
                + "), more than the lifetime "
                f"epsilon_budget {self.epsilon_budget:g}: lower epsilon or top_level, or raise the budget"
            )
        if delta > self.delta_budget * (1 + 1e-9):
            raise ValueError(
                f"the releases cost δ={delta:g} per example over the {self.top_level + 1} levels, "
                f"more than the lifetime delta_budget {self.delta_budget:g}"
            )
        return self

    @property
    def sanitizer_epsilons(self) -> list[float]:
        """The sanitizer's ε per level (empty without a sanitizer)."""
        if self.sanitizer is None:
            return []
        if self.sanitizer_level_epsilon is not None:
            return list(self.sanitizer_level_epsilon)
        if self.sanitizer_epsilon is not None:
            return [self.sanitizer_epsilon] * (self.top_level + 1)
        if self.epsilon is not None or self.level_epsilon is not None:
            return list(self._learner_epsilons_given())  # the learner's ε, level by level
        return [self.epsilon_budget / (2 * (self.top_level + 1))] * (self.top_level + 1)

    def _learner_epsilons_given(self) -> list[float]:
        if self.level_epsilon is not None:
            return list(self.level_epsilon)
        if self.epsilon is None:
            raise InvariantError("invariant broken: the learner's ε is given (epsilon or level_epsilon)")
        return [self.epsilon] * (self.top_level + 1)

    @property
    def learner_epsilons(self) -> list[float]:
        """The learner's ε per level 0..top_level: as given, or the lifetime budget left by the sanitizer
        and the quality estimates split evenly over the levels."""
        if self.level_epsilon is not None or self.epsilon is not None:
            return self._learner_epsilons_given()
        rest = self.epsilon_budget - sum(self.sanitizer_epsilons) - sum(self.quality_epsilons)
        return [rest / (self.top_level + 1)] * (self.top_level + 1)

    @property
    def learner_deltas(self) -> list[float]:
        return [self.delta] * (self.top_level + 1)

    @property
    def sanitizer_deltas(self) -> list[float]:
        if self.sanitizer is None:
            return []
        delta = self.sanitizer_delta if self.sanitizer_delta is not None else self.delta
        return [delta] * (self.top_level + 1)

    @property
    def quality_epsilons(self) -> list[float]:
        """The quality estimates' ε an example can pay (empty without them): a window is scored once
        for each level whose node ends just before it, ``top_level + 1`` times at most.

        >>> ReleaseConfig(epsilon_budget=2.0, epsilon=0.5, top_level=1, quality_epsilon=0.1).quality_epsilons
        [0.1, 0.1]
        """
        if self.quality_epsilon is None:
            return []
        return [self.quality_epsilon] * (self.top_level + 1)

    @property
    def lifetime_cost(self) -> tuple[float, float]:
        """(ε, δ) per example (or user) for ever: one node per level, the learner's and the
        sanitizer's, and the quality estimates its window pays for (:attr:`quality_epsilons`).

        Parallel composition over the disjoint nodes of a level, sequential over the levels."""
        return (
            sum(self.learner_epsilons) + sum(self.sanitizer_epsilons) + sum(self.quality_epsilons),
            sum(self.learner_deltas) + sum(self.sanitizer_deltas),
        )

    @property
    def n_private(self) -> bool:
        """Whether a window's size is private: time windows, or user-level bounding (then the
        number of examples kept depends on how much each user sent)."""
        return self.window.kind == "time" or self.privacy_unit == "user"

    @property
    def node_sizes(self) -> list[int]:
        """The public size a learner works with at each level 0..top_level: a count node's n
        (``window.size·2^j``), or where n is private the expected size (``expected_size·2^j``), at
        most the input cap."""
        base = self.expected_size if self.n_private else self.window.size
        if base is None:  # n private: expected_size is required (checked at validation)
            raise InvariantError("invariant broken: a window of private size has expected_size")
        cap = self.max_node_examples
        return [min(base << j, cap) if cap is not None else base << j for j in range(self.top_level + 1)]

    @property
    def window_cost(self) -> tuple[float, float]:
        """(ε, δ) charged per level-0 window: the learner's plus the sanitizer's, if any."""
        san_e = self.sanitizer_epsilons[0] if self.sanitizer else 0.0
        san_d = self.sanitizer_deltas[0] if self.sanitizer else 0.0
        return self.learner_epsilons[0] + san_e, self.delta + san_d


def _given(params: dict[str, Any]) -> str:
    """Parameters as a config file writes them.

    >>> _given({"alpha": 0.1, "rounds": 3})
    '{alpha = 0.1, rounds = 3}'
    """
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in params.items()) + "}"
