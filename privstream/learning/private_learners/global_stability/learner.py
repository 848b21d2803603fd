"""The Bun–Livni–Moran private learner: Algorithm M over the globally-stable Algorithm G.

blm_almm.md §3.3 ([003 Thm 30], the 4-step box at L.887; [000 Thm 17]) with G of
:mod:`privstream.learning.private_learners.global_stability.algorithm_g`:

1. Split the sample into K consecutive batches of m examples (a fixed, data-independent
   partition) and the tail S' (n' examples); run ``h_i = G(batch_i)`` with independent coins.
2. Stable histogram (:class:`~privstream.learning.mechanisms.StableHistogram`, exact discrete
   Laplace) over the outputs' canonical keys (:meth:`Hypothesis.key`; "Fail" is :data:`FAIL_KEY`)
   at privacy ``(ε/2, δ)`` -> released list L with noisy counts ĉ_h; estimates ``a_h = ĉ_h/K``.
3. Remove every h with ``a_h < 3η/4``, and "Fail" (post-processing, blm_almm.md §3.3).
4. The generic learner on S' over L: the exact exponential mechanism
   (:class:`~privstream.learning.mechanisms.ExponentialMechanism`) at ``ε/2`` with score
   ``-errors_{S'}(h)`` (sensitivity 1). An empty L gives the all-zero function (post-processing).

**Privacy: (ε, δ)-DP under replace-one neighbours, by basic composition** ([003 Lem 13] and the proof
of [003 Thm 30]): with G's coins fixed, a changed example changes at most one h_i (batches are
disjoint and each G reads only its own batch), so step 2 is (ε/2, δ)-DP; step 3 is post-processing;
step 4 is ε/2-DP in S' for every fixed L; ``(ε/2 + ε/2, δ + 0) = (ε, δ)``. This holds for every K,
m, n', η, depth and draw budget and for non-realizable input, so the practical parameters below
never touch privacy. (Remark: since the batches and S' are disjoint, parallel composition would
even give (ε/2, δ); we report the paper's (ε, δ).) The learner needs δ > 0 (the histogram).

**Accuracy: theory vs practice.** :func:`theory_parameters` evaluates the paper's parameter chain
(§3.4) with the spec's explicit constants; :func:`global_stability_sample_size` is its ``n_total``
(≈ 1.8e12 already for Ldim 1). When the window has at least that many examples the learner runs
with exactly those parameters and ``accuracy_guarantee_holds`` is True; otherwise it runs in
*practical mode* (:func:`practical_parameters`: K, m, n', η, depth and budget derived from the
window size) and the accuracy is measured, not claimed.

**Improper.** The output is an SOA predictor (possibly patched), a function on the whole domain.
``LearnerResult.proper`` is True only when the output is *verified* a member of the class
(:func:`is_member`: closed forms for thresholds, points and intervals, row lookup for file
classes); otherwise False.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.errors import PrivacyParameterError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.mechanisms import ExponentialMechanism, StableHistogram
from privstream.learning.private_learners.base import (
    LearnerResult,
    check_accuracy_parameter,
    check_privacy_parameters,
    check_sample,
)
from privstream.learning.private_learners.global_stability.algorithm_g import (
    FAIL_KEY,
    GRun,
    exact_fraction,
    g_parameters,
    run_g,
)
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "MECHANISM",
    "GlobalStabilityLearner",
    "MOutcome",
    "MParameters",
    "TheoryParameters",
    "algorithm_m",
    "default_hypothesis",
    "global_stability_sample_size",
    "is_member",
    "n_generic_list",
    "practical_parameters",
    "theory_parameters",
]

MECHANISM = "global-stability(stable-histogram+exponential)"

#: ``histogram(keys, rng) -> {key: noisy count}``: the step-2 release (swappable only for audits).
Histogram = Callable[[Sequence[Hashable], RandomSource], dict[Hashable, int]]


# -- the paper's parameter chain (theory mode) -------------------------------------------------


def n_generic_list(num_hyps: int, alpha: float, beta: float, epsilon: float, *,
                   c_sample: float = 36, c_mechanism: float = 6) -> int:
    """``n_GL``: S' size for the generic learner over a list (blm_almm.md §3.2, explicit constants).

    ``ceil(max(36·ln(4|L|/β)/α, 6·ln(2|L|/β)/(α·ε)))``: from the proof of [003 Lem 29] with
    multiplicative Chernoff bounds, when some h* in the list has ``loss_D(h*) <= α`` (not 0), so
    the output has loss <= 2α w.p. >= 1-β. ``num_hyps`` may be a huge int.

    >>> n_generic_list(2048, 0.05, 0.1 / 3, 0.5)
    8937
    """
    if isinstance(num_hyps, bool) or not isinstance(num_hyps, int) or num_hyps < 1:
        raise ValueError(f"num_hyps must be an int >= 1, got {num_hyps!r}")
    log_l = math.log(num_hyps)
    first = c_sample * (math.log(4) + log_l - math.log(beta)) / alpha
    second = c_mechanism * (math.log(2) + log_l - math.log(beta)) / (alpha * epsilon)
    return math.ceil(max(first, second))


def _hist_noise_bound(epsilon_h: float, count: int, beta_h: float) -> int:
    """Integer t with ``count·Pr[|Z| > t] <= beta_h`` for Z discrete Laplace of scale 2/ε_H.

    ``Pr[|Z| > t] = 2q^(t+1)/(1+q) <= q^t`` with ``q = e^(-ε_H/2)``, so ``t = ceil((2/ε_H)·ln(count/β_H))``.
    """
    return max(0, math.ceil((2 / epsilon_h) * (math.log(count) - math.log(beta_h))))


@dataclass(frozen=True)
class TheoryParameters:
    """The parameter chain of Theorem 1/3 (blm_almm.md §3.4) at ``(α, β, ε, δ, d)``.

    Integers are exact (``n_total`` may have thousands of digits for large d); ``eta`` is exact.
    ``hist_threshold`` is the release threshold T of the project's discrete stable histogram at
    ``(ε/2, δ)`` (the spec's continuous τ = 1 + (4/ε)ln(2/δ) plays this role; T is a little smaller).
    """

    d: int
    alpha: float
    beta: float
    epsilon: float
    delta: float
    n_aux: int
    N: int
    m: int
    eta: Fraction
    K_sampling: int
    K_histogram: int
    K: int
    hist_threshold: int
    n_prime: int
    n_total: int


def theory_parameters(alpha: float, beta: float, epsilon: float, delta: float, d: int, *,
                      sampling_constant: float = 128, c_sample: float = 36,
                      c_mechanism: float = 6) -> TheoryParameters:
    """The §3.4 chain: G at α/2, η = η_G, K from the sampling and histogram conditions, n'.

    * ``K_sampling = ceil(128·ln(3/(η·β))/η)`` (Chernoff, relative deviation 1/8, union bound over
      < 1/η hypotheses: every h with Pr[G = h] > η has frequency >= 7η/8 w.p. >= 1-β/3);
    * ``K_histogram`` = least K with ``K·η/8 >= T + t(K)``, ``t(K) = ceil((4/ε)·ln(3K/β))``: the
      histogram at (ε/2, δ) then releases every h of frequency >= η/8 with error <= η/8 w.p.
      >= 1-β/3 (our discrete-Laplace form of the spec's condition ``K > 8(τ + t)/η``);
    * ``n' = n_GL(floor(2/η), α/2, β/3, ε/2)``; ``n_total = K·m + n'``.

    ``sampling_constant``, ``c_sample``, ``c_mechanism`` are the spec's (ours) constants, exposed.

    >>> p = theory_parameters(0.1, 0.1, 1.0, 1e-6, 1)
    >>> p.K, p.m, p.n_prime, p.n_total
    (1354324, 1310880, 8937, 1775356254057)
    """
    a = check_accuracy_parameter(alpha, "alpha")
    b = check_accuracy_parameter(beta, "beta")
    eps, dlt = check_privacy_parameters(epsilon, delta)
    if dlt <= 0:
        raise PrivacyParameterError("the global-stability learner needs delta > 0 (stable histogram)")
    g = g_parameters(d, exact_fraction(a, "alpha") / 2)
    eta = g.eta_G
    inv_eta = 1 / eta  # an exact integer
    assert inv_eta.denominator == 1
    inv = int(inv_eta)
    log_inv_eta = math.log(inv)
    k_sampling = math.ceil(Fraction(sampling_constant * (math.log(3) + log_inv_eta - math.log(b))) * inv)
    threshold = StableHistogram(eps / 2, dlt).threshold
    k_hist = 8 * threshold * inv
    while True:  # monotone fixed point: t(K) grows with K
        need = 8 * (threshold + _hist_noise_bound(eps / 2, k_hist, b / 3)) * inv
        if need <= k_hist:
            break
        k_hist = need
    k = max(k_sampling, k_hist)
    n_prime = n_generic_list(2 * inv, a / 2, b / 3, eps / 2, c_sample=c_sample, c_mechanism=c_mechanism)
    return TheoryParameters(
        d=d, alpha=a, beta=b, epsilon=eps, delta=dlt, n_aux=g.n_aux, N=g.N, m=g.m, eta=eta,
        K_sampling=k_sampling, K_histogram=k_hist, K=k, hist_threshold=threshold, n_prime=n_prime,
        n_total=k * g.m + n_prime)


def global_stability_sample_size(alpha: float, beta: float, epsilon: float, delta: float, d: int,
                                 **constants: float) -> int:
    """``n_total`` of Theorem 1/3's learner (:func:`theory_parameters`); exact, possibly astronomical.

    >>> global_stability_sample_size(0.1, 0.1, 1.0, 1e-6, 1)
    1775356254057
    """
    return theory_parameters(alpha, beta, epsilon, delta, d, **constants).n_total


# -- the parameters one run uses (theory or practical) -----------------------------------------


@dataclass(frozen=True)
class MParameters:
    """What one run of Algorithm M uses; a pure function of public inputs (n, ε, δ, α, β, d).

    ``num_batches`` K, ``batch_size`` m (``= budget + n_aux``, the layout of each G-run),
    ``n_prime`` = |S'| (the tail, ``n - K·m``), ``eta`` (pruning cut ``3η/4``), ``max_depth``
    (G's depth is uniform on ``{0..max_depth}``). ``mode`` is ``"theory"`` or ``"practical"``.
    """

    mode: str
    num_batches: int
    batch_size: int
    n_aux: int
    budget: int
    max_depth: int
    eta: float
    n_prime: int
    hist_threshold: int

    @property
    def prune_below(self) -> float:
        return 3 * self.eta / 4


def practical_parameters(n: int, d: int, epsilon: float, delta: float, alpha: float, beta: float, *,
                         stability: float = 0.5, prime_fraction: float = 0.2, retries: int = 4,
                         depth_cap: int | None = None) -> MParameters:
    """Parameters for a window of n examples (practical mode; privacy does not depend on them).

    * histogram threshold T at ``(ε/2, δ)`` (the mechanism's own, exact);
    * ``K`` = least K with ``stability·K >= T + ceil((4/ε)·ln(3/β))``: a hypothesis that a fraction
      ``stability`` of the G-runs output clears T despite the noise w.p. >= 1-β/3 (capped by the data);
    * ``n'`` ≈ ``prime_fraction·n`` (at most the n_GL that a list of ``K//T`` items would need);
      the batches get the rest, ``m = (n - n')//K``, and S' is the tail (``n - K·m >= n'``);
    * G: ``n_aux`` = the theorem's ``ceil(2^(d+3)/α)``; depth ``D`` = the largest ``D <= d`` with
      ``n_aux·(1 + retries·(2^(D+1) - 2)) <= m`` (room for ``retries`` tournament rounds per
      level); if D = 0, G is ``SOA(T)`` and ``n_aux = m`` (all the batch); budget ``m - n_aux``;
    * ``η = 4T/(3K)``: the pruning cut ``3η/4 = T/K`` is the histogram's own threshold (prunes
      nothing more; every released estimate is >= T/K).

    >>> p = practical_parameters(1000, 1, 1.0, 1e-6, 0.1, 0.1)
    >>> p.num_batches, p.batch_size, p.max_depth, p.n_prime, p.hist_threshold
    (136, 5, 0, 320, 54)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    eps, dlt = check_privacy_parameters(epsilon, delta)
    if dlt <= 0:
        raise PrivacyParameterError("the global-stability learner needs delta > 0 (stable histogram)")
    if not 0 < stability <= 1 or not 0 < prime_fraction < 1:
        raise ValueError("stability must be in (0, 1] and prime_fraction in (0, 1)")
    threshold = StableHistogram(eps / 2, dlt).threshold
    margin = math.ceil((4 / eps) * math.log(3 / beta))
    k_target = math.ceil((threshold + margin) / stability)
    list_max = max(1, k_target // threshold)
    n_prime = min(max(1, math.floor(prime_fraction * n)), n,
                  n_generic_list(list_max, alpha / 2, beta / 3, eps / 2))
    k = min(k_target, n - n_prime)
    m = (n - n_prime) // k if k > 0 else 0
    if m == 0:
        k = 0
    theory_aux = math.ceil(2 ** (d + 3) / alpha) if d >= 1 else 1
    cap = d if depth_cap is None else min(d, depth_cap)
    depth = 0
    for level in range(1, cap + 1):
        if theory_aux * (1 + retries * (2 ** (level + 1) - 2)) <= m:
            depth = level
    n_aux = m if depth == 0 else theory_aux
    eta = min(1.0, 4 * threshold / (3 * k)) if k else 1.0
    return MParameters(mode="practical", num_batches=k, batch_size=m, n_aux=n_aux, budget=m - n_aux,
                       max_depth=depth, eta=eta, n_prime=n - k * m, hist_threshold=threshold)


def _theory_m_parameters(t: TheoryParameters, n: int) -> MParameters:
    return MParameters(mode="theory", num_batches=t.K, batch_size=t.m, n_aux=t.n_aux, budget=t.N,
                       max_depth=t.d, eta=float(t.eta), n_prime=n - t.K * t.m,
                       hist_threshold=t.hist_threshold)


# -- Algorithm M -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MOutcome:
    """Result of :func:`algorithm_m`.

    ``hypothesis``, ``released`` (key -> noisy count, the histogram's DP output) and ``candidates``
    (the list L after pruning, in released key order) are private outputs. ``runs`` (the raw G
    outputs) is a **non-private debug path**: tests and the trusted zone only, never published.
    """

    hypothesis: Hypothesis
    released: dict[Hashable, int]
    candidates: list[Hypothesis]
    runs: list[GRun]


def _errors(h: Hypothesis, xs: np.ndarray, ys: np.ndarray) -> int:
    return int(np.count_nonzero(h.predict(xs) != ys)) if xs.shape[0] else 0


def default_hypothesis(hclass: HypothesisClass) -> Hypothesis:
    """The data-independent output when the list is empty: the all-zero function."""
    return hypothesis_from_runs(hclass.domain_size, 0, ())


@functools.lru_cache(maxsize=64)
def _histogram_prototype(epsilon: float, delta: float) -> StableHistogram:
    return StableHistogram(epsilon, delta)


def _stable_histogram(epsilon: float, delta: float, rng: RandomSource) -> StableHistogram:
    """The production histogram at (ε, δ) drawing from ``rng`` (threshold search cached per (ε, δ))."""
    mechanism = copy.copy(_histogram_prototype(epsilon, delta))
    mechanism.rng = rng
    return mechanism


def algorithm_m(hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, params: MParameters, *,
                epsilon: float, delta: float, rng: RandomSource, tie: int = 1,
                histogram: Histogram | None = None) -> MOutcome:
    """Run the four steps of Algorithm M (module docstring) with ``params`` on validated arrays.

    ``histogram`` replaces step 2 only in the privacy audit's deliberately broken variants.
    """
    k, m = params.num_batches, params.batch_size
    if k * m + params.n_prime != xs.shape[0]:
        raise ValueError(f"layout K·m + n' = {k * m + params.n_prime} != n = {xs.shape[0]}")
    # the depth of each run is uniform on {0..max_depth}, from G's own coins
    runs = [run_g(hclass, xs[i * m:(i + 1) * m], ys[i * m:(i + 1) * m], n_aux=params.n_aux,
                  budget=params.budget, depth=rng.uniform_int(params.max_depth + 1), rng=rng, tie=tie)
            for i in range(k)]
    outputs: dict[Hashable, Hypothesis] = {r.key: r.hypothesis for r in runs if r.hypothesis is not None}
    keys = [r.key for r in runs]
    if histogram is None:
        released = _stable_histogram(epsilon / 2, delta, rng).release(keys)  # (ε/2, δ)-DP
    else:
        released = histogram(keys, rng)
    # step 3 (post-processing): prune a_h = ĉ_h/K < 3η/4, and Fail
    candidates = [outputs[key] for key, c in released.items()
                  if key != FAIL_KEY and c >= params.prune_below * k]
    if not candidates:
        return MOutcome(default_hypothesis(hclass), released, candidates, runs)
    tail_x, tail_y = xs[k * m:], ys[k * m:]
    scores = [-_errors(h, tail_x, tail_y) for h in candidates]
    choice = ExponentialMechanism(epsilon / 2, 1, rng=rng).select(scores)  # ε/2-DP in S'
    return MOutcome(candidates[choice], released, candidates, runs)


# -- membership (for a truthful ``proper``) ----------------------------------------------------


def is_member(hclass: HypothesisClass, h: Hypothesis) -> bool:
    """Whether ``h`` is (verified) a function of ``hclass``; False when it cannot be verified."""
    if h.domain_size != hclass.domain_size:
        return False
    first, changes = h.change_points()
    n = hclass.domain_size
    if isinstance(hclass, Thresholds):  # 1[x >= t]: all ones, all zeros, or one rise
        return not changes or (first == 0 and len(changes) == 1)
    if isinstance(hclass, Points):  # all zeros or exactly one 1
        if first == 0:
            return not changes or (len(changes) == 2 and changes[1] == changes[0] + 1) or changes == [n - 1]
        return changes == [1] or (n == 1 and not changes)
    if isinstance(hclass, Intervals):  # one block of ones (or none)
        return (first == 0 and len(changes) in (0, 1, 2)) or (first == 1 and len(changes) <= 1)
    if isinstance(hclass, FiniteClass):
        table = h.truth_table()
        return bool((hclass.matrix() == table).all(axis=1).any())
    return False


# -- the learner -------------------------------------------------------------------------------


def _ldim(hclass: HypothesisClass) -> int:
    return hclass.version_space().ldim()


class GlobalStabilityLearner:
    """Algorithm M over G as a :class:`~privstream.learning.private_learners.base.PrivateLearner`.

    Name ``"global-stability"``. Constructor parameters tune practical mode only
    (:func:`practical_parameters`) plus the SOA tie rule; none affects privacy. ``fit`` needs
    ``delta > 0`` and returns an (ε, δ)-DP release (see the module docstring).

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> from privstream.learning.randomness import seeded
    >>> H = parse_class_spec("points:64")
    >>> xs = np.arange(2000) % 8; ys = (xs == 5).astype(np.uint8)
    >>> r = GlobalStabilityLearner().fit(H, xs, ys, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.1,
    ...                                  rng=seeded(0))
    >>> r.hypothesis.predict(5), r.epsilon, r.delta, r.proper, r.accuracy_guarantee_holds
    (1, 1.0, 1e-06, True, False)
    """

    name = "global-stability"
    mechanism = MECHANISM

    def __init__(self, *, tie: int = 1, stability: float = 0.5, prime_fraction: float = 0.2,
                 retries: int = 4, depth_cap: int | None = None) -> None:
        if tie not in (0, 1) or isinstance(tie, bool):
            raise ValueError(f"tie must be 0 or 1, got {tie!r}")
        if not 0 < stability <= 1 or not 0 < prime_fraction < 1:
            raise ValueError("stability must be in (0, 1] and prime_fraction in (0, 1)")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
            raise ValueError(f"retries must be an int >= 1, got {retries!r}")
        if depth_cap is not None and (isinstance(depth_cap, bool) or not isinstance(depth_cap, int)
                                      or depth_cap < 0):
            raise ValueError(f"depth_cap must be None or an int >= 0, got {depth_cap!r}")
        self.tie = tie
        self.practical = {"stability": stability, "prime_fraction": prime_fraction, "retries": retries,
                          "depth_cap": depth_cap}

    def parameters_for(self, hclass: HypothesisClass, n: int, *, epsilon: float, delta: float,
                       alpha: float, beta: float) -> tuple[MParameters, TheoryParameters | None]:
        """The run's parameters (theory mode iff n meets the theorem) and the theorem's chain."""
        d = _ldim(hclass)
        theory = theory_parameters(alpha, beta, epsilon, delta, d) if d >= 1 else None
        if theory is not None and n >= theory.n_total:
            return _theory_m_parameters(theory, n), theory
        return practical_parameters(n, d, epsilon, delta, alpha, beta, **self.practical), theory  # type: ignore[arg-type]

    def fit(self, hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, *, epsilon: float,
            delta: float = 0.0, alpha: float = 0.25, beta: float = 0.25,
            rng: RandomSource | None = None) -> LearnerResult:
        eps, dlt = check_privacy_parameters(epsilon, delta)
        if dlt <= 0:
            raise PrivacyParameterError(
                "the global-stability learner is (epsilon, delta)-DP with delta > 0 (stable histogram); "
                "pass e.g. delta=1e-6")
        a = check_accuracy_parameter(alpha, "alpha")
        b = check_accuracy_parameter(beta, "beta")
        points, labels = check_sample(hclass, xs, ys)
        n = int(points.shape[0])
        params, theory = self.parameters_for(hclass, n, epsilon=eps, delta=dlt, alpha=a, beta=b)
        outcome = algorithm_m(hclass, points, labels, params, epsilon=eps, delta=dlt, rng=resolve(rng),
                              tie=self.tie)
        needed = None if theory is None else theory.n_total  # d = 0: no theorem needed (one function)
        parameters: dict[str, Any] = {
            "alpha": a, "beta": b, **{k: v for k, v in asdict(params).items()},
            "ldim": _ldim(hclass), "tie": self.tie, "released_list_size": len(outcome.candidates),
            "composition": "basic: stable histogram (eps/2, delta) + exponential mechanism eps/2",
            "theorem": "BLM Thm 1 / ALBMM Thm 3 via Algorithm M (Thm 30), spec constants",
            "theorem_sample_size_log10": round(math.log10(needed), 3) if needed else 0.0,
        }
        return LearnerResult(
            hypothesis=outcome.hypothesis, mechanism=MECHANISM, epsilon=eps, delta=dlt,
            proper=is_member(hclass, outcome.hypothesis), sample_size=n, parameters=parameters,
            theorem_sample_size=needed, accuracy_guarantee_holds=params.mode == "theory",
        )

    def __repr__(self) -> str:
        return f"GlobalStabilityLearner(tie={self.tie}, **{self.practical})"
