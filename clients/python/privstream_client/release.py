"""A published release, decoded: the hypothesis, its certificate, and the choice of releases.

A release is a JSON object ``{schema_version, stream_id, hypothesis_class, hypothesis,
certificate}`` (the release specification; its JSON Schema is
``privstream/schemas/json/hypothesis_release.schema.json``). :meth:`Release.from_json` reads
one and refuses, with :class:`~privstream_client.models.ReleaseFormatError`, anything that does
not follow it; fields it does not know are kept in ``release.data`` and otherwise ignored.

**Levels** (the release tree). A stream releases every window (level 0) and, at level j, every
node of 2^j consecutive windows once its last window has closed; a release's ``level`` is in its
certificate. :class:`ReleaseSelector` picks, release by release,

* ``"best"`` (the default): the newest release of the highest level completed so far -- a release
  is taken when its level is at least that of every release taken before (and, within a level,
  when it covers later windows);
* ``"most-accurate"``: the release whose private error estimate is the lowest (streams with
  ``quality_epsilon``: each release is scored on the next window and the estimate arrives inside a
  later release, :attr:`Release.evaluations`). Of each level the newest scored release stands;
  the subscriber gets the one of lowest estimated error (a tie: the higher level) each time the
  choice changes, so it is a release published before the one that carried its estimate. Until
  the first estimate arrives it chooses as ``"best"``;
* ``j``: only the releases of level j; ``"all"``: every release.

Each release is taken once: after a crash the same release (same bytes) can be published twice.

>>> release = Release.from_json(EXAMPLE)
>>> release.level, release.certificate.epsilon, release.predict(14577)
(0, 0.5, 1)
>>> certificate_problem(release) is None
True
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

import numpy as np

from privstream_client.freshness import Freshness, Held
from privstream_client.models import ReleaseFormatError, describe, model_from_dict
from privstream_client.tabular import ColumnError, TabularEncoder

__all__ = [
    "Certificate",
    "Evaluation",
    "Guarantee",
    "LevelChoice",
    "LifetimeBound",
    "Publication",
    "Release",
    "ReleaseSelector",
    "WindowInfo",
    "certificate_problem",
    "check_level",
    "describe_release",
]

_MISSING = object()


class _Fields:
    """Typed reads of one JSON object's fields, each error naming the field's path."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ReleaseFormatError(f"{where} must be a JSON object, got {type(data).__name__}")
        self.data, self.where = data, where

    def _get(self, name: str, default: object) -> object:
        value = self.data.get(name, default)
        if value is _MISSING:
            raise ReleaseFormatError(f"{self.where}.{name} is missing")
        return value

    def _bad(self, name: str, what: str, value: object) -> ReleaseFormatError:
        return ReleaseFormatError(f"{self.where}.{name} must be {what}, got {value!r}"[:300])

    def text(self, name: str, default: object = _MISSING, choices: tuple[str, ...] = ()) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if not isinstance(value, str) or (choices and value not in choices):
            raise self._bad(name, f"one of {', '.join(choices)}" if choices else "a string", value)
        return value

    def number(
        self, name: str, default: object = _MISSING, low: float | None = None, high: float | None = None
    ) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._bad(name, "a finite number", value)
        if (low is not None and value < low) or (high is not None and value > high):
            raise self._bad(name, f"in [{low}, {high}]", value)
        return float(value)

    def integer(self, name: str, default: object = _MISSING, low: int | None = None) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if type(value) is not int or (low is not None and value < low):
            raise self._bad(name, f"an integer >= {low}" if low is not None else "an integer", value)
        return value

    def boolean(self, name: str, default: object = _MISSING) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if not isinstance(value, bool):
            raise self._bad(name, "true or false", value)
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._get(name, {})
        if not isinstance(value, Mapping):
            raise self._bad(name, "a JSON object", value)
        return dict(value)

    def child(self, name: str) -> _Fields | None:
        value = self._get(name, None)
        return None if value is None else _Fields(value, f"{self.where}.{name}")


