"""A stream's privacy configuration, as the ledger records it: what must not change unannounced.

The ledger's accounting is only as good as the configuration it was kept under: the ε of each
level, δ, the lifetime budgets, the privacy unit (and a user's row bound), the window family
(windows are numbered by it) and the number of levels (each example is in one node per level),
and which learner and sanitizer spend it. :func:`privacy_configuration` extracts those fields
from a stream's settings; the ledger stores them when the stream is first registered and
compares them at every start. Only a *lowered* budget passes without an explicit, audited
acceptance, with the ε and δ of the levels lowered along (where they default to a share of the
budget): lowering can only make the ledger refuse more and each release spend less.

>>> old = {"epsilon_budget": 2.0, "learner_epsilons": [1.0, 1.0], "top_level": 1}
>>> lowered = {**old, "epsilon_budget": 1.0, "learner_epsilons": [0.5, 0.5]}
>>> differences(old, lowered)
{'epsilon_budget': (2.0, 1.0), 'learner_epsilons': ([1.0, 1.0], [0.5, 0.5])}
>>> only_lowers(old, lowered), only_lowers(old, {**old, "epsilon_budget": 3.0})
(True, False)
>>> only_lowers(old, {**lowered, "top_level": 2, "learner_epsilons": [0.3, 0.3, 0.3]})
False
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privstream.stream_app.settings import Settings, StreamConfig

__all__ = ["LOWERABLE", "canonical", "differences", "only_lowers", "privacy_configuration"]

#: The fields that may be lowered without an acceptance: the lifetime budgets, and the costs of
#: the releases (which follow the budget where they are not set).
LOWERABLE = (
    "epsilon_budget",
    "delta_budget",
    "user_epsilon_budget",
    "user_delta_budget",
    "learner_epsilons",
    "delta",
    "sanitizer_epsilons",
    "sanitizer_delta",
    "quality_epsilon",
)


def privacy_configuration(stream: StreamConfig, settings: Settings | None = None) -> dict[str, Any]:
    """The fields of a releasing stream's configuration that its privacy accounting rests on.

    >>> from privstream.stream_app.settings import StreamConfig
    >>> stream = StreamConfig(name="s", hypothesis_class="thresholds:64",
    ...                       release={"epsilon": 0.5, "epsilon_budget": 1.0, "top_level": 1})
    >>> config = privacy_configuration(stream)
    >>> config["learner_epsilons"], config["window"], config["privacy_unit"]
    ([0.5, 0.5], {'kind': 'count', 'size': 2000, 'seconds': None}, 'example')
    """
    release = stream.release
    if release is None:
        raise ValueError(f"stream {stream.name!r} has no private releases")
    config: dict[str, Any] = {
        "privacy_unit": release.privacy_unit,
        "user_contribution_bound": release.user_contribution_bound,
        "window": {
            "kind": release.window.kind,
            "size": release.window.size if release.window.kind == "count" else None,
            "seconds": release.window.seconds,
        },
        "top_level": release.top_level,
        "learner": release.learner,
        "learner_epsilons": list(release.learner_epsilons),
        "delta": release.delta,
        "sanitizer": release.sanitizer,
        "sanitizer_epsilons": list(release.sanitizer_epsilons) if release.sanitizer else None,
        "sanitizer_delta": release.sanitizer_delta if release.sanitizer else None,
        "epsilon_budget": release.epsilon_budget,
        "delta_budget": release.delta_budget,
    }
    if release.quality_epsilon is not None:  # absent otherwise: ledgers kept before it compare equal
        config["quality_epsilon"] = release.quality_epsilon
    if release.privacy_unit == "user" and settings is not None:  # one per-user budget for all streams
        config["user_epsilon_budget"] = settings.user_epsilon_budget
        config["user_delta_budget"] = settings.user_delta_budget
    return config


def canonical(config: Mapping[str, Any]) -> str:
    """The configuration as stored: JSON with sorted keys (equal configurations, equal text)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def stored(text: str) -> dict[str, Any]:
    """A configuration as the ledger stored it (:func:`canonical`), the tree's top level under its
    one name ``top_level`` (also read from the key ``levels``, which ledgers of version 0.1 store).

    >>> stored('{"levels": 2, "learner": "generic"}')
    {'learner': 'generic', 'top_level': 2}
    """
    config = dict(json.loads(text))
    if "levels" in config and "top_level" not in config:
        config["top_level"] = config.pop("levels")
    return config


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{field: (old, new)}`` for every field whose value differs (missing: ``None``)."""
    return {
        key: (old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    }


def only_lowers(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` in lowered budgets and costs only (element by element
    for the levels' ε, whose number must not change; an unset user budget, which defers to the
    stream's, is never lower)."""
    for key, (before, after) in differences(old, new).items():
        if key not in LOWERABLE:
            return False
        if isinstance(before, list) and isinstance(after, list):
            if len(before) != len(after) or any(b > a for a, b in zip(before, after, strict=True)):
                return False
        elif not (isinstance(before, int | float) and isinstance(after, int | float) and after <= before):
            return False
    return True
