"""The ingest agent: raw bytes from ``examples`` -> validation -> the online SOA or the DLQ.

Registered on a faust app by the service (``stream_app``), which hands in the topics and the
collaborators; this module never imports the service.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from privstream.agents.interfaces import IngestMetrics
from privstream.agents.online import OnlineLearners
from privstream.agents.progress import Progress
from privstream.agents.validation import ExampleValidator, Invalid
from privstream.schemas import Example

log = logging.getLogger(__name__)


def dead_letter_headers(invalid: Invalid, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """Kafka headers that say why a message was dead-lettered and where it came from."""
    return [
        ("error.reason", invalid.reason.encode()),
        ("error.detail", invalid.detail[:1000].encode()),
        ("source.topic", topic.encode()),
        ("source.partition", str(partition).encode()),
        ("source.offset", str(offset).encode()),
    ]


def register_ingest_agent(
    app: Any,
    *,
    source: Any,
    dead_letters: Any,
    predictions: Any,
    validator: ExampleValidator,
    learners: OnlineLearners,
    metrics: IngestMetrics,
    progress: Progress,
    on_valid: Callable[[Example, int, int, float | None], None] | None = None,
) -> Any:
    """Define the ``ingest`` agent on ``app`` (a ``faust.App``); returns the agent.

    ``source``, ``dead_letters`` and ``predictions`` are faust topics with raw bytes values.
    Every message is handled exactly once per delivery: invalid ones are dead-lettered with
    their reason, valid ones are predicted, learned and published; the stream never stops on
    bad input (at-least-once: the offset is committed after the message is handled).
    """

    async def ingest(stream: AsyncIterator[Any]) -> None:
        async for event in stream.events():  # type: ignore[attr-defined]
            message = event.message
            metrics.received()
            result = validator.validate(event.value)
            if isinstance(result, Invalid):
                metrics.invalid(result.reason)
                await dead_letters.send(
                    key=event.key,
                    value=event.value if event.value is not None else b"",
                    headers=dead_letter_headers(result, message.topic, message.partition, message.offset),
                )
                metrics.dead_lettered()
            else:
                prediction = learners.learn(result, message.partition, message.offset)
                if on_valid is not None:  # the private side: buffer it in its window
                    on_valid(result, message.partition, message.offset, message.timestamp)
                await predictions.send(
                    key=result.stream_id.encode(), value=prediction.model_dump_json().encode()
                )
            progress.tick()

    return app.agent(source, name="ingest")(ingest)