@dataclass(frozen=True)
class WindowInfo:
    """Which examples a release was computed from: a window, or a node of the release tree
    (the level-0 windows ``first_window..last_window``)."""

    window_id: str
    kind: str
    start: int | str | None = None
    end: int | str | None = None
    first_window: int | None = None
    last_window: int | None = None

    @classmethod
    def read(cls, f: _Fields) -> WindowInfo:
        def bound(name: str) -> int | str | None:
            value = f.data.get(name)
            if value is None or type(value) is int or isinstance(value, str):
                return value  # an offset index, or an ISO 8601 time
            raise f._bad(name, "an offset or a time", value)

        return cls(
            window_id=f.text("window_id"),
            kind=f.text("kind", choices=("count", "time", "file")),
            start=bound("start"),
            end=bound("end"),
            first_window=f.integer("first_window", None),
            last_window=f.integer("last_window", None),
        )


@dataclass(frozen=True)
class LifetimeBound:
    """What one example (or user) can lose to all of a stream's releases, for ever, and why."""

    epsilon: float
    delta: float
    epsilon_budget: float
    delta_budget: float
    top_level: int
    level_epsilon: list[float]
    rule: str

    @classmethod
    def read(cls, f: _Fields) -> LifetimeBound:
        level_epsilon = f.data.get("level_epsilon")
        if not isinstance(level_epsilon, list) or not all(
            isinstance(e, int | float) and not isinstance(e, bool) for e in level_epsilon
        ):
            raise f._bad("level_epsilon", "a list of numbers", level_epsilon)
        return cls(
            epsilon=f.number("epsilon", low=0),
            delta=f.number("delta", low=0, high=1),
            epsilon_budget=f.number("epsilon_budget", low=0),
            delta_budget=f.number("delta_budget", low=0, high=1),
            # schema version 2 names the top level "levels"
            top_level=f.integer("top_level" if "top_level" in f.data else "levels", low=0),
            level_epsilon=[float(e) for e in level_epsilon],
            rule=f.text("rule"),
        )


@dataclass(frozen=True)
class Evaluation:
    """A private estimate of an earlier release's error (``release``: its ledger entry id), scored
    on the examples of the window ``window_id`` it never saw: ``error`` and the interval
    ``[low, high]`` that holds its true error with probability ``confidence``; ε-DP on those
    examples (``epsilon``)."""

    release: str
    level: int
    window_id: str
    epsilon: float
    confidence: float
    error: float
    low: float
    high: float

    @classmethod
    def read(cls, f: _Fields) -> Evaluation:
        estimate = f.child("estimate")
        if estimate is None:
            raise ReleaseFormatError(f"{f.where}.estimate is missing")
        return cls(
            release=f.text("release"),
            level=f.integer("level", low=0),
            window_id=f.text("window_id"),
            epsilon=f.number("epsilon", low=0),
            confidence=f.number("confidence", low=0, high=1),
            error=estimate.number("error", low=0, high=1),
            low=estimate.number("low", low=0, high=1),
            high=estimate.number("high", low=0, high=1),
        )


@dataclass(frozen=True)
class Publication:
    """When a release is published (``scheduled_at``, ISO 8601) and the learner's input cap."""

    scheduled_at: str
    publish_delay_seconds: float
    max_node_examples: int | None
    rule: str

    @classmethod
    def read(cls, f: _Fields) -> Publication:
        scheduled = f.text("scheduled_at")
        try:
            datetime.fromisoformat(scheduled.replace("Z", "+00:00"))
        except ValueError:
            raise f._bad("scheduled_at", "an ISO 8601 time", scheduled) from None
        return cls(
            scheduled_at=scheduled,
            publish_delay_seconds=f.number("publish_delay_seconds", low=0),
            max_node_examples=f.integer("max_node_examples", None, low=1),
            rule=f.text("rule"),
        )


@dataclass(frozen=True)
class Guarantee:
    """The certificate's guarantee as data: what the release's algorithm spent on its rows
    (``algorithm_epsilon``, ``algorithm_delta``), carried to one change of ``unit`` through the
    group-privacy steps of ``derivation`` (each ``{"step": ..., "k": k}``)."""

    epsilon: float
    delta: float
    neighbouring_relation: str
    unit: str
    algorithm_epsilon: float
    algorithm_delta: float
    derivation: tuple[dict[str, Any], ...] = ()

    @classmethod
    def read(cls, f: _Fields) -> Guarantee:
        steps = f._get("derivation", [])
        if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
            raise f._bad("derivation", "a list of JSON objects", steps)
        return cls(
            epsilon=f.number("epsilon", low=0),
            delta=f.number("delta", low=0, high=1),
            neighbouring_relation=f.text("neighbouring_relation", choices=("replace-one", "add-remove-one")),
            unit=f.text("unit", choices=("row", "example", "user")),
            algorithm_epsilon=f.number("algorithm_epsilon", low=0),
            algorithm_delta=f.number("algorithm_delta", low=0, high=1),
            derivation=tuple(dict(s) for s in steps),
        )


