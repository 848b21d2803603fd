"""MWEM (Hardt–Ligett–McSherry, NeurIPS 2012) over a stream's class, with exact selection and noise.

Queries: for each h in the class, ``q_h(D) = #{x in D : h(x) = 1}`` (unlabelled) or
``#{(x, y) in D : h(x) = y}`` (labelled). With a public normaliser ``ν`` (the size of D, see
below), each of T rounds:

1. **Select** a query by the exponential mechanism with score ``σ·(q_h(D) - ν·q_h(A))`` over all
   ``(h, σ)``, ``σ = ±1`` (sensitivity 1: ``A`` and ν are public). Exact sampler, never a float softmax
   (:func:`~privstream.learning.sanitizers.selection.select_piecewise` over linear pieces for
   thresholds/intervals/points; :class:`~privstream.learning.mechanisms.ExponentialMechanism` over the
   rows for file classes). Intervals: ``(p, q)`` drawn as two independent exact exponential draws
   with scores ``-G(p)`` and ``G(q)``; their joint law is ``∝ exp(ε_s·(G(q) - G(p))/2)``, the
   exponential mechanism over endpoint pairs whose score (the signed error of ``[min, max)``) has
   sensitivity 1 -- so the pair costs ε_s, not 2ε_s.
2. **Measure** ``q(D)`` with the exact discrete Laplace mechanism (integer count, sensitivity 1).
3. **Update** ``A(x) ∝ A(x)·exp(q(x)·(v - q(A))/2)`` with ``v = m/ν`` clipped to [0, 1] (m the noisy
   count; clipping to the range of a fraction is post-processing and keeps every step finite on
   tiny or empty samples), then replay all past measurements ``repetitions`` times
   (post-processing, as in HLM12 §3 and Hardt's reference code).

**The normaliser ν.** With n public (``expected_size=None``) ν = n (1 on an empty sample), as in
the paper. With n private (``expected_size`` set) ν must not be n: normalising by the true n would
put n into every released weight (the released A determines ``m/ν``, and m is published in the
transcript, so ν = n would be read off exactly). Instead a share ``count_share`` of the budget
buys a **noisy count** ``n̂ = n + DLap`` (sensitivity 1 under add/remove), and ν = max(n̂, 1):
a DP output, so the selection scores and updates depend on n only through it.

**Privacy under add/remove-one (n private).** Adding or removing one example changes n̂'s input
by 1, each ``q_h(D)`` by at most 1 and nothing else (ν, A and the past outputs are public), so
the count, every selection and every measurement keep their sensitivity 1; the composition below
(basic or zCDP, which do not care about the neighbouring relation) covers the count plus the T
rounds. Under replace-one n does not change and the count is 0-sensitive, so the same (ε, δ)
holds there too. With n public, replace-one: the paper's argument, ν = n being public.

**Budget: the user's (ε, δ) is the total** (a per-iteration ε is the known pitfall of MWEM
implementations). ``composition="basic"`` (δ = 0): the count gets ``count_share·ε`` (n private
only) and each round an equal part of the rest, split ``selection_share`` / ``1 - selection_share`` between
selection and measurement (Dwork–Roth Thm 3.16). ``composition="zcdp"`` (δ > 0, the default
then): ρ = zcdp_for_dp(ε, δ) (Bun–Steinke Prop 1.3), split the same way; the exponential mechanism
at ε_s is ε_s²/8-zCDP (Cesar–Rogers 2021) and the discrete Laplace at ε_m is ε_m²/2-zCDP
(BS16 Prop 1.4). Both splits are re-checked with :mod:`privstream.learning.accounting` before any
data is touched. ``schedule="linear"`` gives round t a share ∝ t instead of 1/T (measured worse on
the 1-D benchmarks, so uniform is the default).

**Domain and representation.** The domain is the class's public ``{0..N-1}``; ``A`` starts uniform
and is kept as weights over blocks whose edges are the change points of the *selected* queries
(at most 2 new edges per round), so a round costs O(n log n + blocks) on a ``2^32`` domain.
File classes use one block per point and the class's truth table.

**Accuracy** (HLM12 Thm 2.2, basic composition, output = average of the A_i): with probability
``1 - 2T/|Q|^c``, ``max_q |q(A) - q(D)|/n <= 2·sqrt(ln N / T) + 10·T·ln|Q|/(ε n)``. The
``theorem_sample_size`` is the n making this ``<= α`` at ``T = ceil(16 ln N/α²)``:
``n >= 320·ln N·ln|Q|/(ε α³)``; with n private the bound and ``accuracy_guarantee_holds`` use
``expected_size`` instead of n. The default ``output="last"`` with replays is the practical mode
(much better in practice; the theorem is stated for the average).

>>> from privstream.learning.hypothesis_classes import Thresholds
>>> from privstream.learning.randomness import seeded
>>> res = MWEMSanitizer(rounds=3).fit(Thresholds(16), np.array([], dtype=np.int64), epsilon=1.0,
...                                   rng=seeded(0), expected_size=1000)
>>> res.neighbouring_relation, res.parameters["epsilon_count"], sorted(res.dp_outputs)
('add-remove-one', 0.05, ['noisy_size', 'transcript'])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privstream.learning.accounting import PrivacyGuarantee, basic_composition, zcdp_for_dp, zcdp_to_dp
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import (
    FiniteClass,
    HypothesisClass,
    Intervals,
    Points,
    Thresholds,
    interval_hypothesis,
    point_hypothesis,
    threshold_hypothesis,
)
from privstream.learning.mechanisms import DiscreteLaplaceMechanism, ExponentialMechanism
from privstream.learning.private_learners.base import (
    neighbouring_relation,
)
from privstream.learning.randomness import RandomSource, resolve
from privstream.learning.sanitizers.base import SanitizerInputError, SanitizerResult, check_sanitizer_fit
from privstream.learning.sanitizers.distribution import SyntheticDistribution
from privstream.learning.sanitizers.evaluation import finite_signed_errors, score_inputs
from privstream.learning.sanitizers.selection import Pieces, PointScore, PrefixScore, select_piecewise

__all__ = [
    "DEFAULT_COUNT_SHARE",
    "MECHANISM",
    "BlockState",
    "MWEMSanitizer",
    "mwem_budget",
    "mwem_sample_size",
]

MECHANISM = "mwem"
#: Share of the budget spent on the noisy count ν when n is private (``expected_size`` set).
DEFAULT_COUNT_SHARE = 0.05


def _shares(rounds: int, schedule: str) -> list[float]:
    """Fractions of the budget per round: equal, or growing linearly (t / (T(T+1)/2), t = 1..T)."""
    if schedule == "uniform":
        return [1.0 / rounds] * rounds
    if schedule == "linear":
        total = rounds * (rounds + 1) / 2
        return [t / total for t in range(1, rounds + 1)]
    raise SanitizerInputError(f"unknown schedule {schedule!r}; use 'uniform' or 'linear'")


def mwem_budget(
    epsilon: float,
    delta: float,
    rounds: int,
    composition: str,
    selection_share: float,
    schedule: str = "uniform",
    count_share: float = 0.0,
) -> tuple[list[float], list[float], dict[str, Any]]:
    """Per-round ``(ε_select[t], ε_measure[t])`` whose T-fold composition is within (ε, δ), and a record.

    ``schedule="linear"`` gives round t a share ∝ t (later rounds, which must tell apart smaller
    errors, get more); the composition is checked the same way. ``count_share > 0`` reserves that
    share of the budget (of ε, or of ρ under zCDP) for the noisy count; the record's
    ``epsilon_count`` is its discrete-Laplace ε (0 when there is no count).

    >>> s, m, _ = mwem_budget(1.0, 0.0, 10, "basic", 0.5)
    >>> round(s[0], 6), round(m[-1], 6)
    (0.05, 0.05)
    >>> s, m, record = mwem_budget(1.0, 0.0, 10, "basic", 0.5, count_share=0.1)
    >>> round(s[0], 6), record["epsilon_count"], round(record["epsilon_spent"], 9)
    (0.045, 0.1, 1.0)
    """
    shares = _shares(rounds, schedule)
    if not 0 <= count_share < 1:
        raise SanitizerInputError(f"count_share must be in [0, 1), got {count_share!r}")
    if composition == "basic":
        eps_count = count_share * epsilon
        rest = epsilon - eps_count
        eps_s = [selection_share * rest * f for f in shares]
        eps_m = [(1 - selection_share) * rest * f for f in shares]
        parts = eps_s + eps_m + ([eps_count] if eps_count > 0 else [])
        total = basic_composition([PrivacyGuarantee(e) for e in parts])
        if total.epsilon > epsilon * (1 + 1e-12):
            raise AssertionError("basic composition exceeds the budget")
        return (
            eps_s,
            eps_m,
            {
                "composition": "basic",
                "epsilon_count": eps_count,
                "epsilon_spent": total.epsilon,
                "delta_spent": 0.0,
            },
        )
    if composition == "zcdp":
        if delta <= 0:
            raise SanitizerInputError("composition 'zcdp' needs delta > 0")
        rho = zcdp_for_dp(epsilon, delta)
        eps_count = math.sqrt(2 * count_share * rho) * (1 - 1e-12)
        rest = (1 - count_share) * rho
        eps_s = [math.sqrt(8 * selection_share * rest * f) * (1 - 1e-12) for f in shares]
        eps_m = [math.sqrt(2 * (1 - selection_share) * rest * f) * (1 - 1e-12) for f in shares]
        rho_total = math.fsum(s * s / 8 + m * m / 2 for s, m in zip(eps_s, eps_m, strict=True))
        rho_total += eps_count * eps_count / 2
        spent = zcdp_to_dp(rho_total, delta)
        if spent > epsilon:
            raise AssertionError("zCDP composition exceeds the budget")
        return (
            eps_s,
            eps_m,
            {
                "composition": "zcdp",
                "rho": rho_total,
                "epsilon_count": eps_count,
                "epsilon_spent": spent,
                "delta_spent": delta,
            },
        )
    raise SanitizerInputError(f"unknown composition {composition!r}; use 'basic' or 'zcdp'")


def mwem_sample_size(domain_size: int, num_queries: int, epsilon: float, alpha: float) -> int:
    """HLM12 Thm 2.2 made explicit: ``ceil(320·ln N·ln|Q|/(ε α³))`` (see the module docstring).

    >>> mwem_sample_size(2**16, 2 * (2**16 + 1), 1.0, 0.1)
    41818685
    """
    log_n = math.log(max(domain_size, 2))
    return math.ceil(320 * log_n * math.log(max(num_queries, 2)) / (epsilon * alpha**3))


class BlockState:
    """MW weights over consecutive blocks (uniform inside a block); labelled: one column per label."""

    def __init__(self, domain_size: int, labelled: bool, dense: bool = False) -> None:
        self.domain_size = domain_size
        self.labelled = labelled
        if dense:
            self.edges = np.arange(domain_size + 1, dtype=np.int64)
            shape: tuple[int, ...] = (domain_size, 2) if labelled else (domain_size,)
            self.weights = np.full(shape, 1.0 / (domain_size * (2 if labelled else 1)))
        else:
            self.edges = np.array([0, domain_size], dtype=np.int64)
            self.weights = np.array([[0.5, 0.5]]) if labelled else np.array([1.0])

    def refine(self, cuts: list[int], *others: np.ndarray) -> list[np.ndarray]:
        """Split blocks at ``cuts`` (mass split by length); ``others`` are refined the same way."""
        inside = [c for c in cuts if 0 < c < self.domain_size]
        if not inside:
            return list(others)
        new_edges = np.union1d(self.edges, np.array(inside, dtype=np.int64))
        if new_edges.shape[0] == self.edges.shape[0]:
            return list(others)
        j = np.searchsorted(self.edges, new_edges[:-1], side="right") - 1
        frac = np.diff(new_edges) / np.diff(self.edges)[j]
        if self.labelled:
            frac = frac[:, None]
        out = [w[j] * frac for w in others]
        self.weights = self.weights[j] * frac
        self.edges = new_edges
        return out

    def cells(self, h: Hypothesis) -> np.ndarray:
        """Mask of the cells where ``q_h = 1`` (blocks already refined at h's change points)."""
        ones = h.predict(self.edges[:-1]).astype(bool)
        return np.stack([~ones, ones], axis=1) if self.labelled else ones

    def answer(self, h: Hypothesis) -> float:
        return float(self.weights[self.cells(h)].sum())

    def update(self, h: Hypothesis, measured: float) -> None:
        """One MW step towards the measured fraction (HLM12 step 3, normalised form)."""
        mask = self.cells(h)
        step = math.exp((measured - float(self.weights[mask].sum())) / 2)
        self.weights = np.where(mask, self.weights * step, self.weights)
        self.weights /= self.weights.sum()

    def replay(self, history: list[tuple[Hypothesis, float]], repetitions: int) -> None:
        """``repetitions`` passes of MW steps over past (query, measurement) pairs (post-processing).

        Same step as :meth:`update`, on flat float masks with the normaliser computed from the
        answer ((1 - a) + e^s·a), because the replays dominate the cost on small domains.
        """
        if not repetitions or not history:
            return
        shape = self.weights.shape
        w = self.weights.reshape(-1).copy()
        masks = [self.cells(h).reshape(-1).astype(np.float64) for h, _ in history]
        values = [v for _, v in history]
        for _ in range(repetitions):
            for m, v in zip(masks, values, strict=True):
                a = float(w @ m)
                f = math.exp((v - a) / 2)
                w *= 1.0 + (f - 1.0) * m
                w /= (1.0 - a) + f * a
        self.weights = w.reshape(shape)

    def distribution(self, weights: np.ndarray | None = None) -> SyntheticDistribution:
        w = self.weights if weights is None else weights
        return SyntheticDistribution(self.domain_size, self.edges.tolist(), w / w.sum())


def _constant(score: Fraction) -> Callable[[int], Fraction]:
    """The exact score of a one-candidate piece: the same at every ``t``."""
    return lambda _t: score


class MWEMSanitizer:
    """MWEM as a :class:`~privstream.learning.sanitizers.base.Sanitizer` (name ``"mwem"``).

    ``rounds`` T (data-independent), ``repetitions`` replays of past measurements per round (50: on
    the 1-D benchmarks 10-15% lower max error than 10, at ~2x the time),
    ``composition`` ``"basic"``/``"zcdp"`` (default: zcdp when δ > 0, else basic), ``output``
    ``"last"`` or ``"average"`` (HLM12's output), ``selection_share`` of each round's budget,
    ``count_share`` of the whole budget for the noisy count ν when n is private.
    ``noisy_selection=False`` / ``noisy_measurement=False`` / ``noisy_size=False`` are deliberately
    broken variants (argmax selection, exact counts, ν = the true n when n is private) that the
    privacy audits must catch; never use them otherwise.
    """

    name: ClassVar[str] = "mwem"

    def __init__(
        self,
        rounds: int = 20,
        repetitions: int = 50,
        composition: str | None = None,
        output: str = "last",
        selection_share: float = 0.5,
        schedule: str = "uniform",
        count_share: float = DEFAULT_COUNT_SHARE,
        *,
        noisy_selection: bool = True,
        noisy_measurement: bool = True,
        noisy_size: bool = True,
        dense: bool = False,
    ) -> None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise SanitizerInputError(f"rounds must be an int >= 1, got {rounds!r}")
        if isinstance(repetitions, bool) or not isinstance(repetitions, int) or repetitions < 0:
            raise SanitizerInputError(f"repetitions must be an int >= 0, got {repetitions!r}")
        if output not in ("last", "average"):
            raise SanitizerInputError(f"output must be 'last' or 'average', got {output!r}")
        if not 0 < selection_share < 1:
            raise SanitizerInputError(f"selection_share must be in (0, 1), got {selection_share!r}")
        if not 0 < count_share < 1:
            raise SanitizerInputError(f"count_share must be in (0, 1), got {count_share!r}")
        self.rounds, self.repetitions, self.composition = rounds, repetitions, composition
        self.count_share, self.noisy_size = float(count_share), noisy_size
        _shares(1, schedule)  # validate
        self.output, self.selection_share, self.schedule = output, selection_share, schedule
        self.noisy_selection, self.noisy_measurement, self.dense = noisy_selection, noisy_measurement, dense

    # -- selection ------------------------------------------------------------------------------

    def _select(
        self,
        hclass: HypothesisClass,
        xs: np.ndarray,
        ys: np.ndarray | None,
        state: BlockState,
        eps_s: float,
        rng: RandomSource,
        scale: int,
    ) -> Hypothesis:
        """One exact EM draw with score ``σ·(q_h(D) - scale·q_h(A))``; ``scale`` is the public ν."""
        n, big_n = xs.shape[0], hclass.domain_size
        if isinstance(hclass, FiniteClass):
            scores = finite_signed_errors(hclass, xs, ys, state.distribution().density(), scale=scale)
            signed = scores + [-s for s in scores]
            if self.noisy_selection:
                i = ExponentialMechanism(eps_s, 1, rng=rng).select(signed)
            else:  # BROKEN on purpose (audits only)
                i = max(range(len(signed)), key=signed.__getitem__)
            return hclass.hypothesis(i % len(scores))
        xs_s = xs  # fit passes the data sorted by x (and the labels in the same order)
        a, w, base, offset = score_inputs(hclass, ys, state.weights)
        if ys is None:
            a = np.ones(n, dtype=np.int64)
        if isinstance(hclass, Points):
            score = PointScore(xs_s, a, state.edges, w, scale, base=base)
            empty_exact = offset - scale * Fraction(base)  # the all-zero function
            one = np.array([0], dtype=np.int64), np.array([1], dtype=np.int64)
            families = [score.pieces(1, offset), score.pieces(-1, offset)] + [
                Pieces(
                    *one,
                    np.array([s * float(empty_exact)]),
                    np.zeros(1),
                    _constant(s * empty_exact),
                    float(n + scale),
                )
                for s in (1, -1)
            ]
            f, t = self._draw(families, eps_s, rng)
            return point_hypothesis(big_n, t if f < 2 else None)
        prefix = PrefixScore(xs_s, a, state.edges, w, scale, base=base)
        if isinstance(hclass, Thresholds):
            _, t = self._draw([prefix.pieces(1, offset), prefix.pieces(-1, offset)], eps_s, rng)
            return threshold_hypothesis(big_n, t)
        if isinstance(hclass, Intervals):
            _, p = self._draw([prefix.pieces(-1)], eps_s, rng)
            _, q = self._draw([prefix.pieces(1)], eps_s, rng)
            return interval_hypothesis(big_n, min(p, q), max(p, q))
        raise SanitizerInputError(f"mwem does not support the class {hclass.spec}")

    def _draw(self, families: list[Pieces], eps_s: float, rng: RandomSource) -> tuple[int, int]:
        if self.noisy_selection:
            return select_piecewise(families, eps_s, rng)
        # BROKEN on purpose (audits only): the exact argmax, no noise
        best = max(
            (
                (p.values[i] + max(0.0, p.slopes[i] * (p.lengths[i] - 1)), f, i)
                for f, p in enumerate(families)
                for i in range(p.starts.shape[0])
            )
        )
        _, f, i = best
        p = families[f]
        t = int(p.starts[i]) + (int(p.lengths[i]) - 1 if p.slopes[i] > 0 else 0)
        return f, t

    # -- the algorithm ----------------------------------------------------------------------------

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
        order = np.argsort(points, kind="stable")  # selection works on sorted data; counts ignore order
        points = points[order]
        labels = None if labels is None else labels[order]
        if not isinstance(hclass, Thresholds | Intervals | Points | FiniteClass):
            raise SanitizerInputError(f"mwem does not support the class {hclass.spec}")
        if isinstance(hclass, Intervals) and labels is not None:
            raise SanitizerInputError(
                "mwem releases labelled queries for thresholds, points and file "
                "classes; intervals support unlabelled data only"
            )
        composition = self.composition or ("zcdp" if dlt > 0 else "basic")
        count_share = 0.0 if size is None else self.count_share
        eps_s, eps_m, ledger = mwem_budget(
            eps, dlt, self.rounds, composition, self.selection_share, self.schedule, count_share=count_share
        )
        source = resolve(rng)
        n = int(points.shape[0])
        dp_outputs: dict[str, Any] = {}
        if size is None:  # n public: the paper's normaliser
            scale = max(n, 1)
        elif self.noisy_size:  # n private: a noisy count (sensitivity 1 under add/remove), a DP output
            noisy_size = int(DiscreteLaplaceMechanism(ledger["epsilon_count"], 1, rng=source).release(n))
            dp_outputs["noisy_size"] = noisy_size
            scale = max(noisy_size, 1)
        else:  # BROKEN on purpose (audits only): the private n itself
            dp_outputs["noisy_size"] = n
            scale = max(n, 1)
        state = BlockState(
            hclass.domain_size, labels is not None, dense=self.dense or isinstance(hclass, FiniteClass)
        )
        total = np.zeros_like(state.weights)
        history: list[tuple[Hypothesis, float]] = []
        transcript: list[dict[str, Any]] = []
        for r in range(self.rounds):
            h = self._select(hclass, points, labels, state, eps_s[r], source, scale)
            (total,) = state.refine(h.change_points()[1], total)
            ones = h.predict(points)
            count = int(ones.sum()) if labels is None else int((ones == labels).sum())
            measure = DiscreteLaplaceMechanism(eps_m[r], 1, rng=source)
            noisy = measure.release(count) if self.noisy_measurement else count  # else: BROKEN on purpose
            value = min(max(noisy / scale, 0.0), 1.0)  # a fraction: clipping is post-processing
            history.append((h, value))
            transcript.append({"query": h.to_dict(), "noisy_count": noisy})
            state.update(h, value)
            state.replay(history, self.repetitions)
            total = total + state.weights
        dp_outputs["transcript"] = transcript
        release = state.distribution(total if self.output == "average" else None)
        num_queries = 2 * hclass.size
        needed = mwem_sample_size(hclass.domain_size, num_queries, eps, a)
        t_needed = math.ceil(16 * math.log(max(hclass.domain_size, 2)) / a**2)
        n_theory = n if size is None else size  # never the private n
        bound = (
            None
            if n_theory == 0
            else (
                2 * math.sqrt(math.log(max(hclass.domain_size, 2)) / self.rounds)
                + 10 * self.rounds * math.log(num_queries) / (eps * n_theory)
            )
        )
        parameters: dict[str, Any] = {
            "alpha": a,
            "beta": b,
            "rounds": self.rounds,
            "repetitions": self.repetitions,
            "output": self.output,
            "selection_share": self.selection_share,
            "schedule": self.schedule,
            "epsilon_select_per_round": eps_s,
            "epsilon_measure_per_round": eps_m,
            **ledger,
            "normaliser": "n (public)" if size is None else "noisy count (discrete Laplace at epsilon_count)",
            "selection": "exact exponential mechanism, score sigma*(q(D) - nu q(A)), sensitivity 1",
            "measurement": "discrete Laplace on integer counts, sensitivity 1",
            "domain": "public: the class's domain; block edges = change points of selected queries",
            "theorem": "Hardt-Ligett-McSherry 2012 Thm 2.2 (basic composition, average output)",
            "theory_max_error_bound": bound,
            "theorem_rounds": t_needed,
        }
        if size is not None:
            parameters["expected_size"] = size
        holds = (
            n_theory >= needed
            and self.rounds >= t_needed
            and self.output == "average"
            and composition == "basic"
        )
        return SanitizerResult(
            distribution=release,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=dlt if composition == "zcdp" else 0.0,
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=needed,
            accuracy_guarantee_holds=holds,
            neighbouring_relation=neighbouring_relation(size),
            dp_outputs=dp_outputs,
        )

    def __repr__(self) -> str:
        return f"MWEMSanitizer(rounds={self.rounds}, repetitions={self.repetitions})"
