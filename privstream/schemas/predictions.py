"""What the online SOA agent publishes to the internal (trusted) ``predictions`` topic."""

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
