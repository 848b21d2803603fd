"""Service settings: environment (``PRIVSTREAM_*``), an optional TOML/JSON file, and defaults.

Priority, highest first: keyword arguments (the CLI), environment variables, the config file
(``PRIVSTREAM_CONFIG_FILE`` or ``config_file=``), defaults. Nested values such as ``streams``
are JSON in the environment::

    PRIVSTREAM_KAFKA_BOOTSTRAP=127.0.0.1:9092
    PRIVSTREAM_STREAMS='[{"name": "clicks", "hypothesis_class": "thresholds:65536"}]'

>>> s = Settings(streams=[{"name": "a", "hypothesis_class": "thresholds:16"}], _env_file=None)
>>> s.topic("examples")
'examples'
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from privstream_client.tabular import TabularEncoder
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from privstream.learning.hypothesis_classes import Intervals, Points, Thresholds, parse_class_spec
from privstream.learning.online import (
    DEFAULT_ONLINE_LEARNER,
    OnlineInputError,
    check_online_parameters,
    make_stream_learner,
)
from privstream.learning.online.multiclass import MAX_CLASSES
from privstream.learning.parameters import ACCURACY_TARGETS, check_registered
from privstream.learning.private_learners.base import LEARNERS
from privstream.learning.private_learners.one_vs_rest import BASE_LEARNER as MULTICLASS_BASE
from privstream.learning.private_learners.one_vs_rest import share
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, check_bounds
from privstream.learning.private_learners.vector_base import configuration_error as vector_configuration_error
from privstream.learning.sanitizers.base import SANITIZERS
from privstream.stream_app.nesting import NestingError, check_text_depth, check_value_depth
from privstream.stream_app.suggestions import unknown_name
from privstream.stream_app.tabular import ColumnConfig, column_encoder, derive_vector_fields

log = logging.getLogger(__name__)

ENV_PREFIX = "PRIVSTREAM_"
CONFIG_FILE_ENV = f"{ENV_PREFIX}CONFIG_FILE"
#: faust reads its own settings from the environment under this prefix only (an expert escape
#: hatch, e.g. PRIVSTREAM_FAUST_STREAM_BUFFER_MAXSIZE); unprefixed WEB_PORT and friends are ignored.
FAUST_ENV_PREFIX = f"{ENV_PREFIX}FAUST_"

SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
#: URL schemes of ``store_url``: SQLite files on one host, or a PostgreSQL database.
STORE_SCHEMES = ("sqlite", "postgresql", "postgres")

#: The operator token's minimum length (``openssl rand -hex 32`` makes 64 characters).
MIN_TOKEN_LENGTH = 16

#: The logical topics of the service; their Kafka names are ``topic_prefix + name``.
TOPIC_NAMES = ("examples", "examples.dlq", "predictions", "hypotheses", "sanitized")


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
        assert self.epsilon is not None
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
        assert base is not None  # n private: expected_size is required (checked above)
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


class StreamConfig(BaseModel):
    """One named learning task: its hypothesis class (or feature vectors), its online learner (the
    SOA, or a vector learner), and its private releases."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    hypothesis_class: str | None = Field(
        default=None, description="class spec, e.g. 'thresholds:65536', or a .npy/.csv path"
    )
    features: int | None = Field(
        default=None, ge=1, le=10_000, description="instead of a class: examples are vectors of this length"
    )
    classes: int = Field(
        default=2,
        ge=2,
        le=MAX_CLASSES,
        description="feature vectors: the number of classes K; labels are 0..K-1 (2: 0/1, also read "
        "from -1/+1 and booleans). With K > 2 the online learner is the multi-class Perceptron",
    )
    feature_bounds: list[tuple[float, float]] | None = Field(
        default=None, description="public [lo, hi] per feature (never taken from the data)"
    )
    feature_names: list[str] | None = Field(
        default=None,
        description="feature vectors: a name per feature (pages, CSV columns); default x1, x2, ...",
    )
    columns: list[ColumnConfig] | None = Field(
        default=None,
        min_length=1,
        max_length=1_000,
        description="a tabular stream: its public columns (numeric with bounds, categorical with "
        "categories); examples are rows by column name, encoded by the service into the feature vector "
        "(features, feature_bounds and feature_names follow from them)",
    )
    soa_tie: Literal[0, 1] = Field(default=1, description="the SOA's prediction when both labels tie")
    dedup_horizon_seconds: float = Field(
        default=600.0,
        ge=0,
        le=86_400,
        description="an example whose id was seen on the stream less than this long ago is dropped as "
        "a repeat, before the SOA and the windows (at most 100,000 ids remembered); 0: no de-duplication",
    )
    online_learner: str = Field(
        default=DEFAULT_ONLINE_LEARNER,
        description="feature vectors: the online learner, 'auto' (block-vote: the weighted vote of six "
        "experts stepping once per block, keeping the margin test), 'perceptron' (at most (R/γ)² "
        "mistakes on a stream separable with margin γ), 'averaged-perceptron', 'second-order-perceptron' "
        "(both keep the margin test), 'logistic', 'scaled-logistic', 'scaled-passive-aggressive', "
        "'weighted-majority' or 'block-vote'",
    )
    online_params: dict[str, Any] = Field(
        default_factory=dict,
        description='feature vectors: the online learner\'s parameters, e.g. {"margin": 0.1} (the '
        'Perceptrons) or {"learning_rate": 0.5} (logistic)',
    )
    partition_by: Literal["stream", "example", "user"] = Field(
        default="stream",
        description="how producers key the stream's examples: 'stream' (its name: one partition, one "
        "worker), 'example' (each example's id) or 'user' (its user_id: a user stays on one partition); "
        "spread over partitions, each partition has an online learner of its own and time windows "
        "gather every partition's examples",
    )
    release: ReleaseConfig | None = Field(default=None, description="private releases; none if unset")

    @model_validator(mode="before")
    @classmethod
    def _columns_make_features(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("columns") is not None and data.get("hypothesis_class"):
            raise ValueError("columns are for streams of feature vectors, not a hypothesis_class")
        return derive_vector_fields(data)

    @field_validator("columns")
    @classmethod
    def _columns_distinct(cls, columns: list[ColumnConfig] | None) -> list[ColumnConfig] | None:
        if columns is not None:
            column_encoder(columns)  # names and feature names distinct
        return columns

    @field_validator("online_params")
    @classmethod
    def _online_takes(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        learner = info.data.get("online_learner")
        binary = info.data.get("classes") == 2  # else make_stream_learner checks them, below
        if isinstance(learner, str) and info.data.get("features") is not None and binary:
            check_online_parameters(learner, params)
        return params

    @field_validator("hypothesis_class")
    @classmethod
    def _class_parses(cls, spec: str | None) -> str | None:
        if spec is not None:
            parse_class_spec(spec)  # raises a clear error for a bad spec or an unreadable file
        return spec

    @model_validator(mode="after")
    def _one_kind(self) -> StreamConfig:
        if (self.hypothesis_class is None) == (self.features is None):
            raise ValueError("a stream has either a hypothesis_class or features (vectors), not both")
        if self.features is None and (
            self.feature_names is not None
            or self.online_params
            or self.online_learner != DEFAULT_ONLINE_LEARNER
            or self.classes != 2
        ):
            raise ValueError(
                "feature_names, classes, online_learner and online_params are for streams of feature "
                "vectors (a class stream's labels are 0/1 and its online learner is the SOA)"
            )
        if self.features is not None:
            check_bounds(self.feature_bounds, self.features)
            if self.feature_names is not None and (
                len(self.feature_names) != self.features or len(set(self.feature_names)) != self.features
            ):
                raise ValueError(f"feature_names needs {self.features} distinct names, one per feature")
            try:  # the learner, its parameters and the bounds, checked once here
                make_stream_learner(
                    self.online_learner, self.feature_bounds, self.classes, **self.online_params
                )
            except OnlineInputError as exc:
                raise ValueError(str(exc)) from None
            if self.release is not None and self.classes != 2 and self.release.learner != MULTICLASS_BASE:
                raise ValueError(
                    f"release.learner: {self.release.learner!r} releases a 0/1 rule without class "
                    f"scores; a stream of {self.classes} classes releases with {MULTICLASS_BASE!r} "
                    f"(one vs the rest per class, ε/{self.classes} each)"
                )
            if self.release is not None:
                learner = self.release.learner
                if learner not in VECTOR_LEARNERS:
                    known = ", ".join(sorted(VECTOR_LEARNERS))
                    raise ValueError(f"feature vectors need a vector learner ({known}), not {learner!r}")
                if self.release.sanitizer is not None:
                    raise ValueError("sanitizers answer a hypothesis class's queries, not feature vectors")
                reason = vector_configuration_error(
                    learner,
                    dict(self.release.learner_params),
                    features=self.features,
                    sizes=self.release.node_sizes,
                    # each class's fit runs at its share of δ
                    delta=share(self.release.delta, self.classes) if self.release.delta else 0.0,
                )
                if reason is not None:  # a learner that cannot run here is refused before it starts
                    raise ValueError(f"release.learner: {reason}")
        elif (
            self.release is not None
            and self.release.sanitizer == "hierarchical"
            and not isinstance(parse_class_spec(self.hypothesis_class or ""), Thresholds | Intervals | Points)
        ):
            raise ValueError(
                f"the hierarchical sanitizer answers thresholds, intervals and points, not the "
                f"class {self.hypothesis_class!r}; use sanitizer 'mwem'"
            )
        elif self.release is not None and self.release.learner in VECTOR_LEARNERS:
            raise ValueError(f"learner {self.release.learner!r} needs feature vectors (set features)")
        if self.partitioned and self.release is not None and self.release.window.kind == "count":
            # Across partitions a count window would be cut by the order in which workers store
            # their examples, a race no public rule fixes yet; the clock cuts time windows.
            raise ValueError(
                f"partition_by {self.partition_by!r} needs time windows (window kind 'time'): count "
                "windows are cut in one partition's order ('stream')"
            )
        return self

    @property
    def partitioned(self) -> bool:
        """Whether the stream's examples are spread over the topic's partitions."""
        return self.partition_by != "stream"

    @property
    def kind(self) -> str:
        """``"class"`` (integer points of a hypothesis class) or ``"vector"`` (feature vectors)."""
        return "class" if self.hypothesis_class is not None else "vector"

    @property
    def encoder(self) -> TabularEncoder | None:
        """A tabular stream's row encoder (its ``columns``); None for other streams."""
        return None if self.columns is None else column_encoder(self.columns)

    @property
    def feature_labels(self) -> list[str]:
        """The features' names: ``feature_names``, or ``x1, x2, ...`` (empty for a class stream)."""
        return list(self.feature_names or [f"x{t + 1}" for t in range(self.features or 0)])


class Settings(BaseSettings):
    """Everything the service reads from its environment; validated on construction."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
    )

    config_file: Path | None = Field(default=None, description="TOML or JSON file with these settings")

    # --- identity and Kafka -------------------------------------------------------------------
    app_id: str = Field(default="privstream", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    kafka_bootstrap: str | None = Field(
        default=None,
        description="host:port[,host:port...] of Apache Kafka; unset: start the embedded broker",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    topic_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    topic_partitions: int = Field(default=4, ge=1, le=10_000)
    topic_replication_factor: int = Field(default=1, ge=1)
    kafka_session_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_heartbeat_interval_seconds: float = Field(default=3.0, gt=0)
    kafka_fetch_max_wait_ms: int = Field(
        default=50,
        ge=0,
        le=60_000,
        description="how long the ingest consumer's fetch may wait at the broker for new data; the "
        "embedded broker waits all of it (Kafka's default 500 ms put ~0.6 s into p50 latency)",
    )
    examples_log_replaced: Literal["auto", "rebase", "refuse"] = Field(
        default="auto",
        description="what a worker does with a partition of the examples topic whose offsets went back "
        "(its log ends below what the state store holds, or holds another record where one was read: "
        "the broker restarted without its data, or the topic was re-created): 'rebase' reads the new "
        "log as new examples after the old ones (logged and counted), 'refuse' stops the worker "
        "with one line; 'auto': rebase on the embedded broker (memory only), refuse on Kafka",
    )

    # --- web: two listeners, one per trust zone -----------------------------------------------
    public_host: str = Field(default="127.0.0.1", description="public listener: releases, budgets, pages")
    public_port: int = Field(default=6066, ge=1, le=65535)
    operator_host: str = Field(
        default="127.0.0.1", description="operator listener: /metrics, /status, probes (raw figures)"
    )
    operator_port: int = Field(default=9466, ge=1, le=65535)
    operator_token: SecretStr | None = Field(
        default=None,
        description="bearer token the operator listener demands (all but /healthz and /readyz); "
        "required when operator_host is not a loopback address",
    )
    stall_seconds: float = Field(
        default=60.0, gt=0, description="/healthz fails when received examples wait this long"
    )
    public_max_connections: int = Field(
        default=256, ge=1, le=100_000, description="open connections the public listener holds at most"
    )
    operator_max_connections: int = Field(
        default=64, ge=1, le=100_000, description="open connections the operator listener holds at most"
    )
    public_max_connections_per_client: int = Field(
        default=16,
        ge=1,
        le=100_000,
        description="open connections one client (IPv4 address, IPv6 /64) holds at most on the public "
        "listener; one more is answered 429",
    )
    operator_max_connections_per_client: int = Field(
        default=16, ge=1, le=100_000, description="the same for the operator listener"
    )
    listener_header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a new connection's first request head must arrive within this, or it is dropped",
    )
    listener_idle_timeout_seconds: float = Field(
        default=30.0, gt=0, description="a connection with no request in progress is closed after this"
    )
    public_cache_seconds: float = Field(
        default=1.0, ge=0, description="how long the public pages reuse a ledger read"
    )

    # --- signed releases (stream_app/signing.py) ------------------------------------------------
    signing_key: SecretStr | None = Field(
        default=None, description="the worker's Ed25519 private key (PEM) that signs every release"
    )
    signing_key_file: Path | None = Field(
        default=None,
        description="file holding the signing key (PEM; a mounted secret); neither set: "
        "data_dir/signing_key.pem, created only with a new ledger (which records the deployment's key)",
    )
    published_keys_file: Path | None = Field(
        default=None,
        description="a key set of further public keys the public listener serves on /keys and the "
        "worker trusts on the public log (keys from before the ledger recorded them); none signs",
    )
    trusted_keys_file: Path | None = Field(
        default=None,
        description="subscribers: the public keys (key set or PEM) releases must be signed with; "
        "unset: fetched from keys_url",
    )
    keys_url: str | None = Field(
        default=None,
        description="subscribers: where to fetch the key set when trusted_keys_file is unset; "
        "default: /keys of the public listener at public_host:public_port",
    )

    # --- the individual privacy filter (user level) --------------------------------------------
    user_epsilon_budget: float | None = Field(
        default=None,
        gt=0,
        description="each user's lifetime ε across all user-level streams of the deployment (one "
        "ledger); required when a stream has privacy_unit 'user'",
    )
    user_delta_budget: float = Field(default=0.0, ge=0, lt=1, description="each user's lifetime δ")

    # --- state and logging ----------------------------------------------------------------------
    data_dir: Path = Field(default=Path("var"), description="local state: faust data, ledger")
    store_url: str | None = Field(
        default=None,
        description="where the privacy ledger and the window state live, shared by all workers: "
        "sqlite:///DIR (files DIR/ledger.sqlite3 and DIR/state.sqlite3; one host) or "
        "postgresql://USER@HOST:PORT/DB?sslmode=verify-full (several hosts); unset: SQLite at "
        "ledger_path and state_path",
    )
    store_password: SecretStr | None = Field(default=None, description="PostgreSQL password (a secret)")
    store_password_file: Path | None = Field(
        default=None, description="file holding the PostgreSQL password (a mounted Kubernetes Secret)"
    )
    store_sslmode: SslMode | None = Field(
        default=None, description="PostgreSQL TLS mode (overrides the URL's sslmode)"
    )
    store_sslrootcert: Path | None = Field(
        default=None, description="CA certificate(s) that sign the PostgreSQL server's certificate"
    )
    store_pool_size: int = Field(default=4, ge=1, le=200, description="PostgreSQL connections per store")
    store_retry_seconds: float = Field(
        default=30.0, ge=0, description="how long a PostgreSQL operation retries a lost connection"
    )
    ledger_path: Path | None = Field(
        default=None, description="the privacy ledger (SQLite); default data_dir/ledger.sqlite3"
    )
    ledger_create_if_missing: bool = Field(
        default=False,
        description="create the ledger (the file, or its tables in the PostgreSQL database) if it "
        "does not exist (first start only: a missing ledger is otherwise an error, never a "
        "silently reset budget)",
    )
    state_path: Path | None = Field(
        default=None, description="window buffers and SOA snapshots (SQLite); default data_dir/state.sqlite3"
    )
    slot_cache_file: Path | None = Field(
        default=None,
        description="where measured publication slots are remembered (per workload and machine, never "
        "data); default $XDG_CACHE_HOME/privstream/slot-measurements.json (~/.cache/...), shared by "
        "the machine's workers, or data_dir/slot-measurements.json where that cannot be written",
    )
    learner_niceness: int = Field(
        default=10,
        ge=0,
        le=19,
        description="how much lower the learner processes' CPU priority is than the worker's (nice): "
        "where every core is busy, release fits take the CPU ingest leaves rather than slowing the "
        "stream down (0: the same priority)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text lines for people, or one JSON object per line for log "
        "pipelines (the container and Kubernetes files set json)",
    )

    # --- streams --------------------------------------------------------------------------------
    streams: list[StreamConfig] = Field(default_factory=list)

    @field_validator("kafka_bootstrap")
    @classmethod
    def _bootstrap(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        servers = [s.strip().removeprefix("kafka://") for s in value.split(",")]
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"expected host:port, got {server!r}")
        return ",".join(servers)

    @field_validator("streams")
    @classmethod
    def _unique_streams(cls, streams: list[StreamConfig]) -> list[StreamConfig]:
        names = [s.name for s in streams]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"stream names must be unique; repeated: {', '.join(duplicates)}")
        return streams

    @field_validator("store_url")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in STORE_SCHEMES:
            raise ValueError(
                f"unknown store_url scheme {scheme + ':' if sep else value!r}: use sqlite:///DIR or "
                "postgresql://USER@HOST:PORT/DB"
            )
        if scheme == "sqlite" and not rest.startswith("/"):
            raise ValueError(f"expected sqlite:///DIR (three slashes before a relative path), got {value!r}")
        if scheme == "sqlite" and rest == "/":
            raise ValueError("sqlite:/// needs a directory: sqlite:///DIR")
        if scheme != "sqlite":
            from psycopg.conninfo import conninfo_to_dict

            try:
                params = conninfo_to_dict(value)
            except Exception as exc:
                raise ValueError(f"not a PostgreSQL URL: {exc}") from None
            if "password" in params:
                raise ValueError(
                    "put the password in store_password or store_password_file, not in store_url"
                )
        return value

    @model_validator(mode="after")
    def _store_consistent(self) -> Settings:
        if self.store_backend == "postgresql" and (self.ledger_path or self.state_path):
            raise ValueError(
                "ledger_path and state_path name SQLite files; with a postgresql store_url the "
                "ledger and the state are in that database (unset them)"
            )
        if self.store_password is not None and self.store_password_file is not None:
            raise ValueError("set store_password or store_password_file, not both")
        if self.signing_key is not None and self.signing_key_file is not None:
            raise ValueError("set signing_key or signing_key_file, not both")
        return self

    @model_validator(mode="after")
    def _one_user_budget(self) -> Settings:
        # A person may be in every user-level stream: one budget for the deployment, never one
        # per stream (a user's spend would add up across streams past what each certificate states).
        user_level = [s.name for s in self.streams if s.release and s.release.privacy_unit == "user"]
        if user_level and self.user_epsilon_budget is None:
            raise ValueError(
                f"user_epsilon_budget is required: stream(s) {', '.join(user_level)} have privacy_unit "
                "'user', and a user's lifetime ε is one budget across every user-level stream of the "
                "deployment (set user_epsilon_budget, and user_delta_budget if δ > 0)"
            )
        for stream in self.streams:
            release = stream.release
            if release is None or release.privacy_unit != "user":
                continue
            none = [0.0] * (release.top_level + 1)  # no sanitizer
            epsilon = max(
                map(sum, zip(release.learner_epsilons, release.sanitizer_epsilons or none, strict=True))
            )
            delta = max(map(sum, zip(release.learner_deltas, release.sanitizer_deltas or none, strict=True)))
            assert self.user_epsilon_budget is not None
            if epsilon > self.user_epsilon_budget or delta > self.user_delta_budget:
                raise ValueError(
                    f"stream {stream.name}: a release costs each user ε={epsilon:g}, δ={delta:g}, more than "
                    f"the user budget (user_epsilon_budget {self.user_epsilon_budget:g}, user_delta_budget "
                    f"{self.user_delta_budget:g}): no user could ever be in one"
                )
        return self

    @model_validator(mode="after")
    def _sasl_complete(self) -> Settings:
        if self.kafka_security_protocol.startswith("SASL_") and not (
            self.kafka_sasl_mechanism and self.kafka_sasl_username and self.kafka_sasl_password
        ):
            raise ValueError(
                f"kafka_security_protocol={self.kafka_security_protocol} needs kafka_sasl_mechanism, "
                "kafka_sasl_username and kafka_sasl_password"
            )
        return self

    @model_validator(mode="after")
    def _operator_listener_guarded(self) -> Settings:
        # The operator listener serves raw, non-private figures: loopback only, or a token.
        if self.operator_token is not None and len(self.operator_token.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"operator_token is shorter than {MIN_TOKEN_LENGTH} characters: anyone could guess it "
                "(make one with: openssl rand -hex 32)"
            )
        if self.operator_token is None and not is_loopback(self.operator_host):
            raise ValueError(
                f"operator_host {self.operator_host!r} is reachable from other hosts and serves raw, "
                "non-private figures (/metrics, /status): set operator_token, or bind 127.0.0.1"
            )
        if (self.public_host, self.public_port) == (self.operator_host, self.operator_port):
            raise ValueError("public_port and operator_port must differ (two listeners)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        renamed = {"web_host": "public_host", "web_port": "public_port"}
        given = set(data) if isinstance(data, dict) else set()
        given |= {k[len(ENV_PREFIX) :].lower() for k in os.environ if k.startswith(ENV_PREFIX)}
        for old, new in renamed.items():
            if old in given:
                raise ValueError(
                    f"{old} was renamed {new} (the public listener); operator pages (/metrics, /status, "
                    "/healthz, /readyz) are on operator_host/operator_port"
                )
        return data

    def topic(self, name: str) -> str:
        """The Kafka topic name of a logical topic (see :data:`TOPIC_NAMES`)."""
        if name not in TOPIC_NAMES:
            raise KeyError(f"unknown topic {name!r}; known: {', '.join(TOPIC_NAMES)}")
        return f"{self.topic_prefix}{name}"

    @property
    def store_backend(self) -> Literal["sqlite", "postgresql"]:
        """Which storage backend holds the ledger and the state (from :attr:`store_url`)."""
        return "sqlite" if self.store_url is None or self.store_url.startswith("sqlite:") else "postgresql"

    @property
    def _sqlite_dir(self) -> Path:
        if self.store_url is None:
            return self.data_dir
        return Path(self.store_url.removeprefix("sqlite:///"))

    @property
    def resolved_ledger_path(self) -> Path:
        """The SQLite ledger file (with a SQLite store)."""
        return self.ledger_path or self._sqlite_dir / "ledger.sqlite3"

    @property
    def resolved_state_path(self) -> Path:
        """The SQLite state file (with a SQLite store)."""
        return self.state_path or self._sqlite_dir / "state.sqlite3"

    @property
    def resolved_keys_url(self) -> str:
        """Where subscribers fetch the release signing keys: ``keys_url``, else the public listener's
        ``/keys`` (on 127.0.0.1 when it binds every address)."""
        if self.keys_url:
            return self.keys_url
        host = "127.0.0.1" if self.public_host in ("0.0.0.0", "::", "") else self.public_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.public_port}/keys"

    def store_password_value(self) -> str | None:
        """The PostgreSQL password: from ``store_password``, else read from ``store_password_file``."""
        if self.store_password is not None:
            return self.store_password.get_secret_value()
        if self.store_password_file is not None:
            try:
                return self.store_password_file.read_text().rstrip("\r\n")
            except OSError as exc:
                raise ValueError(
                    f"cannot read store_password_file {self.store_password_file}: {exc}"
                ) from None
        return None

    def stream(self, name: str) -> StreamConfig | None:
        return next((s for s in self.streams if s.name == name), None)

    def to_env(self) -> dict[str, str]:
        """These settings as ``PRIVSTREAM_*`` environment variables (for child processes).

        Round-trips: ``Settings()`` in an environment made of ``to_env()`` equals ``self``.
        """
        env = {}
        for name, value in self.model_dump(mode="json", exclude={"config_file"}).items():
            if value is None:
                continue
            secret = getattr(self, name)
            if isinstance(secret, SecretStr):
                value = secret.get_secret_value()
            env[f"{ENV_PREFIX}{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return env

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            NamedEnvSettingsSource(settings_cls),
            ConfigFileSource(settings_cls, init_settings),
        )


class NamedEnvSettingsSource(EnvSettingsSource):
    """The ``PRIVSTREAM_*`` variables; a JSON value that does not parse is an error naming the
    variable and the position (pydantic-settings' own message names neither)."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if isinstance(value, str):
            check_text_depth(value, "json", f"{ENV_PREFIX}{field_name.upper()}")
        try:
            return super().decode_complex_value(field_name, field, value)
        except json.JSONDecodeError as exc:
            raise ValueError(json_error_message(f"{ENV_PREFIX}{field_name.upper()}", exc)) from None


def json_error_message(where: str, exc: json.JSONDecodeError) -> str:
    """One line: what is not valid JSON, why, and where (character, and the text just before it).

    >>> try:
    ...     json.loads('[{"name": "a",}]')
    ... except json.JSONDecodeError as exc:
    ...     print(json_error_message("PRIVSTREAM_STREAMS", exc))  # doctest: +ELLIPSIS
    PRIVSTREAM_STREAMS is not valid JSON: Expecting ... at character 15, after '[{"name": "a",'
    """
    before = exc.doc[max(0, exc.pos - 30) : exc.pos]
    return f"{where} is not valid JSON: {exc.msg} at character {exc.pos + 1}, after {before!r}"


class ConfigFileSource(PydanticBaseSettingsSource):
    """Settings from the TOML or JSON file named by ``config_file=`` or ``PRIVSTREAM_CONFIG_FILE``."""

    def __init__(self, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        path = init_settings().get("config_file") or os.environ.get(CONFIG_FILE_ENV)
        self._values = load_config_file(Path(path)) if path else {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``).

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a settings file; the format follows the suffix (``.toml`` or ``.json``)."""
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        if path.suffix in (".toml", ".json"):
            text = path.read_text()
            # Measured before parsing: both readers recurse once per level (one line, not a
            # RecursionError, for a file of 200,000 brackets).
            check_text_depth(text, "toml" if path.suffix == ".toml" else "json", f"config file {path}")
        if path.suffix == ".toml":
            data = tomllib.loads(text)
            check_value_depth(data, f"config file {path}")  # dotted keys nest without brackets
        elif path.suffix == ".json":
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("the top level must be an object")
        else:
            data = None
        if data is not None:
            # ``$schema`` names the file's JSON Schema for editors (``privstream config schema``).
            data.pop("$schema", None)
            return data
    except NestingError:
        raise
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"config file {path} is not valid: {exc}") from exc
    raise ValueError(f"config file {path} must end in .toml or .json")


def describe_validation_error(exc: Exception) -> str:
    """One readable line for all problems, for the CLI (pydantic's own text is multi-line and noisy):
    each names the setting (``streams[0].release.top_level``) and, when the value came from the
    environment, the variable.
    """
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    lines = []
    for err in errors():
        loc = [str(p) for p in err.get("loc", ())]
        where = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc).lstrip(".") or "settings"
        variable = f"{ENV_PREFIX}{loc[0].upper()}" if loc else ""
        if variable and variable in os.environ:
            where += f" (from {variable})"
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        lines.append(f"{where}: {message}")
    return "invalid settings: " + "; ".join(lines)
