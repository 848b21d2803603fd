"""One configured stream: its hypothesis class or feature vectors (a tabular stream's columns), its
online learner, how producers key it, and its private releases (:mod:`.release_config`). The rule:
a stream that loads has one kind of point, and a release its kind of point can take.
"""

from __future__ import annotations

from typing import Any, Literal

from privstream_client.tabular import TabularEncoder
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from privstream.learning.hypothesis_classes import Intervals, Points, Thresholds, parse_class_spec
from privstream.learning.online import (
    DEFAULT_ONLINE_LEARNER,
    OnlineInputError,
    check_online_parameters,
    make_stream_learner,
)
from privstream.learning.online.multiclass import MAX_CLASSES
from privstream.learning.private_learners.one_vs_rest import BASE_LEARNER as MULTICLASS_BASE
from privstream.learning.private_learners.one_vs_rest import share
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS, check_bounds
from privstream.learning.private_learners.vector_base import configuration_error as vector_configuration_error
from privstream.stream_app.release_config import ReleaseConfig
from privstream.stream_app.tabular import ColumnConfig, column_encoder, derive_vector_fields


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
