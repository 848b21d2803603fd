"""The fooling sanitizer of GGKM21 (Thm 6.6 / Cor 6.7, via the generator/discriminator game of [BLM20a]).

A multiplicative-weights *generator* plays synthetic distributions ``q_t`` on ``Z`` (``Z = X``, or
``X × {0,1}`` for a labelled release); a private proper learner is the *discriminator*: each round
it is trained to tell a fresh random subsample ``S_t`` of the data (label "real") from ``|S_t|`` draws
of ``q_t`` (label "synthetic"). The distinguisher ``d_t`` it returns is a query of the class (or its
complement); its gap ``Pr_{S_t}[d_t] - Pr_{q_t}[d_t]`` is measured with discrete Laplace noise: below
``5α/16`` the generator's ``q_t`` is accepted and released, otherwise ``q_{t+1} ∝ q_t·exp(η·d_t)``.

**Discriminator.** The construction needs a proper (agnostic) private learner for ``Q = {h_f, ¬h_f}``. We run
the registered learner twice per round (labels as given, and flipped: the ``¬h_f`` half), at
``ε_L/2`` each; the noisy gaps pick the direction. Learner choice (``learner="auto"``): the GGKM
proper learner ``"proper"`` when it can handle the class (it needs the class as a
matrix, at most 4096 rows), else the generic learner ``"generic"`` (exponential mechanism over the
class, proper and ε-DP, agnostic-valid; our default), which works on ``2^32``
domains. Privacy holds with either; ``parameters["learner"]`` names the one used. The proper
learner's accuracy theorem is for realizable data, which the real-vs-synthetic task is not, so
with it ``accuracy_guarantee_holds`` is False.

**Privacy (total (ε, δ), δ > 0 required).** Per round, on the subsample: learner ``(ε_L, δ_L)``
(two halves, basic composition) + measurement ``ε_c`` (two counts at ``ε_c/2``), ``ε_0 = ε_L + ε_c = 1``
(``5/6 + 1/6``, our split). Subsampling a τ-fraction (uniform, without replacement, from the secure
source) amplifies this to ``(6τε_0, 4e^{6τε_0}τδ_L)`` [BNSV15 Lemma 4.12; needs ε_0 <= 1, τ <= 1/2].
Advanced composition over the T rounds (rounds are adaptive: q_t depends on earlier outputs only)
[DR14 Thm 3.20 / :func:`~privstream.learning.accounting.advanced_composition`] with slack δ/2 and
per-round δ <= δ/(2T) gives (ε, δ). We solve directly for the largest τ meeting the user's (ε, δ)
instead of the paper's outer subsampling step (Cor 6.7): both rest on the same lemma; this avoids
composing two amplifications. The learner's δ_L is whatever makes ``4e^{6τ}τδ_L = δ/(2T)``.

**Add/remove-one (``expected_size=m``, n private).** The fixed-size subsample ``m_t = ⌊τn⌋`` would
publish n, so each round takes a **Poisson subsample** instead (every example independently with
probability τ, from the secure source) and pits it against ``k = ⌊τm⌋`` synthetic draws; the
gap's normaliser is k and the learner is called with ``expected_size = 2k`` (its own add/remove
mode), so nothing reported depends on n. Per round the mechanism on the subsample is
``(ε_0, δ_L)``-DP under add/remove (the learner's halves and the two counts, sensitivity 1 each),
and Poisson subsampling at rate τ makes it ``(ln(1 + τ(e^{ε_0} - 1)), τδ_L)``-DP under add/remove
[Balle–Barthe–Gaboardi 2018, Thm 8; Li–Qardaji–Su 2012]. Since ``ln(1 + τ(e - 1)) <= (e - 1)τ <= 6τ``
and ``τδ_L <= 4e^{6τ}τδ_L``, every round is within the per-round guarantee budgeted above, and the
same advanced composition gives (ε, δ) under add/remove-one. (That is an add/remove statement;
we do not claim the replace-one guarantee in this mode.) τ is rounded down to a multiple of
2^-32 so the Bernoulli(τ) draws are exact; a smaller τ only strengthens the bound.

**Empty and tiny samples.** When the subsample size (``⌊τn⌋`` with n public, ``⌊τm⌋`` with n
private) is 0, no round can measure anything: the release is the generator's initial uniform
distribution, computed without looking at the data (0-DP, charged as usual). With n private a
Poisson subsample may be empty in a round; the learner then trains on the synthetic draws alone.

**Departures from the paper.** The generator is MW over ``Z``, whose round
bound ``T_MW = ceil(ln|Z|/(2γ²))``, ``γ = α/4``, depends on ``log|X|`` instead of the dual Littlestone
dimension; the learner runs at ``α/16`` with confidence ``β/(4T)`` (our constants, not Appendix C's).
``rounds`` (default 20) is a practical cap; with fewer than ``T_MW`` rounds the accuracy theorem does
not apply (reported). :func:`fooling_sample_size` computes the n at which this argument closes.
"""

