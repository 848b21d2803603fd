"""What the online agent publishes to the internal (trusted) ``predictions`` topic: the SOA's
predictions on class streams, the online learner's on streams of feature vectors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Prediction(BaseModel):
    """The SOA's prediction for one example, made before it learned the label.

    Trusted zone only: it is computed from raw data without any privacy mechanism.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = 1
    stream_id: str
    x: int
    y: int = Field(description="the true label, 0/1")
    prediction: int = Field(description="the SOA's prediction, 0/1, made before seeing y")
    mistake: bool
    mistakes: int = Field(description="the stream's mistakes so far, this one included")
    mistake_bound: int = Field(description="the Littlestone dimension of the stream's class")
    realizable: bool = Field(description="false once the stream is proven not realizable by the class")
    source_partition: int
    source_offset: int
    example_id: str | None = None


class PredictionBatch(BaseModel):
    """The SOA's predictions for consecutive examples of one stream from one source partition.

    Columnar: entry i is the example at ``source_offsets[i]`` (entry ``source_items[i]`` of that
    message when it was an ``ExampleBatch``). One message per (stream, partition) per poll keeps
    the hot path near the Kafka client's rate. Trusted zone only.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = 1
    stream_id: str
    source_partition: int
    source_offsets: list[int]
    source_items: list[int] = Field(description="index inside an ExampleBatch message, else 0")
    xs: list[int]
    ys: list[int]
    predictions: list[int] = Field(description="made before seeing the label")
    mistakes_before: int = Field(description="the stream's mistakes before this batch")
    mistakes: int = Field(description="the stream's mistakes after this batch")
    mistake_bound: int
    realizable: bool
    example_ids: list[str | None] | None = None


class VectorPredictionBatch(BaseModel):
    """The online learner's predictions for consecutive examples of a stream of feature vectors.

    Columnar like :class:`PredictionBatch`: entry i is the example at ``source_offsets[i]`` (entry
    ``source_items[i]`` of an ``ExampleBatch``). The feature vectors themselves are not repeated:
    they are on the examples topic at those positions. Trusted zone only.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = 1
    stream_id: str
    learner: str = Field(description="the online learner, e.g. 'perceptron'")
    source_partition: int
    source_offsets: list[int]
    source_items: list[int] = Field(description="index inside an ExampleBatch message, else 0")
    ys: list[int]
    predictions: list[int] = Field(description="made before seeing the label")
    mistakes_before: int = Field(description="the stream's mistakes before this batch")
    mistakes: int = Field(description="the stream's mistakes after this batch")
    mistake_bound: int | None = Field(
        description="the most mistakes on a stream separable with the configured margin, (R/γ)² "
        "(null: the learner has no such bound)"
    )
    margin_mistakes: int | None = Field(
        default=None, description="the Perceptron mistakes the margin test counts (null: no test)"
    )
    margin_bound: int | None = Field(default=None, description="(R/γ)² for margin_mistakes (null: no test)")
    realizable: bool | None = Field(
        description="false once more Perceptron mistakes than (R/γ)² prove that no halfspace "
        "separates the stream with margin γ (null: the learner makes no such test)"
    )
    example_ids: list[str | None] | None = None
