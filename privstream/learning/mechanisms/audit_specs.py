"""The DP mechanisms in the privacy audit (:mod:`privstream.learning.audit`): one spec per mechanism.

Each ``*_audit_spec`` function returns the :class:`~privstream.learning.audit.harness.AuditSpec`
of one mechanism of this package: the production release on a query of a tiny dataset, a
worst-case neighbouring pair, deliberately broken variants (positive controls the audit must
catch) and, where the output law is computable, the exact laws on the pair. The registry
(:data:`privstream.learning.audit.registry.AUDITS`) names them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from privstream.learning.audit.harness import AuditSpec, MechanismFactory
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
from privstream.learning.mechanisms.quantile import PrivateQuantile
from privstream.learning.randomness import RandomSource

__all__ = [
    "above_threshold_audit_spec",
    "discrete_gaussian_audit_spec",
    "discrete_laplace_audit_spec",
    "exponential_audit_spec",
    "gaussian_audit_spec",
    "laplace_audit_spec",
    "permute_and_flip_audit_spec",
    "permute_and_flip_law",
    "quantile_audit_spec",
    "stable_histogram_counts_audit_spec",
    "stable_histogram_singleton_audit_spec",
]


def _clip(lo: int, hi: int, per_unit: int = 1) -> Callable[[Any], Hashable]:
    """Bins of width 1/per_unit, with the two tails lumped into the end bins."""
    return lambda x: min(max(math.floor(x * per_unit), lo), hi)


# Exact laws (floats) of the integer noises on a shared support [centres - reach, centres + reach],
# truncated where the omitted mass is < 1e-15.


def _outcomes(law: Mapping[int, float]) -> dict[Hashable, float]:
    """A law over integers as a law over the audit's (hashable) outcomes."""
    return {v: p for v, p in law.items()}


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
        return _outcomes(_dlap_law(t, 0, (0, 1))), _outcomes(_dlap_law(t, 1, (0, 1)))

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
        return _outcomes(_dgauss_law(var, 0, (0, 1))), _outcomes(_dgauss_law(var, 1, (0, 1)))

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
        laws: list[dict[Hashable, float]] = [
            dict(enumerate(m.block_probabilities(_vote_blocks(d)))) for d in _VOTES
        ]
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
        laws: list[dict[Hashable, float]] = []
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


# -- the registered names ----------------------------------------------------------------------


def discrete_laplace_audit_spec() -> AuditSpec:
    """Discrete Laplace on a count query (counts 0 vs 1), with its exact law."""
    return _laplace_spec(discrete=True)


def laplace_audit_spec() -> AuditSpec:
    """Continuous Laplace on a count query (counts 0 vs 1)."""
    return _laplace_spec(discrete=False)


def discrete_gaussian_audit_spec() -> AuditSpec:
    """Discrete Gaussian at one (ε, δ) point of its profile, with its exact law."""
    return _gaussian_spec(discrete=True)


def gaussian_audit_spec() -> AuditSpec:
    """Continuous Gaussian at one (ε, δ) point of its profile."""
    return _gaussian_spec(discrete=False)


def exponential_audit_spec() -> AuditSpec:
    """The exponential mechanism over blocks of candidates, with its exact law."""
    return _exponential_spec()


def permute_and_flip_audit_spec() -> AuditSpec:
    """Permute-and-flip over 1 + 10 candidates, with its exact law."""
    return _permute_and_flip_spec()


def stable_histogram_counts_audit_spec() -> AuditSpec:
    """The stable histogram's ε part (two common bins move), with its exact law."""
    return _histogram_spec("counts")


def stable_histogram_singleton_audit_spec() -> AuditSpec:
    """The stable histogram's δ part (a singleton appears), with its exact law."""
    return _histogram_spec("singleton")


def above_threshold_audit_spec() -> AuditSpec:
    """Sparse vector's AboveThreshold on a worst-case pair of answer vectors, with its exact law."""
    return _above_threshold_spec()


#: The quantile's pair: one value moved from the bottom of the range to its top (replace-one), so
#: every count between them drops by one: the scores left of the median fall, those right of it rise.
_QUANTILE_PAIR = ([0.5, 1.5, 2.5, 3.5], [3.9, 1.5, 2.5, 3.5])


def _quantile_spec() -> AuditSpec:
    eps = 1.0

    def factory(epsilon: float) -> MechanismFactory:
        def build(rng: RandomSource) -> Callable[[Any], Any]:
            m = PrivateQuantile(epsilon, lo=0, hi=4, cells=4, rng=rng)
            return lambda d: m.release_index(d, 0.5)

        return build

    def no_noise(rng: RandomSource) -> Callable[[Any], Any]:
        m = PrivateQuantile(eps, lo=0, hi=4, cells=4, rng=rng)

        def best(d: Any) -> int:  # the exact median's grid point (the highest score)
            scores = [score for size, score in m.blocks(d, 0.5) for _ in range(size)]
            return max(range(len(scores)), key=lambda j: scores[j])

        return best

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        m = PrivateQuantile(eps, lo=0, hi=4, cells=4)
        laws: list[dict[Hashable, float]] = [dict(enumerate(m.probabilities(d, 0.5))) for d in _QUANTILE_PAIR]
        return laws[0], laws[1]

    return AuditSpec(
        name="quantile",
        description=f"the median on a public grid of 4 cells (exponential mechanism), eps={eps}",
        claimed=PrivateQuantile(eps, lo=0, hi=4, cells=4).guarantee(),
        build=factory(eps),
        pair=_QUANTILE_PAIR,
        discretise=lambda j: j,
        broken={"epsilon_quadrupled": factory(4 * eps), "no_noise": no_noise},
        samples=20_000,
        exact=exact,
    )


def quantile_audit_spec() -> AuditSpec:
    """The private quantile (per-feature bounds' mechanism) on a worst-case pair, with its exact law."""
    return _quantile_spec()
