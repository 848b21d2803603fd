"""Log lines: JSON for log pipelines with the release fields as keys, text for people."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from privstream.stream_app.logs import JsonFormatter
from privstream.stream_app.settings import Settings


def record(message: str, *args: object, exc_info=None, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord(
        "privstream.agents.releases", logging.WARNING, __file__, 1, message, args, exc_info
    )
    rec.__dict__.update(extra)
    return rec


def test_a_release_line_carries_its_stream_window_and_ledger_entry_as_keys():
    line = json.loads(
        JsonFormatter().format(
            record(
                "released %s", "learner:generic", stream_id="s", window_id="g-c2000-3", ledger_entry_id="12"
            )
        )
    )
    assert line["message"] == "released learner:generic" and line["level"] == "warning"
    assert (line["stream_id"], line["window_id"], line["ledger_entry_id"]) == ("s", "g-c2000-3", "12")
    assert line["time"].endswith("Z") and line["logger"] == "privstream.agents.releases"


def test_a_traceback_stays_on_one_json_line():
    try:
        raise RuntimeError("learner failed")
    except RuntimeError:
        text = JsonFormatter().format(record("window %s failed", "w", exc_info=sys.exc_info()))
    assert "\n" not in text
    line = json.loads(text)
    assert "RuntimeError: learner failed" in line["exception"] and line["message"] == "window w failed"


def test_values_json_cannot_encode_are_written_as_text():
    line = json.loads(JsonFormatter().format(record("x", path=Path("/var/x"))))
    assert line["path"] == "/var/x"


def test_log_format_is_text_or_json():
    assert Settings(_env_file=None).log_format == "text"
    assert Settings(log_format="json", _env_file=None).log_format == "json"
    with pytest.raises(ValueError, match="log_format"):
        Settings(log_format="xml", _env_file=None)
