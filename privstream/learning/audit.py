"""Empirical privacy audit: an honest lower confidence bound on epsilon (bayes_overview.md §C.6).

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

:data:`AUDITABLE_MECHANISMS` names every mechanism with its worst-case neighbouring pair and its
deliberately broken variants (the positive controls that the audit must catch); :func:`run_audit`
runs one of them (this is what ``privstream audit MECHANISM`` is meant to call).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.mechanisms import (
    AboveThreshold,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    StableHistogram,
)
from privstream.learning.privacy_errors import PrivacyParameterError
from privstream.learning.randomness import RandomSource, seeded

__all__ = [
    "AUDITABLE_MECHANISMS",
    "AuditResult",
    "AuditSpec",
    "MechanismFactory",
    "audit",
    "clopper_pearson",
    "hockey_stick",
    "permute_and_flip_law",
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
    try:
        ordered = sorted(bins)
    except TypeError:
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
) -> AuditResult:
    """Estimate an honest lower confidence bound on epsilon for ``mechanism`` on ``pair``.

    ``mechanism(dataset)`` performs one release (it must draw from a seeded source for
    reproducibility); ``samples`` runs are made per dataset, half to choose the event and half to
    bound it. ``confidence`` is the probability that the reported bound is valid.
    """
    if samples < 4:
        raise PrivacyParameterError(f"samples must be >= 4, got {samples}")
    if not 0 < confidence < 1:
        raise PrivacyParameterError(f"confidence must be in (0, 1), got {confidence}")
    half = samples // 2
    outputs = [[discretise(mechanism(d)) for _ in range(2 * half)] for d in pair]
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


# -- registry of auditable mechanisms ----------------------------------------------------------------


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
    )


def _clip(lo: int, hi: int, per_unit: int = 1) -> Callable[[Any], Hashable]:
    """Bins of width 1/per_unit, with the two tails lumped into the end bins."""
    return lambda x: min(max(math.floor(x * per_unit), lo), hi)


# Exact laws (floats) of the integer noises on a shared support [centres - reach, centres + reach],
# truncated where the omitted mass is < 1e-15.


def _dlap_law(scale: float, centre: int, centres: tuple[int, int]) -> dict[int, float]:
    q = math.exp(-1 / scale)
    reach = math.ceil(40 * scale) + 2
    support = range(min(centres) - reach, max(centres) + reach + 1)
    return {v: (1 - q) / (1 + q) * q ** abs(v - centre) for v in support}


def _dgauss_law(variance: float, centre: int, centres: tuple[int, int]) -> dict[int, float]:
    reach = math.ceil(9 * math.sqrt(variance)) + 2
    weights = {z: math.exp(-z * z / (2 * variance)) for z in range(-reach, reach + 1)}
    total = math.fsum(weights.values())
    support = range(min(centres) - reach, max(centres) + reach + 1)
    return {v: weights.get(v - centre, 0.0) / total for v in support}


def _dlap_tail(scale: float, k: int) -> float:
    """Pr[Z >= k] for the discrete Laplace."""
    q = math.exp(-1 / scale)
    return q**k / (1 + q) if k >= 1 else 1 - q ** (1 - k) / (1 + q)


# Datasets are tuples of records; each spec's query maps a dataset to the mechanism's input.


def _count(dataset: Sequence[int]) -> int:
    return sum(dataset)


def _laplace_spec(discrete: bool) -> AuditSpec:
    eps = 1.0
    cls: Any = DiscreteLaplaceMechanism if discrete else LaplaceMechanism

    def factory(epsilon: float, query_scale: int = 1) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = cls(epsilon, 1, rng=rng)
            return lambda d: m.release(query_scale * _count(d))

        return build

    name = "discrete_laplace" if discrete else "laplace"

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        t = float(DiscreteLaplaceMechanism(eps, 1).scale)
        return _dlap_law(t, 0, (0, 1)), _dlap_law(t, 1, (0, 1))

    return AuditSpec(
        name=name,
        description=f"{name}: count query (sensitivity 1), eps={eps}; pair: counts 0 vs 1",
        claimed=cls(eps, 1).guarantee(),
        build=factory(eps),
        pair=((0, 0, 0, 0), (0, 0, 0, 1)),
        discretise=_clip(-6, 7) if discrete else _clip(-12, 14, per_unit=2),
        broken={
            "noise_halved": factory(2 * eps),
            "sensitivity_understated": factory(eps, query_scale=2),  # true sensitivity 2, told 1
        },
        samples=20_000,
        exact=exact if discrete else None,
    )


def _gaussian_spec(discrete: bool) -> AuditSpec:
    # The audit tests one point (eps, delta) of the privacy profile; a large delta keeps the
    # events frequent enough for a CI-sized sample.
    eps, delta = 2.0, 0.05
    cls: Any = DiscreteGaussianMechanism if discrete else GaussianMechanism
    name = "discrete_gaussian" if discrete else "gaussian"

    def factory(epsilon: float, query_scale: int = 1, noise_scale: float = 1.0) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = cls(epsilon, delta, noise_scale, rng=rng)  # sensitivity argument scales sigma
            return lambda d: m.release(query_scale * _count(d))

        return build

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        var = float(DiscreteGaussianMechanism(eps, delta, 1).variance)
        return _dgauss_law(var, 0, (0, 1)), _dgauss_law(var, 1, (0, 1))

    return AuditSpec(
        name=name,
        description=f"{name}: count query (l2 sensitivity 1), eps={eps}, delta={delta}; counts 0 vs 1",
        claimed=cls(eps, delta, 1).guarantee(),
        build=factory(eps),
        pair=((0, 0, 0, 0), (0, 0, 0, 1)),
        discretise=_clip(-3, 4) if discrete else _clip(-12, 16, per_unit=4),
        broken={
            "noise_halved": factory(eps, noise_scale=0.5),
            "sensitivity_understated": factory(eps, query_scale=2),
        },
        samples=20_000,
        exact=exact if discrete else None,
    )


# Exponential mechanism pair: votes for candidate "A" (one hypothesis) or for the block "B" of
# ten hypotheses that agree on the data. Replacing one vote moves A's score by -1 and every B's
# by +1, the configuration in which exp(ε·Δscore/2) ratios and the normaliser both move against A.
_EM_BLOCK = 10
_VOTES = (("A", "A", "B"), ("A", "B", "B"))


def _vote_blocks(votes: Sequence[str]) -> list[tuple[int, int]]:
    return [(1, votes.count("A")), (_EM_BLOCK, votes.count("B"))]


def _vote_scores(votes: Sequence[str]) -> list[int]:
    return [score for size, score in _vote_blocks(votes) for _ in range(size)]


def _exponential_spec() -> AuditSpec:
    eps = 1.0

    def factory(epsilon: float) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = ExponentialMechanism(epsilon, rng=rng)
            return lambda d: m.select_block(_vote_blocks(d))

        return build

    def no_noise(rng: RandomSource) -> Callable[[Any], Any]:
        return lambda d: max(range(2), key=lambda i: _vote_blocks(d)[i][1])

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        m = ExponentialMechanism(eps)
        laws = [dict(enumerate(m.block_probabilities(_vote_blocks(d)))) for d in _VOTES]
        return laws[0], laws[1]

    return AuditSpec(
        name="exponential",
        description=f"exponential mechanism over blocks (1 vs {_EM_BLOCK} hypotheses), eps={eps}",
        claimed=ExponentialMechanism(eps).guarantee(),
        build=factory(eps),
        pair=_VOTES,
        discretise=lambda i: i,
        broken={"epsilon_doubled": factory(2 * eps), "no_noise": no_noise},
        samples=20_000,
        exact=exact,
    )


def permute_and_flip_law(scores: Sequence[int], epsilon: float, sensitivity: float = 1.0) -> list[float]:
    """Exact law of permute-and-flip: Pr[i] = p_i ∫_0^1 Π_{j≠i} (1 - p_j t) dt.

    A uniform order is the order of i.i.d. uniform arrival times; candidate i wins when it
    arrives at t, succeeds (p_i = exp(ε(s_i - s_max)/(2Δ))), and every earlier one failed.
    """
    top = max(scores)
    p = [math.exp(epsilon * (s - top) / (2 * sensitivity)) for s in scores]
    law = []
    for i, p_i in enumerate(p):
        poly = [1.0]  # coefficients of Π_{j≠i} (1 - p_j t)
        for j, p_j in enumerate(p):
            if j != i:
                poly = [a - p_j * b for a, b in zip([*poly, 0.0], [0.0, *poly], strict=True)]
        law.append(p_i * math.fsum(c / (k + 1) for k, c in enumerate(poly)))
    return law


def _permute_and_flip_spec() -> AuditSpec:
    eps = 1.0

    def factory(epsilon: float) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = PermuteAndFlip(epsilon, rng=rng)
            return lambda d: m.select(_vote_scores(d))

        return build

    def no_noise(rng: RandomSource) -> Callable[[Any], Any]:
        def release(d: Any) -> int:
            scores = _vote_scores(d)
            top = max(scores)
            ties = [i for i, s in enumerate(scores) if s == top]
            return ties[rng.uniform_int(len(ties))]

        return release

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        laws = []
        for votes in _VOTES:
            law = permute_and_flip_law(_vote_scores(votes), eps)
            laws.append({0: law[0], 1: math.fsum(law[1:])})  # discretised as in the audit
        return laws[0], laws[1]

    return AuditSpec(
        name="permute_and_flip",
        description=f"permute-and-flip over 1 + {_EM_BLOCK} candidates, eps={eps}",
        claimed=PermuteAndFlip(eps).guarantee(),
        build=factory(eps),
        pair=_VOTES,
        discretise=lambda i: min(i, 1),  # candidate A vs any B
        broken={"epsilon_doubled": factory(2 * eps), "no_noise": no_noise},
        samples=20_000,
        exact=exact,
    )


def _histogram_spec(kind: str) -> AuditSpec:
    eps, delta = 1.0, 1e-3
    base = 30

    def factory(epsilon: float, threshold: int | None = None) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = StableHistogram(epsilon, delta, rng=rng)
            if threshold is not None:
                m.threshold = threshold  # deliberately broken: the constructor refuses unsafe thresholds
            return m.release

        return build

    if kind == "counts":  # a replacement u -> v moves two common bins: the ε part at full strength
        pair: tuple[Any, Any] = (("u",) * base + ("v",) * base, ("u",) * (base - 1) + ("v",) * (base + 1))

        def discretise(out: Any) -> Hashable:
            return _clip(-3, 3)((out.get("u", 0) - out.get("v", 0)) / 2)

        broken = {"noise_halved": factory(2 * eps)}
        description = "stable histogram, eps part: counts (30, 30) vs (29, 31)"

        def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
            h = StableHistogram(eps, delta)
            t = float(h.scale)

            def released(count: int) -> dict[int | None, float]:
                law: dict[int | None, float] = {
                    v: p for v, p in _dlap_law(t, count, (base - 1, base + 1)).items() if v >= h.threshold
                }
                law[None] = 1.0 - _dlap_tail(t, h.threshold - count)
                return law

            def joint(cu: int, cv: int) -> dict[Hashable, float]:
                lu, lv = released(cu), released(cv)
                return {(a, b): pa * pb for a, pa in lu.items() for b, pb in lv.items()}

            return joint(base, base), joint(base - 1, base + 1)
    else:  # a singleton appears: the δ part
        pair = (("z",) + ("v",) * base, ("v",) * (base + 1))

        def discretise(out: Any) -> Hashable:
            return "z" in out

        broken = {"no_threshold": factory(eps, threshold=1)}
        description = "stable histogram, delta part: singleton 'z' replaced by 'v'"

        def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
            p = StableHistogram(eps, delta).release_probability(1)
            return {True: p, False: 1.0 - p}, {False: 1.0}  # (v's count is ε-part only)

    return AuditSpec(
        name=f"stable_histogram_{kind}",
        description=f"{description}; eps={eps}, delta={delta}",
        claimed=StableHistogram(eps, delta).guarantee(),
        build=factory(eps),
        pair=pair,
        discretise=discretise,
        broken=broken,
        samples=20_000,
        exact=exact,
    )


def _above_threshold_law(answers: Sequence[int], threshold: int, epsilon: float) -> dict[Hashable, float]:
    """Exact law of AboveThreshold's output (summing over the threshold noise; tails < 1e-15)."""
    m = AboveThreshold(threshold, epsilon)
    t_rho, t_nu = float(m.threshold_scale), float(m.query_scale)
    law: dict[Hashable, float] = {}
    for r, p_r in _dlap_law(t_rho, 0, (0, 0)).items():
        alive = p_r
        for i, a in enumerate(answers):
            top = _dlap_tail(t_nu, threshold + r - a)  # Pr[a + ν >= T + ρ]
            law[i] = law.get(i, 0.0) + alive * top
            alive *= 1.0 - top
        law[-1] = law.get(-1, 0.0) + alive
    return law


