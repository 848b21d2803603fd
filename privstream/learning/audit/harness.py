"""Empirical privacy audit: an honest lower confidence bound on epsilon.

Method (black-box, on the *production* code path with a seeded :class:`RandomSource`):

1. Run the mechanism ``samples`` times on each dataset of a neighbouring pair (d0, d1) and map
   every output to a bin with ``discretise``.
2. Split the runs of each dataset in halves. On the *selection* half, choose a direction
   (d0 vs d1 or d1 vs d0) and an event E (a set of bins): the prefixes of the bins sorted by
   empirical likelihood ratio (Neyman-Pearson sets) and, for ordered bins, all tails.
3. On the independent *evaluation* half, for that single event only:
   p_hi = Clopper-Pearson upper bound of Pr[M(d_b) ∈ E], p_lo = lower bound of Pr[M(d_a) ∈ E],
   each one-sided at level (1 - confidence)/2, and
   ``epsilon_lower_bound = ln((p_lo - delta) / p_hi)`` (0 if p_lo <= delta).

Because the event is fixed before the evaluation half is looked at, with probability at least
``confidence`` both bounds hold and then epsilon_lower_bound <= ln((Pr_a[E] - δ)/Pr_b[E]) <= ε_true
for any (ε_true, δ)-DP mechanism. An audit *fails* (``AuditResult.passed`` is False) when the lower
bound exceeds the claimed ε: the false-alarm rate for a correct mechanism is at most
1 - confidence (default 1e-3) per audit.

:func:`privacy_loss` and :func:`hockey_stick` are the exact checks, for mechanisms whose output
probabilities are computable.

An :class:`AuditSpec` names a production mechanism with its claim, its worst-case neighbouring
pair and its deliberately broken variants (the positive controls that the audit must catch);
:func:`run_audit` runs one of them. Each mechanism, learner and sanitizer declares its specs next
to its code; :mod:`privstream.learning.audit.registry` finds them by name (``privstream audit NAME``).
This module imports no mechanism and no learner.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.ordering import natural_order
from privstream.learning.randomness import RandomSource, seeded

__all__ = [
    "AuditResult",
    "AuditSpec",
    "MechanismFactory",
    "audit",
    "clopper_pearson",
    "hockey_stick",
    "privacy_loss",
    "run_audit",
]

#: Builds a release function ``dataset -> output`` drawing from the given source.
MechanismFactory = Callable[[RandomSource], Callable[[Any], Any]]

_MAX_PREFIX_EVENTS = 64


# -- exact binomial confidence bounds -------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            return h
    raise ArithmeticError("incomplete beta continued fraction did not converge")


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_bt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    bt = math.exp(log_bt)
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * _betacf(a, b, x) / a
    return 1.0 - bt * _betacf(b, a, 1.0 - x) / b


def _beta_quantile(q: float, a: float, b: float) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(100):  # bisection to ~1e-30; I_x is increasing in x
        mid = (lo + hi) / 2
        if _betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds: Pr[p < lo] <= alpha and Pr[p > hi] <= alpha."""
    if not (0 <= k <= n and n >= 1 and 0 < alpha < 1):
        raise PrivacyParameterError(f"invalid binomial bound request k={k}, n={n}, alpha={alpha}")
    lo = 0.0 if k == 0 else _beta_quantile(alpha, k, n - k + 1)
    hi = 1.0 if k == n else _beta_quantile(1 - alpha, k + 1, n - k)
    return lo, hi


def _wilson_lower(k: int, n: int, z: float = 3.0) -> float:
    """Cheap lower bound used only to *choose* the event on the selection half."""
    p = k / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z * z / n))


def _wilson_upper(k: int, n: int, z: float = 3.0) -> float:
    p = k / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + margin) / (1 + z * z / n))


def _epsilon_bound(p_lo: float, p_hi: float, delta: float) -> float:
    if p_lo <= delta:
        return 0.0
    return max(0.0, math.log((p_lo - delta) / p_hi))


# -- exact checks ----------------------------------------------------------------------------------


def privacy_loss(p: Mapping[Hashable, float], q: Mapping[Hashable, float]) -> float:
    """max over outcomes of |ln p(o) - ln q(o)| for two discrete laws (inf if supports differ)."""
    worst = 0.0
    for o in set(p) | set(q):
        a, b = p.get(o, 0.0), q.get(o, 0.0)
        if a == 0.0 and b == 0.0:
            continue
        if a == 0.0 or b == 0.0:
            return math.inf
        worst = max(worst, abs(math.log(a) - math.log(b)))
    return worst


def hockey_stick(p: Mapping[Hashable, float], q: Mapping[Hashable, float], epsilon: float) -> float:
    """sup_E p(E) - e^ε q(E) = Σ_o max(0, p(o) - e^ε q(o)): the least δ for this pair and direction."""
    factor = math.exp(epsilon)
    return math.fsum(max(0.0, p.get(o, 0.0) - factor * q.get(o, 0.0)) for o in set(p) | set(q))


# -- the Monte Carlo audit -------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit. ``passed`` iff the honest lower bound does not exceed the claim."""

    name: str
    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    epsilon_estimate: float
    event: frozenset[Hashable]
    direction: str
    counts: tuple[int, int]
    samples: int
    confidence: float

    @property
    def passed(self) -> bool:
        return self.epsilon_lower_bound <= self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for the CLI); the event's bins are rendered with ``str``."""
        return {
            "name": self.name,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "epsilon_estimate": None if math.isinf(self.epsilon_estimate) else self.epsilon_estimate,
            "passed": self.passed,
            "event": sorted(str(o) for o in self.event),
            "direction": self.direction,
            "counts": list(self.counts),
            "samples": self.samples,
            "confidence": self.confidence,
        }

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "VIOLATION"
        return (
            f"{self.name}: claimed eps={self.claimed_epsilon:g} delta={self.claimed_delta:g}; "
            f"lower bound {self.epsilon_lower_bound:.3f} (estimate {self.epsilon_estimate:.3f}, "
            f"{self.confidence:.4g} confidence, {self.samples} runs/dataset) -> {verdict}"
        )