from __future__ import annotations

import inspect
import math
from functools import lru_cache
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee, advanced_composition
from privstream.learning.errors import InvariantError, LearningInputError
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass
from privstream.learning.mechanisms import DiscreteLaplaceMechanism
from privstream.learning.private_learners.base import (
    LEARNERS,
    make_learner,
    neighbouring_relation,
)
from privstream.learning.randomness import RandomSource, resolve
from privstream.learning.sanitizers.base import SanitizerInputError, SanitizerResult, check_sanitizer_fit
from privstream.learning.sanitizers.mwem import BlockState

__all__ = [
    "MECHANISM",
    "FoolingBudget",
    "FoolingSanitizer",
    "fooling_budget",
    "fooling_sample_size",
    "poisson_subsample",
]

MECHANISM = "fooling-mw"
EPS_LEARNER = 5 / 6  # ε_L + ε_c = 1 per round on the subsample (ε_0 <= 1 for the amplification lemma)
EPS_CHECK = 1 / 6
#: τ is a multiple of 2^-TAU_BITS, so a Bernoulli(τ) draw is TAU_BITS exact random bits.
TAU_BITS = 32


@runtime_checkable
class _LatticeLearner(Protocol):
    """A learner that builds the class lattice it learns over (the proper learner)."""

    def lattice(self, hclass: HypothesisClass) -> object: ...


class FoolingBudget(dict[str, float]):
    """Per-round parameters solved from the user's (ε, δ): tau, eps_round, delta_round, delta_learner."""


def _amplified(tau: float, eps0: float) -> float:
    return 6 * tau * eps0


def fooling_budget(epsilon: float, delta: float, rounds: int) -> FoolingBudget:
    """The largest subsampling fraction τ (<= 1/2) whose T-round composition is within (ε, δ).

    >>> b = fooling_budget(1.0, 1e-6, 20)
    >>> 0 < b["tau"] <= 0.5 and b["epsilon_spent"] <= 1.0
    True
    """
    return FoolingBudget(_fooling_budget(float(epsilon), float(delta), int(rounds)))


@lru_cache(maxsize=256)
def _fooling_budget(epsilon: float, delta: float, rounds: int) -> FoolingBudget:
    if delta <= 0:
        raise SanitizerInputError("the fooling sanitizer needs delta > 0 (advanced composition)")
    slack = delta / 2
    delta_round = delta / (2 * rounds)

    def total(tau: float) -> float:
        g = PrivacyGuarantee(_amplified(tau, 1.0), delta_round)
        return advanced_composition(g, rounds, slack).epsilon

    lo, hi = 0.0, 0.5
    if total(hi) <= epsilon:
        lo = hi
    else:
        for _ in range(100):  # total(τ) is increasing in τ
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if total(mid) <= epsilon else (lo, mid)
    tau = math.floor(lo * 2**TAU_BITS) / 2**TAU_BITS  # dyadic: exact Poisson draws; smaller is safer
    eps_round = _amplified(tau, 1.0)
    spent = advanced_composition(PrivacyGuarantee(eps_round, delta_round), rounds, slack)
    if spent.epsilon > epsilon or spent.delta > delta * (1 + 1e-12):
        raise AssertionError("fooling budget exceeds (epsilon, delta)")
    delta_learner = delta_round / (4 * math.exp(eps_round) * tau) if tau > 0 else 0.0
    return FoolingBudget(
        tau=tau,
        epsilon_round=eps_round,
        delta_round=delta_round,
        delta_learner=min(delta_learner, 0.5),
        epsilon_spent=spent.epsilon,
        delta_spent=spent.delta,
    )


def fooling_sample_size(
    hclass: HypothesisClass, alpha: float, beta: float, epsilon: float, delta: float, labelled: bool = False
) -> tuple[int, int]:
    """``(n, T_MW)`` at which the module's argument closes (see :func:`_sample_size_cached`)."""
    return _sample_size_cached(hclass.domain_size, hclass.size, alpha, beta, epsilon, delta, labelled)