@dataclass(frozen=True)
class Certificate:
    """The privacy certificate of a release (every field: the release specification)."""

    mechanism: str
    epsilon: float
    delta: float
    neighbouring_relation: str
    privacy: str
    proper: bool
    accuracy_guarantee_holds: bool | None
    randomness: str
    library_version: str
    privacy_unit: str = "example"
    user_contribution_bound: int | None = None
    window: WindowInfo | None = None
    sample_size: int | None = None
    ledger_entry_id: str | None = None
    ledger_id: str | None = None
    ledger_epoch: int | None = None
    composition: str = "sequential"
    level: int | None = None
    lifetime: LifetimeBound | None = None
    publication: Publication | None = None
    epsilon_budget_remaining: float | None = None
    delta_budget_remaining: float | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    dp_outputs: dict[str, Any] = field(default_factory=dict)
    theorem_sample_size: float | None = None
    theorem_sample_size_log10: float | None = None
    guarantee: Guarantee | None = None  # schema version 4 on

    @classmethod
    def read(cls, f: _Fields) -> Certificate:
        window, lifetime, publication = f.child("window"), f.child("lifetime"), f.child("publication")
        guarantee = f.child("guarantee")
        return cls(
            mechanism=f.text("mechanism"),
            epsilon=f.number("epsilon", low=0),
            delta=f.number("delta", low=0, high=1),
            neighbouring_relation=f.text("neighbouring_relation", choices=("replace-one", "add-remove-one")),
            privacy=f.text("privacy", choices=("information-theoretic", "computational")),
            proper=f.boolean("proper"),
            accuracy_guarantee_holds=f.boolean("accuracy_guarantee_holds", None),
            randomness=f.text("randomness", choices=("secure", "seeded")),
            library_version=f.text("library_version"),
            privacy_unit=f.text("privacy_unit", "example", choices=("example", "user")),
            user_contribution_bound=f.integer("user_contribution_bound", None, low=1),
            window=None if window is None else WindowInfo.read(window),
            sample_size=f.integer("sample_size", None, low=0),
            ledger_entry_id=f.text("ledger_entry_id", None),
            ledger_id=f.text("ledger_id", None),
            ledger_epoch=f.integer("ledger_epoch", None, low=0),
            composition=f.text(
                "composition", "sequential", choices=("sequential", "tree", "individual-filter")
            ),
            level=f.integer("level", None, low=0),
            lifetime=None if lifetime is None else LifetimeBound.read(lifetime),
            publication=None if publication is None else Publication.read(publication),
            epsilon_budget_remaining=f.number("epsilon_budget_remaining", None),
            delta_budget_remaining=f.number("delta_budget_remaining", None),
            parameters=f.mapping("parameters"),
            dp_outputs=f.mapping("dp_outputs"),
            theorem_sample_size=f.number("theorem_sample_size", None, low=0),
            theorem_sample_size_log10=f.number("theorem_sample_size_log10", None),
            guarantee=None if guarantee is None else Guarantee.read(guarantee),
        )


