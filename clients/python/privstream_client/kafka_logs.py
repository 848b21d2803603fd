"""aiokafka's log lines about unusable bootstrap servers, held while a client starts.

When the start fails, the caller raises one line that names the cause, and aiokafka's own lines
("Unable connect to ...") would only precede it; when it succeeds, they are logged after all (a
bootstrap server is down).

>>> with held_bootstrap_logs() as held:
...     def bootstrap():  # aiokafka's AIOKafkaClient.bootstrap logs its failures
...         logging.getLogger("aiokafka").error('Unable connect to "127.0.0.1:1": refused')
...     bootstrap()
...     held.failed()
>>> held.records
[]
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

#: aiokafka's client logger (``aiokafka/client.py``).
AIOKAFKA = "aiokafka"


class BootstrapLogs(logging.Filter):
    """Holds the records aiokafka's ``bootstrap`` logs; passes every other record."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName != "bootstrap":
            return True
        self.records.append(record)
        return False

    def failed(self) -> None:
        """The start failed and the caller says why: drop what was held."""
        self.records.clear()


@contextlib.contextmanager
def held_bootstrap_logs() -> Iterator[BootstrapLogs]:
    """Hold aiokafka's bootstrap lines for the block; log those still held at its end.

    >>> with held_bootstrap_logs() as held:
    ...     def bootstrap():
    ...         logging.getLogger("aiokafka").warning("Unable to request metadata from x:1")
    ...     bootstrap()
    ...     [r.getMessage() for r in held.records]
    ['Unable to request metadata from x:1']
    """
    logger = logging.getLogger(AIOKAFKA)
    held = BootstrapLogs()
    logger.addFilter(held)
    try:
        yield held
    finally:
        logger.removeFilter(held)
        for record in held.records:
            logger.handle(record)
