"""The JSON number rule of every public message: no number beyond ±2^53.

JavaScript's ``Number`` and Go's ``float64`` hold every integer up to 2^53 exactly and nothing
beyond it; Go's ``int64`` decoder fails on anything larger than 2^63, and every common client
fails on a 2,400-digit integer (an accuracy theorem's sample size can be that large). So in
every public message (:class:`PublicMessage`, the base of the releases and their certificate):

* **Free-form fields** (a certificate's ``parameters`` and ``dp_outputs``, a hypothesis's canonical
  dict, a synthetic distribution's dict) pass through :func:`json_safe`: a number beyond ±2^53
  becomes its decimal string (``"9223372036854775807"``, ``"1e+300"``), and a non-finite float
  ``"inf"``, ``"-inf"`` or ``"nan"`` (JSON has no literal for them). Readers of integer fields
  (``hypothesis_from_dict``, ``SyntheticDistribution.from_dict``) accept such a decimal string.
* **Typed fields** hold values within the range; a theorem sample size is written by
  :func:`theorem_size_fields` as the exact number when it is at most 2^53 and ``null`` beyond,
  always with its ``log10``.
* Every public model re-checks its whole JSON form (:func:`check_json_numbers`) and refuses a
  message that still holds a number beyond the range, so the rule cannot be bypassed.

>>> json_safe({"class_size": 2**63, "alpha": 0.25, "bound": float("inf"), "sizes": [3, -2**60]})
{'class_size': '9223372036854775808', 'alpha': 0.25, 'bound': 'inf', 'sizes': [3, '-1152921504606846976']}
>>> theorem_size_fields(289), theorem_size_fields(10**2400)[0]
((289.0, 2.461), None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

__all__ = [
    "MAX_SAFE_INTEGER",
    "JsonSafeDict",
    "PublicMessage",
    "check_json_numbers",
    "json_safe",
    "theorem_size_fields",
]

#: The largest magnitude a number may have in a public message (2^53: exact in every client).
MAX_SAFE_INTEGER = 2**53


def _safe_number(x: int | float) -> int | float | str:
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if abs(x) > MAX_SAFE_INTEGER:
        return str(x) if isinstance(x, int) else repr(x)
    return x


def json_safe(value: Any) -> Any:
    """``value`` with every number beyond ±2^53 (or non-finite) as a string; numpy scalars and
    arrays become Python values, tuples become lists. Idempotent."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return _safe_number(int(value))
    if isinstance(value, float | np.floating):
        return _safe_number(float(value))
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [json_safe(v) for v in value]
    return value


def check_json_numbers(obj: Any, path: str = "$") -> None:
    """Raise ``ValueError`` naming the first number beyond ±2^53 (or non-finite) in a JSON value."""
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float):
        if (isinstance(obj, float) and not math.isfinite(obj)) or abs(obj) > MAX_SAFE_INTEGER:
            raise ValueError(
                f"{path}: {obj!r} is beyond the JSON number range of public messages (2^53); "
                "write it as a string (privstream.schemas.numbers)"
            )
        return
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            check_json_numbers(v, f"{path}.{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            check_json_numbers(v, f"{path}[{i}]")


def theorem_size_fields(n: int | float | None) -> tuple[float | None, float | None]:
    """``(theorem_sample_size, theorem_sample_size_log10)`` for a (possibly astronomical) size n.

    The size is the exact n as a float when n <= 2^53 (every such integer is exact in a double),
    else ``None``; the log10 (3 decimals) is always given for n >= 1. ``math.log10`` is exact
    enough for Python ints of any length.
    """
    if n is None:
        return None, None
    log10 = round(math.log10(n), 3) if n >= 1 else None
    return (float(n) if abs(n) <= MAX_SAFE_INTEGER else None), log10


#: A free-form dict of a public message, made JSON-safe on validation (:func:`json_safe`).
JsonSafeDict = Annotated[dict[str, Any], AfterValidator(json_safe)]


class PublicMessage(BaseModel):
    """Base of every public message: frozen, tolerant of unknown fields, and within the number rule."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _numbers_within_range(self) -> PublicMessage:
        check_json_numbers(self.model_dump(mode="json"))
        return self