class Release:
    """A published private hypothesis with its certificate; ``predict`` evaluates it.

    Build one with :meth:`from_json` (the bytes as published, or their parsed object).
    """

    def __init__(self, data: Mapping[str, Any], published: bytes | None = None) -> None:
        top = _Fields(data, "release")
        self.data: dict[str, Any] = dict(data)
        self.schema_version: int = top.integer("schema_version", 1, low=1)
        self.stream_id: str = top.text("stream_id")
        self.hypothesis_class: str = top.text("hypothesis_class")
        certificate = top.child("certificate")
        if certificate is None:
            raise ReleaseFormatError("release.certificate is missing")
        self.certificate = Certificate.read(certificate)
        self.hypothesis = model_from_dict(data.get("hypothesis"))
        self.encoder = _columns_of(self.certificate)
        evaluations = data.get("evaluations", [])
        if not isinstance(evaluations, list):
            raise ReleaseFormatError(f"release.evaluations must be a list, got {evaluations!r}"[:300])
        #: The private error estimates of earlier releases scored on this release's window.
        self.evaluations: list[Evaluation] = [
            Evaluation.read(_Fields(e, f"release.evaluations[{i}]")) for i, e in enumerate(evaluations)
        ]
        self._published = published

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> Release:
        """Read a release; ``ReleaseFormatError`` (a ValueError) if it is not one."""
        if isinstance(data, Mapping):
            return cls(data)
        raw = data.encode() if isinstance(data, str) else bytes(data)
        try:
            parsed = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReleaseFormatError(f"a release is a JSON object: {exc}") from None
        return cls(parsed, raw)

    @property
    def level(self) -> int:
        """The release's level in the release tree (0: one window; a release without one is a window)."""
        return self.certificate.level or 0

    @property
    def last_window(self) -> int | None:
        """The index of the last level-0 window the release covers, if its certificate says."""
        window = self.certificate.window
        return None if window is None else window.last_window

    @property
    def ledger_entry_id(self) -> str | None:
        return self.certificate.ledger_entry_id

    @property
    def published_at(self) -> datetime | None:
        """When the release was published: its signed ``publication.scheduled_at`` (None for a
        release without one). Signed, so a cache or a replay cannot make an old release look new.

        >>> data = {**EXAMPLE, "certificate": {**EXAMPLE["certificate"], "publication": {
        ...     "scheduled_at": "2026-12-02T12:00:00Z", "publish_delay_seconds": 5.0, "rule": "..."}}}
        >>> Release.from_json(data).published_at.isoformat()
        '2026-12-02T12:00:00+00:00'
        """
        publication = self.certificate.publication
        if publication is None:
            return None
        try:
            moment = datetime.fromisoformat(publication.scheduled_at.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)

    def age_seconds(self, now: datetime | None = None) -> float | None:
        """How long ago the release was published (:attr:`published_at`), by ``now`` (default: this
        machine's clock): how stale the hypothesis a subscriber holds is. None if unknown."""
        published = self.published_at
        if published is None:
            return None
        return ((now or datetime.now(UTC)) - published).total_seconds()

    @property
    def hypothesis_dict(self) -> dict[str, Any]:
        """The ``hypothesis`` field as published."""
        return dict(self.data["hypothesis"])

    def describe_hypothesis(self) -> str:
        """The hypothesis in words, e.g. ``predicts 1 for x ≥ 14,577``."""
        return describe(self.data["hypothesis"])

    def predict(self, x: Any) -> Any:
        """The released hypothesis at a point (an int, or one feature vector) or at many points
        (an array of ints, or an ``(n, d)`` array of feature vectors): a label or an array of labels.

        A tabular stream's release also takes a row (a mapping of cells by column name) or a list of
        rows, encoded by the columns its certificate states (:attr:`encoder`); a row the encoder
        refuses raises :class:`~privstream_client.tabular.RowError`."""
        if self.encoder is not None:
            if isinstance(x, Mapping):
                return self.hypothesis.predict(self.encoder.encode(x))
            if isinstance(x, list | tuple) and x and all(isinstance(row, Mapping) for row in x):
                return self.hypothesis.predict(self.encoder.encode_many(x))
        return self.hypothesis.predict(x)

    def error_on(self, xs: Any, ys: Any) -> float:
        """Fraction of ``(xs, ys)`` the hypothesis gets wrong."""
        if len(xs) == 0:
            raise ValueError("no examples to evaluate on")
        return float(np.mean(np.asarray(self.predict(np.asarray(xs))) != np.asarray(ys)))

    def to_json(self) -> str:
        """The release as published (when read from bytes), else its JSON."""
        if self._published is not None:
            return self._published.decode()
        return json.dumps(self.data, separators=(",", ":"), ensure_ascii=False)

    def digest(self) -> str:
        """SHA-256 (hex) of the release's bytes: what identifies one release."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def __repr__(self) -> str:
        c = self.certificate
        return (
            f"Release(stream={self.stream_id!r}, entry={c.ledger_entry_id}, level={self.level}, "
            f"epsilon={c.epsilon})"
        )


def _columns_of(certificate: Certificate) -> TabularEncoder | None:
    """The encoder of the columns a tabular stream's certificate states (None for other streams)."""
    columns = certificate.parameters.get("columns")
    if columns is None:
        return None
    if not isinstance(columns, list):
        raise ReleaseFormatError("release.certificate.parameters.columns must be a list of columns")
    try:
        return TabularEncoder.from_dicts(columns)
    except ColumnError as exc:
        raise ReleaseFormatError(f"release.certificate.parameters.columns: {exc}") from None


