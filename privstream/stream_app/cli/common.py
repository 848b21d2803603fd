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
import math
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "CLASS_HELP",
    "EXAMPLES_HELP",
    "ProgressBar",
    "UserError",
    "add_config_option",
    "file_window_id",
    "format_size",
    "load_settings",
    "offline_release",
]

CLASS_HELP = (
    "thresholds:N, points:N, intervals:N (N like 1024 or 2^32, at most 2^62) or a .npy/.csv class file"
)
EXAMPLES_HELP = "CSV with header x,y or JSON lines with fields x and y"


class ProgressBar:
    """A one-line progress bar on a text stream (redrawn in place)."""

    def __init__(self, stream: Any = None, width: int = 30) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.width = width

    def __call__(self, fraction: float, message: str) -> None:
        done = max(0, min(self.width, round(fraction * self.width)))
        line = f"\r[{'#' * done}{'.' * (self.width - done)}] {100 * fraction:5.1f}% {message[:40]:<40}"
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class UserError(Exception):
    """An error the user can fix; the CLI prints its message without a traceback."""


def format_size(value: float | None, log10: float | None = None) -> str:
    """A count for people: exact with thousands separators below 10^7, else ``10^x.xx``.

    ``value`` may be an integer of any size (never converted to decimal: Python refuses to print
    more than 4,300 digits); ``log10`` stands in where only the logarithm is known.

    >>> format_size(1127), format_size(10**157852 * 3), format_size(None, 14.49), format_size(None)
    ('1,127', '10^157852.48', '10^14.49', '-')
    """
    if value is not None and value < 10**7:
        return f"{value:,.0f}"
    if value is not None:
        log10 = math.log10(value)  # exact enough for any int (math.log10 takes big ints)
    return "-" if log10 is None else f"10^{log10:.2f}"


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
    from pydantic_settings import SettingsError

    from privstream.stream_app.settings import Settings, describe_validation_error

    if getattr(args, "config", None):
        overrides["config_file"] = args.config
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None
    except SettingsError as exc:  # a variable that does not parse: the cause names it and where
        raise ValueError(str(exc.__cause__ or exc)) from None


def offline_release(
    result: Any,
    args: argparse.Namespace,
    *,
    stream_id: str,
    hypothesis_class: str,
    algorithm: str,
    window: Any,
    run: int = 0,
) -> Any:
    """The release ``privstream learn``/``sanitize`` prints for ``result``: the service's builder
    (:func:`privstream.agents.certificates.build_release`), charged ``--epsilon``/``--delta`` per
    example of a file (n public, replace-one), with the run number when there are several."""
    from privstream import __version__
    from privstream.agents.certificates import Charge, build_release

    return build_release(
        result,
        Charge(epsilon=args.epsilon, delta=args.delta, neighbouring_relation="replace-one"),
        stream_id=stream_id,
        hypothesis_class=hypothesis_class,
        algorithm=algorithm,
        n_public=True,
        sample_size=result.sample_size,
        parameters={"run": run} if getattr(args, "runs", 1) > 1 else None,
        window=window,
        randomness="seeded" if args.seed is not None else "secure",
        library_version=__version__,
    )