def _above_threshold_spec() -> AuditSpec:
    eps, threshold = 1.0, 0
    # Three answers fall while the last one rises (found by maximising the exact privacy loss
    # over small answer vectors): the reported index 3 needs a high noisy threshold on d0.
    pair = ((1, 1, 1, 0), (0, 0, 0, 1))

    def factory(epsilon: float) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = AboveThreshold(threshold, epsilon, rng=rng)
            return lambda d: m.run(d)

        return build

    def no_query_noise(rng: RandomSource) -> Callable[[Any], Any]:
        m = AboveThreshold(threshold, eps, rng=rng)

        def release(d: Iterable[int]) -> int | None:
            noisy_threshold = threshold + rng.discrete_laplace(m.threshold_scale)
            return next((i for i, a in enumerate(d) if a >= noisy_threshold), None)

        return release

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        return _above_threshold_law(pair[0], threshold, eps), _above_threshold_law(pair[1], threshold, eps)

    return AuditSpec(
        name="above_threshold",
        description=f"sparse vector AboveThreshold, threshold {threshold}, eps={eps}; {pair[0]} vs {pair[1]}",
        claimed=AboveThreshold(threshold, eps).guarantee(),
        build=factory(eps),
        pair=pair,
        discretise=lambda i: -1 if i is None else i,
        broken={"noise_halved": factory(2 * eps), "no_query_noise": no_query_noise},
        samples=40_000,
        exact=exact,
    )