def describe_release(release: Release) -> str:
    """One line for a person: entry, level, the hypothesis in words, ε and δ, n where public, and
    the lifetime bound.

    >>> describe_release(Release.from_json(EXAMPLE))
    'release None of clicks (level 0): predicts 1 for x ≥ 14,577 (ε=0.5, δ=0, lifetime ε 1 of 1 per example)'
    """
    c = release.certificate
    n = "" if c.sample_size is None else f", n={c.sample_size}"
    life = (
        ""
        if c.lifetime is None
        else f", lifetime ε {c.lifetime.epsilon:g} of {c.lifetime.epsilon_budget:g} per {c.privacy_unit}"
    )
    return (
        f"release {c.ledger_entry_id} of {release.stream_id} (level {release.level}): "
        f"{release.describe_hypothesis()} (ε={c.epsilon:g}, δ={c.delta:g}{n}{life})"
    )


def certificate_problem(release: Release) -> str | None:
    """Why a release's certificate cannot be a privstream worker's, or None: ε not positive, no
    mechanism, a guarantee beyond the certificate's charged (ε, δ), ε or the lifetime bound over the
    lifetime budget, a level beyond the tree's.

    A signature proves who published a release, not that its worker was configured soundly (or
    that its key was not stolen): these checks are cheap and no real release fails them.

    >>> import copy
    >>> def check(**changes):
    ...     data = copy.deepcopy(EXAMPLE)
    ...     data["certificate"].update(changes)
    ...     return certificate_problem(Release.from_json(data))
    >>> check() is None
    True
    >>> check(epsilon=0.0), check(mechanism="none")
    ('epsilon 0 is not positive', "mechanism 'none'")
    >>> check(epsilon=1000.0), check(level=20)
    ('epsilon 1000 exceeds the lifetime budget 1', 'level 20 is beyond the top level 1')
    >>> check(epsilon=0.25)
    'the guarantee (0.5, 0) exceeds the charge (0.25, 0)'

    """
    c = release.certificate
    if not (math.isfinite(c.epsilon) and c.epsilon > 0):
        return f"epsilon {c.epsilon:g} is not positive"
    if c.mechanism.strip().lower() in ("", "none", "null"):
        return f"mechanism {c.mechanism!r}"
    slack = 1 + 1e-9  # the sums are floats
    g = c.guarantee
    if g is not None and (g.epsilon > c.epsilon * slack or g.delta > c.delta * slack + 1e-300):
        return f"the guarantee ({g.epsilon:g}, {g.delta:g}) exceeds the charge ({c.epsilon:g}, {c.delta:g})"
    bound = c.lifetime
    if bound is None:
        return None
    if c.epsilon > bound.epsilon_budget * slack:
        return f"epsilon {c.epsilon:g} exceeds the lifetime budget {bound.epsilon_budget:g}"
    if bound.epsilon > bound.epsilon_budget * slack:
        return f"the lifetime bound {bound.epsilon:g} exceeds the lifetime budget {bound.epsilon_budget:g}"
    level = release.level
    if level > bound.top_level:
        return f"level {level} is beyond the top level {bound.top_level}"
    if level < len(bound.level_epsilon) and c.epsilon > bound.level_epsilon[level] * slack:
        return f"epsilon {c.epsilon:g} exceeds level {level}'s {bound.level_epsilon[level]:g}"
    return None


#: Which releases a subscriber takes: ``"best"``, ``"all"`` or one level (an int >= 0).
LevelChoice: TypeAlias = Literal["best", "most-accurate", "all"] | int

