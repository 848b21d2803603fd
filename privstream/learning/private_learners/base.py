"""The interface of private learners: :class:`LearnerResult`, :class:`PrivateLearner`, :func:`make_learner`.

A private learner maps a labelled sample to a hypothesis with a differential-privacy guarantee.
The result states that guarantee and, separately, whether the accuracy theorem of the learner
holds (theory mode vs practical mode): privacy never depends on the sample size,
accuracy does.

**Two modes, chosen by ``expected_size``** (the same keyword on every learner, sanitizer and
vector learner; :func:`check_expected_size`, :func:`neighbouring_relation`):

* ``expected_size=None``: n is public (count windows at the example level, offline runs). The
  guarantee holds under *replace-one* neighbours (two samples of the same size that differ in
  one example), and parameters may be derived from ``len(xs)``.
* ``expected_size=m`` (an int >= 1, set by the operator): n is private (time windows, user
  level). The guarantee holds under *add/remove-one* neighbours (one sample has one example
  more) for every actual n, 0 included, and everything the result reports -- ``parameters``,
  ``theorem_sample_size``, ``accuracy_guarantee_holds``, ``mechanism``, ``epsilon``, ``delta``,
  ``privacy``, the keys of ``dp_outputs`` and the *form* of the output -- is a function of the
  configuration and m only. ``sample_size`` still holds the true n (for the trusted zone).

**How the two relations relate.** A replacement is a removal followed by an addition, so an
ε-DP mechanism under add/remove-one is 2ε-DP under replace-one (group privacy over two steps);
the converse fails outright: a mechanism that publishes n is 0-DP under replace-one and not DP
at all under add/remove. A mechanism analysed for one relation is therefore not automatically
private for the other at the same ε: each learner's docstring gives its add/remove argument.

Every learner returns a valid release on zero examples, in both modes, and nothing that depends
on the data may make ``fit`` raise (a refused or failed release would itself leak the data).

>>> learner = make_learner("generic")
>>> learner.name
'generic'
>>> neighbouring_relation(None), neighbouring_relation(check_expected_size(500))
('replace-one', 'add-remove-one')
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

from privstream.learning import algorithms as registry
from privstream.learning.domain import as_labels, as_points
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.guarantees import Guarantee
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.randomness import RandomSource

__all__ = [
    "INFORMATION_THEORETIC",
    "LEARNERS",
    "FitInputs",
    "FitParameters",
    "LearnerResult",
    "NeighbouringRelation",
    "PrivacyKind",
    "PrivateLearner",
    "PrivateRelease",
    "check_accuracy_parameter",
    "check_expected_size",
    "check_fit",
    "check_fit_parameters",
    "check_privacy_parameters",
    "check_sample",
    "make_learner",
    "neighbouring_relation",
]

#: The neighbouring relation a result's (ε, δ) holds under (the certificate's words).
NeighbouringRelation = Literal["replace-one", "add-remove-one"]
#: ``"information-theoretic"``: the guarantee holds against any adversary, given ideal randomness
#: from the :class:`RandomSource`; ``"computational"``: it also rests on a cryptographic assumption
#: beyond the source (e.g. a keyed PRF expanding a secret key into the noise of many cells).
PrivacyKind = Literal["information-theoretic", "computational"]
INFORMATION_THEORETIC: PrivacyKind = "information-theoretic"


@dataclass(frozen=True, kw_only=True)
class PrivateRelease:
    """What every private release states about itself: the fields its certificate is built from.

    ``epsilon``/``delta`` are the guarantee of this run under ``neighbouring_relation``, which may
    be stronger than what the caller allowed (a pure-DP algorithm reports ``delta = 0``).
    ``theorem_sample_size`` is the n at which the cited accuracy theorem holds (None: no finite
    size); ``accuracy_guarantee_holds`` compares it with n (``expected_size`` when n is private),
    or is None when deciding it would need a private quantity. It speaks about the theorem's
    assumptions (e.g. realizable data), which a private algorithm cannot check. ``parameters`` are
    functions of the configuration (and of n only when n is public); ``dp_outputs`` are values
    computed by the release's DP mechanisms (noisy counts, selected queries): publishable
    post-processing, with keys fixed by the configuration. ``privacy`` says whether the guarantee
    is information-theoretic or computational. ``sample_size`` is the true n (trusted zone only
    where n is private).
    """

    mechanism: str
    epsilon: float
    delta: float
    sample_size: int
    parameters: dict[str, Any]
    theorem_sample_size: int | None
    accuracy_guarantee_holds: bool | None
    neighbouring_relation: NeighbouringRelation = "replace-one"
    privacy: PrivacyKind = INFORMATION_THEORETIC
    dp_outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def privacy_guarantee(self) -> Guarantee:
        """This run's guarantee as data: (ε, δ) under its relation, for one row of its input.

        The release path checks it against the release's charge before publishing
        (:func:`privstream.learning.guarantees.shortfall`).
        """
        return Guarantee(epsilon=self.epsilon, delta=self.delta, relation=self.neighbouring_relation)

    def certificate_fields(self) -> dict[str, Any]:
        """The certificate's algorithm-specific fields (the caller adds window, unit, ledger, ...)."""
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sample_size": self.sample_size,
            "accuracy_guarantee_holds": self.accuracy_guarantee_holds,
            "theorem_sample_size": self.theorem_sample_size,
            "parameters": dict(self.parameters),
            "dp_outputs": dict(self.dp_outputs),
            "neighbouring_relation": self.neighbouring_relation,
            "privacy": self.privacy,
        }

    def published_fields(self) -> dict[str, Any]:
        """The release's DP output as published beside its certificate (``hypothesis``, or
        ``distribution`` and ``labelled``); each kind of result says how."""
        raise NotImplementedError(f"{type(self).__name__} does not say what it publishes")


