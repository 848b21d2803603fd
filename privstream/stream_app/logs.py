"""The worker's log lines: text for people, one JSON object per line for log pipelines.

Every release-related line carries the fields ``stream_id``, ``window_id`` and
``ledger_entry_id`` (passed with ``extra=``): in JSON they are keys of the line, so an operator
joins a log line to the certificate of the release it is about (the certificate's
``ledger_entry_id`` and ``window.window_id``). Any other ``extra=`` field becomes a key too.

>>> import logging
>>> record = logging.LogRecord("privstream.agents.releases", logging.INFO, __file__, 1,
...     "released %s", ("learner:generic",), None)
>>> record.stream_id, record.window_id, record.ledger_entry_id = "clicks", "g-c2000-0", "7"
>>> record.created = 0.0
>>> print(JsonFormatter().format(record))  # doctest: +NORMALIZE_WHITESPACE
{"time": "1970-01-01T00:00:00.000Z", "level": "info", "logger": "privstream.agents.releases",
 "message": "released learner:generic", "stream_id": "clicks", "window_id": "g-c2000-0",
 "ledger_entry_id": "7"}
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: What every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, extra fields,
    and the traceback as ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        entry: dict[str, Any] = {
            "time": f"{stamp}.{int((record.created - seconds) * 1000):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRIBUTES})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str, log_format: Literal["text", "json"] = "text") -> None:
    """Log to standard error at ``level`` in ``log_format``, replacing any handler set before."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