_NAMED_LEVELS: tuple[Literal["best", "most-accurate", "all"], ...] = ("best", "most-accurate", "all")


def check_level(level: object) -> LevelChoice:
    """A valid level choice, or ``ValueError`` naming the choices.

    >>> check_level("best"), check_level("most-accurate"), check_level(3)
    ('best', 'most-accurate', 3)
    >>> check_level(-1)
    Traceback (most recent call last):
    ...
    ValueError: level must be 'best', 'most-accurate', 'all' or a level >= 0, got -1
    """
    for name in _NAMED_LEVELS:
        if level == name:
            return name
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    raise ValueError(f"level must be 'best', 'most-accurate', 'all' or a level >= 0, got {level!r}")


class ReleaseSelector:
    """Decides, release by release in publication order, which ones a subscriber gets.

    Each release once (re-publications after a crash are dropped), and only a fresh one of the
    deployment (:class:`~privstream_client.freshness.Freshness`: newer than the release held of
    its level, of the pinned ledger), filtered by ``level`` (the module docstring). ``"best"``
    takes a release whose level is at least the highest held so far: a level-1 release replaces
    level 0 for good, and an older node of a level published late is stale.

    >>> best = ReleaseSelector("best")  # (release, level, last window) in publication order
    >>> [best.admits(*r) for r in [("1", 0, 0), ("2", 0, 1), ("3", 1, 1), ("3", 1, 1), ("4", 0, 2)]]
    [True, True, True, False, False]
    >>> best.admits("5", 1, 0), best.refusal("5", 1, 0), best.refusal("6", 0, 1)
    (False, 'stale', 'stale')
    >>> ReleaseSelector(0).admits("3", 1, 1)
    False
    """

    #: ``"most-accurate"``: how many recent releases are kept to be chosen once their estimate arrives.
    KEPT = 64

    def __init__(
        self, level: LevelChoice = "best", freshness: Freshness | None = None, *, fresh_only: bool = True
    ):
        self.level = check_level(level)
        self.freshness = freshness if freshness is not None else Freshness()
        # Unverified releases (fresh_only=False) sign nothing to judge freshness by: every one of
        # the level chosen is taken, so a forged one cannot hide a real one ("best" still orders).
        self.fresh_only = fresh_only
        self._seen: set[str] = set()
        self._recent: dict[str, Release] = {}  # most-accurate: by ledger entry id, oldest first
        self._scored: dict[int, tuple[Release, Evaluation]] = {}  # the newest scored release per level
        self._given: Release | None = None

    def choose(self, release: Release, published: bytes | None = None) -> Release | None:
        """The release the subscriber gets now that ``release`` was published (None: none):
        :meth:`pick` on :meth:`judge`'s verdict.

        >>> def release(window, error=None):
        ...     certificate = {**EXAMPLE["certificate"], "ledger_entry_id": f"s/{window}",
        ...                    "window": {"window_id": f"c4-L0-{window}", "kind": "count",
        ...                               "first_window": window, "last_window": window}}
        ...     data = {**EXAMPLE, "certificate": certificate}
        ...     if error is not None:  # an estimate of the previous window's release
        ...         estimate = {"error": error, "low": 0.0, "high": 1.0}
        ...         data["evaluations"] = [{"release": f"s/{window - 1}", "level": 0, "window_id": "w",
        ...                                 "epsilon": 0.5, "confidence": 0.95, "estimate": estimate}]
        ...     return Release.from_json(data)
        >>> chooser = ReleaseSelector("most-accurate")
        >>> [getattr(chooser.choose(r), "ledger_entry_id", None)
        ...  for r in [release(0), release(1, error=0.3), release(2, error=0.1), release(3, error=0.2)]]
        ['s/0', None, 's/1', 's/2']
        """
        return self.pick(release, self.judge(release, published))

    def pick(self, release: Release, verdict: str | None) -> Release | None:
        """The release the subscriber gets, given :meth:`judge`'s ``verdict`` on ``release``: the
        release itself if taken; with ``"most-accurate"``, the release of lowest estimated error
        when the estimates a fresh ``release`` carries change the choice (as ``"best"`` before any)."""
        if self.level != "most-accurate":
            return release if verdict is None else None
        if verdict not in (None, "not_selected"):  # a duplicate, or not fresh
            return None
        for evaluation in release.evaluations:
            scored = self._recent.get(evaluation.release)
            standing = self._scored.get(evaluation.level)
            if scored is not None and (standing is None or _after(scored, standing[0])):
                self._scored[evaluation.level] = (scored, evaluation)
        if release.ledger_entry_id is not None:
            self._recent[release.ledger_entry_id] = release
            while len(self._recent) > self.KEPT:
                del self._recent[next(iter(self._recent))]
        if not self._scored:  # no estimate yet: as "best" (the verdict says)
            if verdict is None:
                self._given = release
                return release
            return None
        chosen, _ = min(self._scored.values(), key=lambda pair: (pair[1].error, -pair[1].level))
        if chosen is self._given:
            return None
        self._given = chosen
        return chosen

    def accept(self, release: Release, published: bytes | None = None) -> bool:
        """Whether the subscriber gets ``release`` (the next one published, as the bytes
        ``published``). A release is known by its bytes: a re-publication after a crash is the
        same bytes, while two different releases never share them, whatever entry id they claim."""
        return self.judge(release, published) is None

    def judge(self, release: Release, published: bytes | None = None) -> str | None:
        """None if the subscriber gets ``release``; else why not: ``"duplicate"`` (taken before),
        ``"foreign_deployment"`` or ``"stale"`` (refused: not fresh), ``"not_selected"`` (fresh,
        but not of the level chosen)."""
        digest = release.digest() if published is None else hashlib.sha256(published).hexdigest()
        mark = Held.of(release, digest)
        return self._judge(release.level, mark, release.certificate.ledger_id)

    def admits(self, release: str, level: int, last_window: int | None) -> bool:
        """:meth:`accept` on a release's identity (its digest), level and last window (None: unknown)."""
        return self.refusal(release, level, last_window) is None

    def refusal(self, release: str, level: int, last_window: int | None) -> str | None:
        """:meth:`judge` on a release's identity, level and last window (one window family)."""
        return self._judge(level, Held(release, "", last_window), None)

    def _judge(self, level: int, mark: Held, ledger_id: str | None) -> str | None:
        if mark.digest in self._seen or self.freshness.holds(level, mark.digest):
            return "duplicate"  # the same release re-published after a crash
        top = max(self.freshness.held, default=-1)  # the highest level held before this one
        problem = self.freshness.judge_mark(level, mark, ledger_id)
        ordered = self.level in ("best", "most-accurate")  # most-accurate: as best before estimates
        if problem is not None and (self.fresh_only or ordered):
            return problem
        self._seen.add(mark.digest)
        if self.level == "all" or self.level == level:
            return None
        return None if ordered and level >= top else "not_selected"


