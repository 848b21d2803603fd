"""What the command modules share: user errors, settings loading, help texts, file ids (logging:
``stream_app/logs.py``).

Each command module imports this one and nothing of its siblings, so command groups never import
each other (``tests/test_layers.py`` checks there is no import cycle).

>>> file_window_id.__doc__.split(":")[0]
'Deterministic window id of a file'
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

__all__ = [
    "CLASS_HELP",
    "EXAMPLES_HELP",
    "UserError",
    "add_config_option",
    "file_window_id",
    "load_settings",
]

CLASS_HELP = "thresholds:N, points:N, intervals:N (N like 1024, 2^32) or a .npy/.csv class file"
EXAMPLES_HELP = "CSV with header x,y or JSON lines with fields x and y"


class UserError(Exception):
    """An error the user can fix; the CLI prints its message without a traceback."""


def file_window_id(path: Path) -> str:
    """Deterministic window id of a file: its stem and a digest of its bytes (replays reproduce it)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return f"file:{path.stem}:{digest}"


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config FILE``: the settings file of the commands that talk to the service or Kafka."""
    parser.add_argument(
        "--config", type=Path, help="TOML or JSON settings file (else $PRIVSTREAM_CONFIG_FILE)"
    )


def load_settings(args: argparse.Namespace, **overrides: Any) -> Any:
    """Settings from the environment, ``--config`` and CLI overrides, with one-line errors."""
    from pydantic import ValidationError

    from privstream.stream_app.settings import Settings, describe_validation_error

    if getattr(args, "config", None):
        overrides["config_file"] = args.config
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None