def _global_stability_spec(epsilon: float = 2.0) -> AuditSpec:
    # imported lazily: the learner's audit module imports this one
    from privstream.learning.private_learners.global_stability_audit import global_stability_audit_spec

    return global_stability_audit_spec(epsilon)


def _global_stability_add_remove_spec(epsilon: float = 2.0) -> AuditSpec:
    from privstream.learning.private_learners.global_stability_audit import add_remove_audit_spec

    return add_remove_audit_spec(epsilon)


def _proper_spec(epsilon: float = 1.0) -> AuditSpec:
    # imported lazily: the learner module imports this one
    from privstream.learning.private_learners.proper_audit import proper_audit_spec

    return proper_audit_spec(epsilon)


def _proper_add_remove_spec(epsilon: float = 2.0) -> AuditSpec:
    from privstream.learning.private_learners.proper_audit import add_remove_audit_spec

    return add_remove_audit_spec(epsilon)


#: name -> factory of the :class:`AuditSpec` (built lazily; cheap).
AUDITABLE_MECHANISMS: dict[str, Callable[[], AuditSpec]] = {
    "discrete_laplace": lambda: _laplace_spec(discrete=True),
    "laplace": lambda: _laplace_spec(discrete=False),
    "discrete_gaussian": lambda: _gaussian_spec(discrete=True),
    "gaussian": lambda: _gaussian_spec(discrete=False),
    "exponential": _exponential_spec,
    "permute_and_flip": _permute_and_flip_spec,
    "stable_histogram_counts": lambda: _histogram_spec("counts"),
    "stable_histogram_singleton": lambda: _histogram_spec("singleton"),
    "above_threshold": _above_threshold_spec,
    "global-stability": _global_stability_spec,
    "global-stability-add-remove": _global_stability_add_remove_spec,
    "proper": _proper_spec,
    "proper-add-remove": _proper_add_remove_spec,
}