def _after(release: Release, other: Release) -> bool:
    """Whether ``release`` covers later windows than ``other`` (an unknown window is the oldest)."""
    mine, theirs = release.last_window, other.last_window
    return (-1 if mine is None else mine) >= (-1 if theirs is None else theirs)


#: A small release, for the examples.
EXAMPLE: dict[str, Any] = {
    "schema_version": 4,
    "stream_id": "clicks",
    "hypothesis_class": "thresholds:65536",
    "hypothesis": {"kind": "runs", "domain": 65536, "first": 0, "changes": [14577]},
    "certificate": {
        "mechanism": "exponential-mechanism",
        "epsilon": 0.5,
        "delta": 0.0,
        "neighbouring_relation": "replace-one",
        "guarantee": {
            "epsilon": 0.5,
            "delta": 0.0,
            "neighbouring_relation": "replace-one",
            "unit": "example",
            "algorithm_epsilon": 0.5,
            "algorithm_delta": 0.0,
            "derivation": [],
        },
        "privacy": "information-theoretic",
        "proper": True,
        "accuracy_guarantee_holds": None,
        "randomness": "secure",
        "library_version": "0.1.0",
        "level": 0,
        "lifetime": {
            "epsilon": 1.0,
            "delta": 0.0,
            "epsilon_budget": 1.0,
            "delta_budget": 0.0,
            "top_level": 1,
            "level_epsilon": [0.5, 0.5],
            "rule": "parallel over the disjoint nodes of a level, sequential over the levels",
        },
    },
}