def _candidate_events(sel_a: Counter[Hashable], sel_b: Counter[Hashable]) -> list[frozenset[Hashable]]:
    bins = set(sel_a) | set(sel_b)
    # Neyman-Pearson: bins by decreasing (smoothed) likelihood ratio a/b
    ranked = sorted(bins, key=lambda o: (sel_a[o] + 0.5) / (sel_b[o] + 0.5), reverse=True)
    events = [frozenset(ranked[:j]) for j in range(1, min(len(ranked), _MAX_PREFIX_EVENTS) + 1)]
    ordered = natural_order(bins)
    if ordered is None:
        return events
    for j in range(1, len(ordered)):
        events.append(frozenset(ordered[j:]))
        events.append(frozenset(ordered[:j]))
    return events


def audit(
    mechanism: Callable[[Any], Any],
    pair: tuple[Any, Any],
    claimed: PrivacyGuarantee,
    *,
    discretise: Callable[[Any], Hashable] = lambda o: o,
    samples: int = 20_000,
    confidence: float = 0.999,
    name: str = "",
    progress: Callable[[float], None] | None = None,
) -> AuditResult:
    """Estimate an honest lower confidence bound on epsilon for ``mechanism`` on ``pair``.

    ``mechanism(dataset)`` performs one release (it must draw from a seeded source for
    reproducibility); ``samples`` runs are made per dataset, half to choose the event and half to
    bound it. ``confidence`` is the probability that the reported bound is valid. ``progress``, if
    given, is called with the fraction of runs done (about 200 times in all).
    """
    if samples < 4:
        raise PrivacyParameterError(f"samples must be >= 4, got {samples}")
    if not 0 < confidence < 1:
        raise PrivacyParameterError(f"confidence must be in (0, 1), got {confidence}")
    half = samples // 2
    total, step = 4 * half, max(1, half // 100)
    outputs: list[list[Hashable]] = []
    for i, d in enumerate(pair):
        runs: list[Hashable] = []
        for j in range(2 * half):
            runs.append(discretise(mechanism(d)))
            if progress is not None and j % step == 0:
                progress((i * 2 * half + j) / total)
        outputs.append(runs)
    selection = [Counter(o[:half]) for o in outputs]
    evaluation = [o[half:] for o in outputs]
    delta = claimed.delta

    best: tuple[float, int, frozenset[Hashable]] = (-math.inf, 0, frozenset())
    for a in (0, 1):
        sel_a, sel_b = selection[a], selection[1 - a]
        for event in _candidate_events(sel_a, sel_b):
            ka = sum(sel_a[o] for o in event)
            kb = sum(sel_b[o] for o in event)
            score = _epsilon_bound(_wilson_lower(ka, half), _wilson_upper(kb, half), delta)
            if score > best[0]:
                best = (score, a, event)
    _, a, event = best
    ka = sum(1 for o in evaluation[a] if o in event)
    kb = sum(1 for o in evaluation[1 - a] if o in event)
    alpha = (1 - confidence) / 2
    p_lo = clopper_pearson(ka, half, alpha)[0]
    p_hi = clopper_pearson(kb, half, alpha)[1]
    lower = _epsilon_bound(p_lo, p_hi, delta)
    if kb == 0:
        estimate = math.inf if ka / half > delta else 0.0
    else:
        estimate = _epsilon_bound(ka / half, kb / half, delta)
    return AuditResult(
        name=name,
        claimed_epsilon=claimed.epsilon,
        claimed_delta=delta,
        epsilon_lower_bound=lower,
        epsilon_estimate=estimate,
        event=event,
        direction="d0 vs d1" if a == 0 else "d1 vs d0",
        counts=(ka, kb),
        samples=2 * half,
        confidence=confidence,
    )


# -- audit specs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSpec:
    """A production mechanism, its claim, its worst-case pair and its broken variants.

    ``build`` and every ``broken`` factory take a :class:`RandomSource` and return a release
    function ``dataset -> output``; ``pair`` is a worst-case replace-one neighbouring pair; the
    broken variants make the same ``claimed`` promise and must be caught. ``exact`` (optional)
    returns the output laws on ``pair`` for the exact check.
    """

    name: str
    description: str
    claimed: PrivacyGuarantee
    build: MechanismFactory
    pair: tuple[Any, Any]
    discretise: Callable[[Any], Hashable]
    broken: Mapping[str, MechanismFactory] = field(default_factory=dict)
    samples: int = 20_000
    exact: Callable[[], tuple[Mapping[Hashable, float], Mapping[Hashable, float]]] | None = None


def run_audit(
    spec: AuditSpec,
    *,
    variant: str | None = None,
    samples: int | None = None,
    seed: int = 0,
    confidence: float = 0.999,
    progress: Callable[[float], None] | None = None,
) -> AuditResult:
    """Audit ``spec``'s production mechanism (``variant=None``) or one of its broken variants."""
    if variant is None:
        factory = spec.build
    elif variant in spec.broken:
        factory = spec.broken[variant]
    else:
        raise KeyError(f"{spec.name} has no variant {variant!r}; known: {sorted(spec.broken)}")
    release = factory(seeded(seed))
    label = spec.name if variant is None else f"{spec.name}[{variant}]"
    return audit(
        release,
        spec.pair,
        spec.claimed,
        discretise=spec.discretise,
        samples=samples or spec.samples,
        confidence=confidence,
        name=label,
        progress=progress,
    )