@lru_cache(maxsize=256)
def _sample_size_cached(
    domain_size: int, class_size: int, alpha: float, beta: float, epsilon: float, delta: float, labelled: bool
) -> tuple[int, int]:
    """``(n, T_MW)`` at which the module's argument closes with the generic discriminator (our derivation).

    T_MW = ceil(ln|Z|/(2γ²)), γ = α/4. Per round the subsample m must give (each w.p. 1 - β/(4T)):
    the learner's empirical excess error <= α/32 on 2m examples (exponential mechanism:
    ``2·ln(|Q|·4T/β)/(ε_L/2) <= (α/32)·2m``), the Laplace error <= α/32
    (``ln(8T/β)/((ε_c/2)·m) <= α/32``), and uniform convergence of S_t and the synthetic draws over Q
    to within α/64 each (Hoeffding + union bound, ``m >= ln(16T·|Q|/β)·2·64²/2``). Then n = m/τ.
    """
    z = domain_size * (2 if labelled else 1)
    gamma = alpha / 4
    t_mw = math.ceil(math.log(max(z, 2)) / (2 * gamma**2))
    log_q = math.log(2 * class_size)
    m_learn = 2 * (log_q + math.log(4 * t_mw / beta)) / (EPS_LEARNER / 2) / (alpha / 16)
    m_lap = math.log(8 * t_mw / beta) / (EPS_CHECK / 2) / (alpha / 32)
    m_uc = (log_q + math.log(16 * t_mw / beta)) * 64**2
    m = math.ceil(max(m_learn, m_lap, m_uc))
    tau = fooling_budget(epsilon, delta, t_mw)["tau"]
    return math.ceil(m / tau), t_mw


def _subsample(n: int, m: int, rng: RandomSource) -> np.ndarray:
    """m distinct indices of range(n), uniformly (Floyd's algorithm on the secure source)."""
    chosen: set[int] = set()
    for j in range(n - m, n):
        t = rng.uniform_int(j + 1)
        chosen.add(j if t in chosen else t)
    return np.fromiter(chosen, dtype=np.int64, count=m)