@dataclass(frozen=True, kw_only=True)
class LearnerResult(PrivateRelease):
    """One private release of a learner on a finite class: its ``hypothesis`` and guarantees
    (:class:`PrivateRelease`); ``proper`` when the hypothesis is a member of the class."""

    hypothesis: Hypothesis
    proper: bool

    def certificate_fields(self) -> dict[str, Any]:
        return {**super().certificate_fields(), "proper": self.proper}

    def published_fields(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis.to_dict()}


@runtime_checkable
class PrivateLearner(Protocol):
    """A differentially-private learner; ``fit`` draws all its randomness from ``rng``.

    ``rng=None`` means a fresh cryptographically secure source (production); pass a seeded
    :class:`RandomSource` only for tests and experiments (reproducible, hence not private).
    ``expected_size``: None when n is public (replace-one), the operator's m when n is private
    (add/remove-one; see the module docstring).
    """

    name: str

    def fit(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray,
        *,
        epsilon: float,
        delta: float = 0.0,
        alpha: float = 0.25,
        beta: float = 0.25,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> LearnerResult: ...


#: Learners by name -> ``"module:attribute"`` of their factory: the registry's ``learner`` entry
#: points (:mod:`privstream.learning.algorithms`), imported on first use.
LEARNERS: MutableMapping[str, str] = registry.names("learner")


def make_learner(name: str, **params: Any) -> PrivateLearner:
    """The learner registered as ``name``, built with ``params``.

    >>> make_learner("svm")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown private learner 'svm'; known learners: generic...
    """
    if not isinstance(name, str) or name not in LEARNERS:
        raise ValueError(f"unknown private learner {name!r}; known learners: {', '.join(sorted(LEARNERS))}")
    # the registry names the factory by text: its result is what the registry promises
    learner: PrivateLearner = registry.load("learner", name)(**params)
    return learner


# -- shared input validation ------------------------------------------------------------------


def _finite_real(x: object, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
        raise PrivacyParameterError(f"{name} must be a real number, got {x!r}")
    f = float(x)
    if not math.isfinite(f):
        raise PrivacyParameterError(f"{name} must be finite, got {x!r}")
    return f


def check_privacy_parameters(epsilon: object, delta: object) -> tuple[float, float]:
    """``(epsilon, delta)`` as floats, or :class:`PrivacyParameterError` unless ε > 0 and 0 <= δ < 1."""
    eps = _finite_real(epsilon, "epsilon")
    if eps <= 0:
        raise PrivacyParameterError(f"epsilon must be > 0, got {epsilon!r}")
    dlt = _finite_real(delta, "delta")
    if not 0 <= dlt < 1:
        raise PrivacyParameterError(f"delta must be in [0, 1), got {delta!r}")
    return eps, dlt


def check_expected_size(expected_size: object) -> int | None:
    """``expected_size`` as None (n public) or an int m >= 1 (n private); a configuration check.

    >>> check_expected_size(0)
    Traceback (most recent call last):
    ...
    ValueError: expected_size must be None (n public) or an int >= 1 (n private), got 0
    """
    if expected_size is None:
        return None
    if (
        isinstance(expected_size, bool)
        or not isinstance(expected_size, int | np.integer)
        or expected_size < 1
    ):
        raise ValueError(
            f"expected_size must be None (n public) or an int >= 1 (n private), got {expected_size!r}"
        )
    return int(expected_size)


def neighbouring_relation(expected_size: int | None) -> NeighbouringRelation:
    """The relation a release's guarantee holds under: replace-one iff n is public."""
    return "replace-one" if expected_size is None else "add-remove-one"


def check_accuracy_parameter(value: object, name: str) -> float:
    """An accuracy (alpha) or confidence (beta) parameter in the open interval (0, 1)."""
    f = _finite_real(value, name)
    if not 0 < f < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return f


def check_sample(hclass: HypothesisClass, xs: object, ys: object) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(xs, ys)``: points in the class's domain, labels 0/1, equal lengths.

    Raises :class:`~privstream.learning.errors.DomainError` / ``LabelError`` (``ValueError``s).
    """
    if not isinstance(hclass, HypothesisClass):
        raise TypeError(f"hclass must be a HypothesisClass, got {type(hclass).__name__}")
    points = as_points(xs, hclass.domain_size)
    labels = as_labels(ys, points.shape[0])
    return points, labels


class FitParameters(NamedTuple):
    """A fit's validated privacy and accuracy parameters and its mode (``expected_size``)."""

    epsilon: float
    delta: float
    alpha: float
    beta: float
    expected_size: int | None


def check_fit_parameters(
    epsilon: object, delta: object, alpha: object, beta: object, expected_size: object = None
) -> FitParameters:
    """The parameters every ``fit`` takes, validated in one place: ε > 0 and 0 <= δ < 1
    (:class:`PrivacyParameterError`), α and β in (0, 1), ``expected_size`` None or an int >= 1.

    >>> check_fit_parameters(1, 0, 0.1, 0.1)
    FitParameters(epsilon=1.0, delta=0.0, alpha=0.1, beta=0.1, expected_size=None)
    """
    eps, dlt = check_privacy_parameters(epsilon, delta)
    a = check_accuracy_parameter(alpha, "alpha")
    b = check_accuracy_parameter(beta, "beta")
    return FitParameters(eps, dlt, a, b, check_expected_size(expected_size))


class FitInputs(NamedTuple):
    """A learner's validated ``fit`` arguments: its parameters, then the sample."""

    epsilon: float
    delta: float
    alpha: float
    beta: float
    expected_size: int | None
    points: np.ndarray
    labels: np.ndarray


def check_fit(
    hclass: HypothesisClass,
    xs: object,
    ys: object,
    *,
    epsilon: object,
    delta: object,
    alpha: object,
    beta: object,
    expected_size: object,
) -> FitInputs:
    """The opening of every finite-class learner's ``fit``: :func:`check_fit_parameters`, then
    :func:`check_sample`."""
    return FitInputs(
        *check_fit_parameters(epsilon, delta, alpha, beta, expected_size), *check_sample(hclass, xs, ys)
    )
