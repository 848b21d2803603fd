"""The Bun–Livni–Moran private learner: Algorithm M over a globally stable per-batch learner.

ABLMM22 Thm 30 (its four-step algorithm; BLM20 Thm 17) with G of
:mod:`.algorithm_g`:

1. Split the sample into K batches and S' (below); run a per-batch learner on every batch:
   Algorithm G of :mod:`.algorithm_g` (theory mode), or correlated ERM
   (:mod:`.correlated_erm`, practical mode).
2. Stable histogram (:class:`~privstream.learning.mechanisms.StableHistogram`, exact discrete
   Laplace) over the outputs' canonical keys (:meth:`Hypothesis.key`; "Fail" is :data:`FAIL_KEY`)
   -> released list L with noisy counts ĉ_h; estimates ``a_h = ĉ_h/K``.
3. Remove every h with ``a_h < 3η/4``, and "Fail" (post-processing).
4. The generic learner on S' over L: the exact exponential mechanism
   (:class:`~privstream.learning.mechanisms.ExponentialMechanism`) with score ``-errors_{S'}(h)``
   (sensitivity 1). An empty L gives the all-zero function (post-processing).

**The split.** n public (``expected_size=None``, replace-one neighbours): positional, the first
K·m examples in K consecutive batches of m, S' the tail; all sizes from n. n private
(``expected_size=E``, add/remove-one neighbours): K, m and |S'| come from E only, and every example
is assigned *independently* with the learner's own coins: batch j with probability m/E, S' with
probability |S'|/E (:func:`random_split`). A positional split would not do there: removing one
example shifts every later one into another batch, so every batch may change.

**Privacy: (ε, δ)-DP, for every parameter setting and every input (realizable or not).**

* *Replace-one* (n public). With the per-batch learners' coins fixed, a changed example changes at
  most one batch output (batches are disjoint and each learner reads only its own batch and the
  shared, data-independent coins) or only S'. Theory mode follows the paper ([ABLMM22 Lem 13], proof of
  [ABLMM22 Thm 30]): histogram at (ε/2, δ), exponential mechanism at ε/2, basic composition gives (ε, δ).
  Practical mode uses *parallel* composition: histogram at (ε, δ) and exponential mechanism at ε.
  If the changed example is in a batch, S' is the same and the output is post-processing of the
  (ε, δ)-DP histogram (the one changed key is the histogram's replace-one neighbour); if it is in
  S', the list L has the same law and the selection is ε-DP in S' for every L. Either way (ε, δ).
* *Add/remove-one* (n private). Couple the two runs: every example common to D and D' = D + z gets
  the same assignment (assignments are independent across examples and of the data), and z gets
  its own draw a. For each value of a the argument above applies verbatim: z lies in one batch
  (one key of the histogram changes; S' is equal) or in S' (the list has the same law; the
  exponential mechanism with score -errors has sensitivity 1 under adding an example). So
  ``Pr[M(D') ∈ E | a] <= e^ε Pr[M(D) ∈ E] + δ`` and the reverse for every a, and averaging over a
  gives (ε, δ)-DP. The same holds for n = 0 and for n far from E (only accuracy suffers).

The learner needs δ > 0 (the histogram). Nothing in the guarantee depends on K, m, n', η, the
tolerance, the draw budget, G's depth or budget: practical parameters change only accuracy.

**Accuracy: theory vs practice.** :func:`theory_parameters` evaluates the paper's parameter chain
(ABLMM22 Thm 3) with explicit constants of ours; :func:`global_stability_sample_size` is its ``n_total``
(≈ 1.8e12 already for Ldim 1). When the window (or ``expected_size``) has at least that many
examples the learner runs with exactly those parameters (G per batch, basic composition) and
``accuracy_guarantee_holds`` is True. Otherwise it runs in *practical mode*
(:func:`practical_parameters`), where G cannot work: its most frequent output has probability
``η_G = 2^{-2^{d+2}}/(d+1)`` (the histogram needs one output in T = 28 of ~70 batches at ε = 1,
δ = 1e-6), and even the SOA on a whole batch (G at depth 0) outputs its most frequent function in
~20% of 300-example batches of ``thresholds:1024``. Practical mode therefore runs correlated ERM
per batch, a replicable learner (same output in most batches), with the rest of M unchanged; the
accuracy is measured (``benchmarks/bench_private_learners.py``), not claimed.

**Improper.** G's output is an SOA predictor (possibly patched), a function on the whole domain;
correlated ERM outputs members. ``LearnerResult.proper`` is True only when the output is *verified*
a member of the class (:func:`is_member`: closed forms for thresholds, points and intervals, row
lookup for file classes); otherwise False.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, TypedDict

import numpy as np

from privstream.learning.errors import InvariantError, PrivacyParameterError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass, Intervals, Points, Thresholds
from privstream.learning.mechanisms import ExponentialMechanism, StableHistogram
from privstream.learning.private_learners.base import (
    LearnerResult,
    check_fit,
    check_fit_parameters,
    check_privacy_parameters,
    neighbouring_relation,
)
from privstream.learning.private_learners.global_stability.algorithm_g import (
    FAIL_KEY,
    GRun,
    exact_fraction,
    g_parameters,
    run_g,
)
from privstream.learning.private_learners.global_stability.correlated_erm import ErmParameters, correlated_erm
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "BATCH_LEARNERS",
    "EXACT_LDIM",
    "MECHANISM",
    "GlobalStabilityLearner",
    "Histogram",
    "MOutcome",
    "MParameters",
    "Split",
    "TheoryParameters",
    "algorithm_m",
    "default_hypothesis",
    "global_stability_log10_sample_size",
    "global_stability_sample_size",
    "is_member",
    "log10_closed_form",
    "n_generic_list",
    "positional_split",
    "practical_parameters",
    "random_split",
    "theory_parameters",
]

MECHANISM = "global-stability(stable-histogram+exponential)"

#: ``histogram(keys, rng) -> {key: noisy count}``: the step-2 release (swappable only for audits).
Histogram = Callable[[Sequence[Hashable], RandomSource], dict[Hashable, int]]
#: ``split(n, params, rng) -> batch of every example (K = S')``: step 1 (swappable only for audits).
Split = Callable[[int, "MParameters", RandomSource], np.ndarray]


# -- the paper's parameter chain (theory mode) -------------------------------------------------


def n_generic_list(
    num_hyps: int, alpha: float, beta: float, epsilon: float, *, c_sample: float = 36, c_mechanism: float = 6
) -> int:
    """``n_GL``: S' size for the generic learner over a list (ABLMM22 Lem 29, explicit constants).

    ``ceil(max(36·ln(4|L|/β)/α, 6·ln(2|L|/β)/(α·ε)))``: from the proof of [ABLMM22 Lem 29] with
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
    """The parameter chain of BLM20 Thm 1 / ABLMM22 Thm 3 at ``(α, β, ε, δ, d)``.

    Integers are exact (``n_total`` may have thousands of digits for large d); ``eta`` is exact.
    ``hist_threshold`` is the release threshold T of the project's discrete stable histogram at
    ``(ε/2, δ)`` (a continuous τ = 1 + (4/ε)ln(2/δ) would play this role; T is a little smaller).
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


def theory_parameters(
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    d: int,
    *,
    sampling_constant: float = 128,
    c_sample: float = 36,
    c_mechanism: float = 6,
) -> TheoryParameters:
    """The parameter chain: G at α/2, η = η_G, K from the sampling and histogram conditions, n'.

    * ``K_sampling = ceil(128·ln(3/(η·β))/η)`` (Chernoff, relative deviation 1/8, union bound over
      < 1/η hypotheses: every h with Pr[G = h] > η has frequency >= 7η/8 w.p. >= 1-β/3);
    * ``K_histogram`` = least K with ``K·η/8 >= T + t(K)``, ``t(K) = ceil((4/ε)·ln(3K/β))``: the
      histogram at (ε/2, δ) then releases every h of frequency >= η/8 with error <= η/8 w.p.
      >= 1-β/3 (our discrete-Laplace form of the condition ``K > 8(τ + t)/η``);
    * ``n' = n_GL(floor(2/η), α/2, β/3, ε/2)``; ``n_total = K·m + n'``.

    ``sampling_constant``, ``c_sample``, ``c_mechanism`` are our explicit constants, exposed.

    >>> p = theory_parameters(0.1, 0.1, 1.0, 1e-6, 1)
    >>> p.K, p.m, p.n_prime, p.n_total
    (1354324, 1310880, 8937, 1775356254057)
    """
    eps, dlt, a, b, _ = check_fit_parameters(epsilon, delta, alpha, beta)
    if dlt <= 0:
        raise PrivacyParameterError("the global-stability learner needs delta > 0 (stable histogram)")
    g = g_parameters(d, exact_fraction(a, "alpha") / 2)
    eta = g.eta_G
    inv_eta = 1 / eta  # an exact integer
    if not (inv_eta.denominator == 1):
        raise InvariantError("invariant broken: inv_eta.denominator == 1")
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
        d=d,
        alpha=a,
        beta=b,
        epsilon=eps,
        delta=dlt,
        n_aux=g.n_aux,
        N=g.N,
        m=g.m,
        eta=eta,
        K_sampling=k_sampling,
        K_histogram=k_hist,
        K=k,
        hist_threshold=threshold,
        n_prime=n_prime,
        n_total=k * g.m + n_prime,
    )


#: Above this Ldim the chain is not evaluated exactly: ``m`` alone has ``2^(d+2)`` bits (2 GB at d = 32).
EXACT_LDIM = 16


def global_stability_log10_sample_size(
    alpha: float, beta: float, epsilon: float, delta: float, d: int
) -> float:
    """``log10(n_total)`` for any d >= 1: exact for d <= :data:`EXACT_LDIM`, else :func:`log10_closed_form`.

    >>> round(global_stability_log10_sample_size(0.1, 0.1, 1.0, 1e-6, 1), 4)
    12.2493
    >>> f"{global_stability_log10_sample_size(0.1, 0.1, 1.0, 1e-6, 32):.4g}"
    '1.034e+10'
    """
    eps, dlt, a, b, _ = check_fit_parameters(epsilon, delta, alpha, beta)
    if dlt <= 0:
        raise PrivacyParameterError("the global-stability learner needs delta > 0 (stable histogram)")
    if d <= EXACT_LDIM:
        return math.log10(global_stability_sample_size(a, b, eps, dlt, d))
    return log10_closed_form(a, b, eps, dlt, d)


def log10_closed_form(alpha: float, beta: float, epsilon: float, delta: float, d: int) -> float:
    """The chain's ``log10(n_total)`` in floats (tests check it against the exact chain for small d).

    ``log n_total ≈ log K + log m`` (n' is negligible): ``ln(1/η) = ln(d+1) + (2^(d+2)+1) ln 2``,
    ``ln m = (2^(d+2)+1) ln 2 + 2(d+1) ln 2 + ln n_aux``, K the larger of the sampling condition
    ``128·ln(3/(ηβ))/η`` and the histogram's fixed point ``8(T + (4/ε)ln(3K/β))/η``.
    """
    ln2 = math.log(2)
    exponent = 2.0 ** (d + 2) + 1
    ln_inv_eta = math.log(d + 1) + exponent * ln2
    ln_m = exponent * ln2 + 2 * (d + 1) * ln2 + math.log(math.ceil(2 ** (d + 3) / alpha))
    ln_k_sampling = math.log(128 * (math.log(3) + ln_inv_eta - math.log(beta))) + ln_inv_eta
    threshold = StableHistogram(epsilon / 2, delta).threshold
    ln_k_hist = ln_k_sampling
    for _ in range(50):  # the fixed point K = 8(T + (4/ε) ln(3K/β))/η, in logs
        ln_k_hist = math.log(8 * (threshold + (4 / epsilon) * (math.log(3 / beta) + ln_k_hist))) + ln_inv_eta
    return (max(ln_k_sampling, ln_k_hist) + ln_m) / math.log(10)


def global_stability_sample_size(
    alpha: float, beta: float, epsilon: float, delta: float, d: int, **constants: float
) -> int:
    """``n_total`` of Theorem 1/3's learner (:func:`theory_parameters`); exact, possibly astronomical.

    >>> global_stability_sample_size(0.1, 0.1, 1.0, 1e-6, 1)
    1775356254057
    """
    return theory_parameters(alpha, beta, epsilon, delta, d, **constants).n_total


# -- the parameters one run uses (theory or practical) -----------------------------------------

#: per-batch learners: the paper's Algorithm G (theory mode) and correlated ERM (practical mode)
BATCH_LEARNERS = ("g", "correlated-erm")


@dataclass(frozen=True)
class MParameters:
    """What one run of Algorithm M uses; a pure function of public inputs (size, ε, δ, α, β, d).

    ``num_batches`` K and ``batch_size`` m; ``n_prime`` = |S'|. With ``expected_size = None`` the
    split is positional and exact (``K·m + n' = n``); with an int it is the *expected* layout of
    the random assignment (``K·m + n' = expected_size``, every example independently in batch j
    with probability ``m/expected_size``, in S' with probability ``n'/expected_size``).
    ``eta``: pruning cut ``3η/4``. The histogram runs at ``(hist_epsilon, δ)`` with threshold
    ``hist_threshold``, the exponential mechanism at ``select_epsilon``.
    ``batch_learner`` ``"g"``: G with ``n_aux``, ``budget``, depth uniform on ``{0..max_depth}``;
    ``"correlated-erm"``: :func:`~.correlated_erm.correlated_erm` with
    ``tolerance``, ``min_batch``, ``max_draws``.
    """

    mode: str
    num_batches: int
    batch_size: int
    n_prime: int
    eta: float
    hist_threshold: int
    hist_epsilon: float
    select_epsilon: float
    batch_learner: str = "g"
    n_aux: int = 1
    budget: int = 0
    max_depth: int = 0
    tolerance: float = 0.0
    min_batch: int = 1
    max_draws: int = 1
    expected_size: int | None = None

    def __post_init__(self) -> None:
        if self.batch_learner not in BATCH_LEARNERS:
            raise ValueError(f"batch_learner must be one of {BATCH_LEARNERS}, got {self.batch_learner!r}")

    @property
    def prune_below(self) -> float:
        return 3 * self.eta / 4

    def erm(self) -> ErmParameters:
        return ErmParameters(
            exact_fraction(self.tolerance, "tolerance") if self.tolerance else Fraction(0),
            self.min_batch,
            self.max_draws,
        )


class PracticalOptions(TypedDict):
    """The learner's options of practical mode (the keywords of :func:`practical_parameters`)."""

    stability: float
    prime_fraction: float
    tolerance: float
    max_draws: int


def practical_parameters(
    n: int,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
    *,
    stability: float = 0.25,
    prime_fraction: float = 0.2,
    tolerance: float = 0.5,
    max_draws: int = 2**16,
    expected: bool = False,
) -> MParameters:
    """Practical-mode parameters for a window of n examples (or an expected size n); privacy-free.

    Parallel composition (module docstring): the histogram at (ε, δ), the selection at ε.

    * T = the histogram's threshold at (ε, δ) (exact); ``K`` = least K with
      ``stability·K >= T + ceil((2/ε)·ln(3/β))``: a function output by a fraction ``stability`` of
      the batches clears T despite the noise w.p. >= 1-β/3 (capped by the data);
    * ``n'`` ≈ ``prime_fraction·n``, at most the n_GL of a list of ``K//T`` items; the batches get the
      rest: ``m = (n - n')//K`` (S' takes the remainder);
    * correlated ERM at tolerance ``τ = tolerance·α`` (the batch output has empirical error <= τ),
      least batch ``ceil(m/2)``, ``max_draws`` shared draws;
    * ``η = 4T/(3K)``: the pruning cut ``3η/4 = T/K`` is the histogram's own threshold.

    >>> p = practical_parameters(20_000, 1.0, 1e-6, 0.1, 0.1)
    >>> p.num_batches, p.batch_size, p.n_prime, p.hist_threshold, p.tolerance
    (140, 114, 4040, 28, 0.05)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    eps, dlt = check_privacy_parameters(epsilon, delta)
    if dlt <= 0:
        raise PrivacyParameterError("the global-stability learner needs delta > 0 (stable histogram)")
    if not 0 < stability <= 1 or not 0 < prime_fraction < 1 or not 0 < tolerance < 1:
        raise ValueError("stability must be in (0, 1], prime_fraction and tolerance in (0, 1)")
    if isinstance(max_draws, bool) or not isinstance(max_draws, int) or max_draws < 1:
        raise ValueError(f"max_draws must be an int >= 1, got {max_draws!r}")
    threshold = StableHistogram(eps, dlt).threshold
    margin = math.ceil((2 / eps) * math.log(3 / beta))
    k_target = math.ceil((threshold + margin) / stability)
    list_max = max(1, k_target // threshold)
    n_gl = n_generic_list(list_max, alpha / 2, beta / 3, eps)
    n_prime = min(max(1, math.floor(prime_fraction * n)), n, n_gl)
    k = min(k_target, n - n_prime)
    m = (n - n_prime) // k if k > 0 else 0
    if m == 0:
        k = 0
    eta = min(1.0, 4 * threshold / (3 * k)) if k else 1.0
    return MParameters(
        mode="practical",
        num_batches=k,
        batch_size=m,
        n_prime=n - k * m,
        eta=eta,
        hist_threshold=threshold,
        hist_epsilon=eps,
        select_epsilon=eps,
        batch_learner="correlated-erm",
        tolerance=float(exact_fraction(alpha, "alpha") * exact_fraction(tolerance, "t")),
        min_batch=max(1, math.ceil(m / 2)),
        max_draws=max_draws,
        expected_size=n if expected else None,
    )


def _theory_m_parameters(t: TheoryParameters, n: int, expected: bool) -> MParameters:
    return MParameters(
        mode="theory",
        num_batches=t.K,
        batch_size=t.m,
        n_prime=n - t.K * t.m,
        eta=float(t.eta),
        hist_threshold=t.hist_threshold,
        hist_epsilon=t.epsilon / 2,
        select_epsilon=t.epsilon / 2,
        batch_learner="g",
        n_aux=t.n_aux,
        budget=t.N,
        max_depth=t.d,
        expected_size=n if expected else None,
    )


# -- the split into batches and S' -------------------------------------------------------------


def positional_split(n: int, params: MParameters) -> np.ndarray:
    """Batch of every example when n is public: ``i // m`` for the first K·m, then S' (label K)."""
    k, m = params.num_batches, params.batch_size
    if k * m + params.n_prime != n:
        raise ValueError(f"layout K·m + n' = {k * m + params.n_prime} != n = {n}")
    out = np.full(n, k, dtype=np.int64)
    out[: k * m] = np.arange(k * m, dtype=np.int64) // max(m, 1)
    return out


def random_split(n: int, params: MParameters, rng: RandomSource) -> np.ndarray:
    """Batch of every example when n is private: independent draws, batch j w.p. m/E, S' (label K) else.

    ``E = expected_size = K·m + n'``; each example's draw is uniform on ``[0, E)`` from the learner's
    coins, independently of the data and of the other examples (the coupling of the module docstring).
    """
    total = params.expected_size
    if total is None:
        raise InvariantError("invariant broken: total is not None")
    if not (total == params.num_batches * params.batch_size + params.n_prime):
        raise InvariantError(
            "invariant broken: total == params.num_batches * params.batch_size + params.n_prime"
        )
    k, m = params.num_batches, params.batch_size
    draws = np.array([rng.uniform_int(total) for _ in range(n)], dtype=np.int64)
    return np.where(draws < k * m, draws // max(m, 1), k)


# -- Algorithm M -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MOutcome:
    """Result of :func:`algorithm_m`.

    ``hypothesis``, ``released`` (key -> noisy count, the histogram's DP output) and ``candidates``
    (the list L after pruning, in released key order) are private outputs. ``outputs`` (every
    batch's raw output, None for Fail), ``runs`` (G's runs, theory learner only) and ``batch_of``
    are a **non-private debug path**: tests and the trusted zone only, never published.
    """

    hypothesis: Hypothesis
    released: dict[Hashable, int]
    candidates: list[Hypothesis]
    outputs: list[Hypothesis | None]
    runs: list[GRun]
    batch_of: np.ndarray


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


def _g_outputs(
    hclass: HypothesisClass,
    xs: np.ndarray,
    ys: np.ndarray,
    batch_of: np.ndarray,
    params: MParameters,
    rng: RandomSource,
    tie: int,
) -> list[GRun]:
    """G on every batch: its first ``budget + n_aux`` examples (Fail when it has fewer)."""
    need = params.budget + params.n_aux
    runs = []
    for b in range(params.num_batches):
        idx = np.flatnonzero(batch_of == b)
        depth = rng.uniform_int(params.max_depth + 1)  # G's own coins
        if idx.shape[0] < need:
            runs.append(GRun(hypothesis=None, depth=depth, draws=0, mistakes=-1, tournament_size=-1))
            continue
        idx = idx[:need]
        runs.append(
            run_g(
                hclass,
                xs[idx],
                ys[idx],
                n_aux=params.n_aux,
                budget=params.budget,
                depth=depth,
                rng=rng,
                tie=tie,
            )
        )
    return runs


def algorithm_m(
    hclass: HypothesisClass,
    xs: np.ndarray,
    ys: np.ndarray,
    params: MParameters,
    *,
    epsilon: float,
    delta: float,
    rng: RandomSource,
    tie: int = 1,
    histogram: Histogram | None = None,
    split: Split | None = None,
) -> MOutcome:
    """Run the four steps of Algorithm M (module docstring) with ``params`` on validated arrays.

    ``epsilon`` is the total: the steps use ``params.hist_epsilon`` and ``params.select_epsilon``
    (whose composition is ``epsilon``). ``histogram`` (step 2) and ``split`` (step 1's assignment)
    are replaced only in the privacy audits' deliberately broken variants.
    """
    n, k = int(xs.shape[0]), params.num_batches
    if split is not None:
        batch_of = split(n, params, rng)
    elif params.expected_size is None:
        batch_of = positional_split(n, params)
    else:
        batch_of = random_split(n, params, rng)
    if params.batch_learner == "g":
        runs = _g_outputs(hclass, xs, ys, batch_of, params, rng, tie)
        outputs = [r.hypothesis for r in runs]
    else:
        runs = []
        outputs = correlated_erm(hclass, xs, ys, np.where(batch_of < k, batch_of, -1), k, params.erm(), rng)
    keys: list[Hashable] = [FAIL_KEY if h is None else h.key() for h in outputs]
    by_key: dict[Hashable, Hypothesis] = {h.key(): h for h in outputs if h is not None}
    if histogram is None:
        released = _stable_histogram(params.hist_epsilon, delta, rng).release(keys)  # (ε_H, δ)-DP
    else:
        released = histogram(keys, rng)
    # step 3 (post-processing): prune a_h = ĉ_h/K < 3η/4, and Fail
    candidates = [
        by_key[key] for key, c in released.items() if key != FAIL_KEY and c >= params.prune_below * k
    ]
    if not candidates:
        return MOutcome(default_hypothesis(hclass), released, candidates, outputs, runs, batch_of)
    tail = batch_of == k
    tail_x, tail_y = xs[tail], ys[tail]
    scores = [-_errors(h, tail_x, tail_y) for h in candidates]
    choice = ExponentialMechanism(params.select_epsilon, 1, rng=rng).select(scores)  # ε_S-DP in S'
    return MOutcome(candidates[choice], released, candidates, outputs, runs, batch_of)


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
    """Algorithm M as a :class:`~privstream.learning.private_learners.base.PrivateLearner`.

    Name ``"global-stability"``. Constructor parameters tune practical mode only
    (:func:`practical_parameters`) plus the SOA tie rule of G; none affects privacy. ``fit`` needs
    ``delta > 0`` and returns an (ε, δ)-DP release (see the module docstring), under replace-one
    neighbours, or under add/remove-one neighbours with ``expected_size`` (then every reported
    parameter is a function of ``expected_size`` and the configuration).

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> from privstream.learning.randomness import seeded
    >>> H = parse_class_spec("points:64")
    >>> xs = np.arange(8000) % 8; ys = (xs == 5).astype(np.uint8)
    >>> r = GlobalStabilityLearner().fit(H, xs, ys, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.1,
    ...                                  rng=seeded(0))
    >>> r.hypothesis.predict(5), r.epsilon, r.delta, r.proper, r.accuracy_guarantee_holds
    (1, 1.0, 1e-06, True, False)
    """

    name = "global-stability"
    mechanism = MECHANISM

    def __init__(
        self,
        *,
        tie: int = 1,
        stability: float = 0.25,
        prime_fraction: float = 0.2,
        tolerance: float = 0.5,
        max_draws: int = 2**16,
    ) -> None:
        if tie not in (0, 1) or isinstance(tie, bool):
            raise ValueError(f"tie must be 0 or 1, got {tie!r}")
        if not 0 < stability <= 1 or not 0 < prime_fraction < 1 or not 0 < tolerance < 1:
            raise ValueError("stability must be in (0, 1], prime_fraction and tolerance in (0, 1)")
        if isinstance(max_draws, bool) or not isinstance(max_draws, int) or max_draws < 1:
            raise ValueError(f"max_draws must be an int >= 1, got {max_draws!r}")
        self.tie = tie
        self.practical: PracticalOptions = {
            "stability": stability,
            "prime_fraction": prime_fraction,
            "tolerance": tolerance,
            "max_draws": max_draws,
        }

    def parameters_for(
        self,
        hclass: HypothesisClass,
        n: int,
        *,
        epsilon: float,
        delta: float,
        alpha: float,
        beta: float,
        expected_size: int | None = None,
    ) -> tuple[MParameters, TheoryParameters | None]:
        """The run's parameters (theory mode iff the size meets the theorem) and the theorem's chain.

        ``n`` is used only when ``expected_size`` is None; otherwise everything comes from it.
        """
        size = n if expected_size is None else expected_size
        d = _ldim(hclass)
        # beyond EXACT_LDIM n_total > 10^(10^4): theory mode is out of reach, the chain is not built
        theory = theory_parameters(alpha, beta, epsilon, delta, d) if 1 <= d <= EXACT_LDIM else None
        if theory is not None and size >= theory.n_total:
            return _theory_m_parameters(theory, size, expected_size is not None), theory
        return practical_parameters(
            size, epsilon, delta, alpha, beta, expected=expected_size is not None, **self.practical
        ), theory

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
    ) -> LearnerResult:
        eps, dlt, a, b, expected, points, labels = check_fit(
            hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, expected_size=expected_size
        )
        if dlt <= 0:
            raise PrivacyParameterError(
                "the global-stability learner is (epsilon, delta)-DP with delta > 0 (stable histogram); "
                "pass e.g. delta=1e-6"
            )
        n = int(points.shape[0])
        params, theory = self.parameters_for(
            hclass, n, epsilon=eps, delta=dlt, alpha=a, beta=b, expected_size=expected
        )
        outcome = algorithm_m(
            hclass, points, labels, params, epsilon=eps, delta=dlt, rng=resolve(rng), tie=self.tie
        )
        # d = 0: no theorem needed (one function); d > EXACT_LDIM: only its log10 (in the parameters)
        d = _ldim(hclass)
        needed = None if theory is None else theory.n_total
        composition = (
            "basic: stable histogram (eps/2, delta) + exponential mechanism eps/2"
            if params.mode == "theory"
            else "parallel: stable histogram (eps, delta) on the batches + exponential mechanism eps "
            "on the disjoint S'"
        )
        parameters: dict[str, Any] = {
            "alpha": a,
            "beta": b,
            **asdict(params),
            "ldim": d,
            "tie": self.tie,
            "neighbours": "replace-one" if expected is None else "add/remove-one",
            "composition": composition,
            "theorem": "BLM Thm 1 / ALBMM Thm 3 via Algorithm M (Thm 30), spec constants",
            "theorem_sample_size_log10": (
                round(math.log10(needed), 3)
                if needed
                else round(global_stability_log10_sample_size(a, b, eps, dlt, d), 3)
                if d > EXACT_LDIM
                else 0.0
            ),
        }
        if expected is None:  # n is public: the list size is post-processing of the histogram
            parameters["released_list_size"] = len(outcome.candidates)
        return LearnerResult(
            hypothesis=outcome.hypothesis,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=dlt,
            proper=is_member(hclass, outcome.hypothesis),
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=needed,
            accuracy_guarantee_holds=params.mode == "theory",
            neighbouring_relation=neighbouring_relation(expected),
        )

    def __repr__(self) -> str:
        return f"GlobalStabilityLearner(tie={self.tie}, **{self.practical})"