def poisson_subsample(n: int, tau: float, rng: RandomSource) -> np.ndarray:
    """Indices of range(n), each kept independently with probability τ (exact: τ·2^32 is an integer).

    >>> from privstream.learning.randomness import seeded
    >>> poisson_subsample(0, 0.5, seeded(0)).tolist(), poisson_subsample(4, 1.0, seeded(0)).tolist()
    ([], [0, 1, 2, 3])
    """
    threshold = tau * 2**TAU_BITS
    if threshold != math.floor(threshold):
        raise ValueError(f"tau must be a multiple of 2^-{TAU_BITS}, got {tau!r}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    raw = rng.getrandbits(TAU_BITS * n).to_bytes(4 * n, "little")
    draws = np.frombuffer(raw, dtype="<u4")
    return np.flatnonzero(draws < threshold).astype(np.int64)


class FoolingSanitizer:
    """The fooling sanitizer as a :class:`~privstream.learning.sanitizers.base.Sanitizer`.

    ``learner``: ``"auto"`` (``"proper"`` when it accepts the class, else ``"generic"``) or a registered
    learner name; ``rounds`` T (privacy is accounted for all T rounds); ``learning_rate`` η of the MW
    generator (default α, i.e. ``η_MW = 4γ``). ``broken`` names a deliberately broken variant
    for the privacy audits only (``"noiseless_check"``: the gap measured without noise).
    """

    name: ClassVar[str] = "fooling"

    def __init__(
        self,
        learner: str = "auto",
        rounds: int = 20,
        learning_rate: float | None = None,
        *,
        broken: str | None = None,
    ) -> None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise SanitizerInputError(f"rounds must be an int >= 1, got {rounds!r}")
        if learner != "auto" and learner not in LEARNERS:
            known = ", ".join(sorted(LEARNERS))
            raise SanitizerInputError(f"unknown learner {learner!r}; known: auto, {known}")
        if broken not in (None, "noiseless_check"):
            raise SanitizerInputError(f"unknown broken variant {broken!r}")
        self.learner, self.rounds, self.learning_rate, self.broken = learner, rounds, learning_rate, broken

    def _learner_name(self, hclass: HypothesisClass, n_private: bool) -> tuple[str, str]:
        """The discriminator: a function of the class and the mode only (never of the data)."""
        if self.learner != "auto":
            return self.learner, "chosen by the caller"
        if "proper" in LEARNERS:
            proper = make_learner("proper")
            if not isinstance(proper, _LatticeLearner):
                return "generic", "proper learner cannot take this class (it has no class lattice)"
            try:
                proper.lattice(hclass)
            except (LearningInputError, AttributeError) as exc:
                return "generic", f"proper learner cannot take this class ({str(exc)[:80]})"
            if n_private and "expected_size" not in inspect.signature(proper.fit).parameters:
                return "generic", "proper learner has no mode for a private n (expected_size)"
            return "proper", "GGKM proper learner (the paper's discriminator)"
        return "generic", "proper learner not registered"

    def fit(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray | None = None,
        *,
        epsilon: float,
        delta: float = 0.0,
        alpha: float = 0.1,
        beta: float = 0.1,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> SanitizerResult:
        eps, dlt, a, b, size, points, labels = check_sanitizer_fit(
            hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, expected_size=expected_size
        )
        budget = fooling_budget(eps, dlt, self.rounds)
        n = int(points.shape[0])
        tau = budget["tau"]
        # k: the synthetic draws per round and the gap's normaliser; public in both modes
        k = math.floor(tau * (n if size is None else size))
        learner_name, why = self._learner_name(hclass, size is not None)
        learner = make_learner(learner_name)
        learner_options: dict[str, Any] = {} if size is None else {"expected_size": max(2 * k, 1)}
        source = resolve(rng)
        labelled = labels is not None
        state = BlockState(hclass.domain_size, labelled, dense=isinstance(hclass, FiniteClass))
        eta = a if self.learning_rate is None else float(self.learning_rate)
        threshold = 5 * a / 16
        check = DiscreteLaplaceMechanism(EPS_CHECK / 2, 1, rng=source)
        gen = np.random.default_rng(source.getrandbits(128))  # shuffles of public order only
        transcript: list[dict[str, Any]] = []
        accepted = False
        for _ in range(self.rounds if k >= 1 else 0):  # k = 0: the uniform start, data untouched
            q = state.distribution()
            idx = _subsample(n, k, source) if size is None else poisson_subsample(n, tau, source)
            real_x = points[idx]
            drawn = q.sample(k, source)
            if isinstance(drawn, tuple):  # a labelled distribution draws (points, labels)
                if labels is None:
                    raise InvariantError("invariant broken: labels is not None")
                syn_x, syn_y = drawn
                xs_l = np.concatenate([real_x, syn_x])
                ys_l = np.concatenate([labels[idx], 1 - syn_y]).astype(np.uint8)
            else:
                syn_x = drawn
                xs_l = np.concatenate([real_x, syn_x])
                ys_l = np.concatenate([np.ones(idx.shape[0], np.uint8), np.zeros(k, np.uint8)])
            order = gen.permutation(xs_l.shape[0])
            xs_l, ys_l = xs_l[order], ys_l[order]
            best: tuple[float, bool, Hypothesis, int] | None = None
            for negate in (False, True):
                fit = learner.fit(
                    hclass,
                    xs_l,
                    (1 - ys_l if negate else ys_l).astype(np.uint8),
                    epsilon=EPS_LEARNER / 2,
                    delta=budget["delta_learner"] / 2,
                    alpha=a / 16,
                    beta=min(b / (4 * self.rounds), 0.5),
                    rng=source,
                    **learner_options,
                )
                f = fit.hypothesis
                truth = labels[idx] if labels is not None else 1
                agree = f.predict(real_x) == truth  # q_f on the subsample
                count = int((agree != negate).sum())
                noisy = count if self.broken == "noiseless_check" else int(check.release(count))
                syn_mass = q.answer(f)
                gap = noisy / k - (1 - syn_mass if negate else syn_mass)
                transcript.append({"query": f.to_dict(), "negated": negate, "noisy_count": noisy})
                if best is None or gap > best[0]:
                    best = (gap, negate, f, noisy)
            if best is None:
                raise InvariantError("invariant broken: best is not None")
            gap, negate, f, _ = best
            if gap < threshold:
                accepted = True
                break
            state.refine(f.change_points()[1])
            mask = state.cells(f)
            state.weights = np.where(mask != negate, state.weights * math.exp(eta), state.weights)
            state.weights /= state.weights.sum()
        needed, t_mw = _sample_size_cached(hclass.domain_size, hclass.size, a, b, eps, dlt, labelled)
        parameters: dict[str, Any] = {
            "alpha": a,
            "beta": b,
            "rounds": self.rounds,
            "learning_rate": eta,
            "learner": learner_name,
            "learner_reason": why,
            "learner_epsilon_per_direction": EPS_LEARNER / 2,
            "check_epsilon_per_direction": EPS_CHECK / 2,
            "subsampling": "uniform without replacement, n public"
            if size is None
            else "Poisson at rate tau, n private",
            "subsample_size": k,
            **budget,
            "accept_threshold": threshold,
            "theorem": "GGKM21 Thm 6.6 (MW generator, log|Z| rounds; BNSV15 L4.12; DR14 3.20)",
            "theorem_rounds": t_mw,
        }
        if size is not None:
            parameters["expected_size"] = size
        holds = learner_name == "generic" and self.rounds >= t_mw and (n if size is None else size) >= needed
        return SanitizerResult(
            distribution=state.distribution(),
            mechanism=MECHANISM,
            epsilon=eps,
            delta=dlt,
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=needed,
            accuracy_guarantee_holds=holds,
            neighbouring_relation=neighbouring_relation(size),
            dp_outputs={"accepted": accepted, "transcript": transcript},
        )

    def __repr__(self) -> str:
        return f"FoolingSanitizer(learner={self.learner!r}, rounds={self.rounds})"
