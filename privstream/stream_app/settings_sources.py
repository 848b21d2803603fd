"""Where the settings come from besides keyword arguments: the ``PRIVSTREAM_*`` environment and a
TOML or JSON file; and the one-line message an invalid configuration gives. The rule: whatever
the source, an error names the variable or file, and the position, in one line.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

from privstream.stream_app.nesting import NestingError, check_text_depth, check_value_depth

ENV_PREFIX = "PRIVSTREAM_"
CONFIG_FILE_ENV = f"{ENV_PREFIX}CONFIG_FILE"


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
