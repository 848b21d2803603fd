"""The proper private learner of Ghazi–Golowich–Kumar–Manurangsi (STOC 2021), name ``"proper"``.

ggkm.md §2 (seed 004, Algorithms 1–3, Theorems 5.7 and 6.4). Two stages on disjoint parts of the
sample (a data-independent random split; replace-one neighbours then differ in one part only):

1. **PolyPriLearn** (Alg 2) on part A: m disjoint blocks of n0 examples; the deterministic
   :func:`~.reduce_tree.reduce_tree` maps each block to a set Ŝ^(j) of SOA
   classifiers of k'-irreducible restricted subclasses (|Ŝ^(j)| <= ℓ = Π_t (k'2^t + 1)); the
   (ε, δ)-DP :func:`~.sparse_selection.sparse_select` picks f̂ lying in many
   Ŝ^(j) (falling back to a data-independent default row). f̂ may be improper.
2. **PolyPriPropLearn** (Alg 3): the cover H ⊂ F of f̂
   (:func:`~.minimax_cover.minimax_cover`, Lemma 6.2; post-processing of f̂)
   and the generic learner (exponential mechanism, Lemma 6.3,
   ε-DP) over H on part B.

**Privacy: (ε, δ)-DP for every sample and every parameter setting.** Changing one example
changes one block of part A (so at most one Ŝ^(j): ReduceTree is deterministic and uses only its
block) or part B. Sparse selection is (ε, δ)-DP with respect to one set changing (Prop 5.6 as
instantiated in ggkm.md §2.3), H is post-processing, and the generic learner is (ε, 0)-DP on part
B; parallel composition over the disjoint parts gives (ε, δ). Nothing here depends on the
parameters being the theorem's: practical mode changes m, n0, α_Δ, k' only.

**Properness.** The release is always a row of F: it is drawn from H ⊂ F, and ``fit`` asserts the
member check before returning (an improper f̂ is never released). ``LearnerResult.proper = True``.

**Accuracy: theory vs practice (ggkm.md §4.3, §4.6).** :func:`proper_sample_size` is the sample
size of Theorem 6.4 with explicit constants (C_0 of Thm 2.1, C of Alg 2, the generic learner's
constant); at ε = 1, δ = 1e-6 it is ~10^9 even for Ldim 1. When n reaches it the learner runs the
paper's parameters (``mode = "paper"``) and ``accuracy_guarantee_holds`` is True; otherwise it runs
the *practical* parameters of :func:`practical_parameters` (same algorithm, explicit m, n0, α_Δ,
k') and reports ``accuracy_guarantee_holds = False``.

**Classes.** Ldim and irreducibility are exact searches over subclasses of the class as a matrix
(:func:`~.irreducibility.lattice_of`): file classes and structured classes up
to :data:`~.irreducibility.MAX_ROWS` rows (e.g. ``thresholds:1024``,
``points:1024``, ``intervals:64``); larger classes raise a clear ``LearningInputError`` before any
data is touched.

>>> import numpy as np
>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> from privstream.learning.randomness import seeded
>>> xs = np.arange(2000) % 15; ys = (xs >= 6).astype(np.uint8)
>>> hclass = parse_class_spec("thresholds:15")
>>> res = ProperLearner().fit(hclass, xs, ys, epsilon=1.0, delta=1e-6, rng=seeded(4))
>>> res.proper, res.accuracy_guarantee_holds, res.hypothesis.predict(np.arange(15)).tolist()[4:8]
(True, False, [0, 0, 1, 1])
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass
from privstream.learning.private_learners.base import (
    LearnerResult,
    check_accuracy_parameter,
    check_privacy_parameters,
    check_sample,
)
from privstream.learning.private_learners.generic.error_levels import error_levels
from privstream.learning.private_learners.generic.learner import sample_hypothesis
from privstream.learning.private_learners.proper.irreducibility import ClassLattice, lattice_of
from privstream.learning.private_learners.proper.minimax_cover import minimax_cover
from privstream.learning.private_learners.proper.reduce_tree import reduce_tree, row_mistakes, selection_bound
from privstream.learning.private_learners.proper.sparse_selection import selection_error, sparse_select
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "MECHANISM",
    "PolyPriLearnOutcome",
    "ProperLearner",
    "ProperParameters",
    "paper_parameters",
    "poly_pri_learn",
    "practical_parameters",
    "proper_sample_size",
]

MECHANISM = "ggkm-proper (reduce-tree + sparse selection + generic over a minimax cover)"


@dataclass(frozen=True)
class ProperParameters:
    """The explicit parameters of one run (all public, data-independent)."""

    mode: str  # "paper" or "practical"
    blocks: int  # m
    block_size: int  # n0
    generic_size: int  # examples of part B (the generic learner over the cover)
    alpha_delta: Fraction
    k_prime: int
    log_ell: float  # ln ℓ, ℓ = Π_{t<=d} (k'2^t + 1)

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out["alpha_delta"] = float(self.alpha_delta)
        return out


# -- the theorem's parameters ---------------------------------------------------------------------


def _poly_pri_learn_paper(eta: float, beta: float, epsilon: float, delta: float, d: int, d_v: int,
                          c: float, c0: float) -> tuple[int, int, float, int]:
    """Alg 2 step 1 verbatim: (m, n0, α_Δ, k') with constants C and C_0 (d, d_V >= 1)."""
    m = math.ceil(c * d**3 * math.log(1 / (epsilon * delta * beta * eta)) / epsilon)
    n0 = math.ceil(c * d**2 * d_v * math.log(d * m / (eta * beta)) / eta**2)
    alpha_delta = 6 * c0 * math.sqrt((d_v + math.log(2 * m / beta)) / n0)
    k_prime = max(math.ceil(n0 * (d + 3) * alpha_delta), math.ceil(64 * c0 * d / eta**2))
    return m, n0, alpha_delta, k_prime


def _smallest_c(eta: float, beta: float, epsilon: float, delta: float, d: int, d_v: int, c0: float) -> int:
    """The least integer C with (d_L + 3)α_Δ < η (ggkm.md §4.3.3; the paper's C is unspecified)."""

    def ok(c: int) -> bool:
        return (d + 3) * _poly_pri_learn_paper(eta, beta, epsilon, delta, d, d_v, c, c0)[2] < eta

    hi = 1
    while not ok(hi):
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:  # ok(lo) is false or lo == 0
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def paper_parameters(alpha: float, beta: float, epsilon: float, delta: float, d: int, *,
                     d_vc: int | None = None, C: float | None = None, C0: float = 1.0,
                     ) -> dict[str, Any]:
    """Algorithm 2's (m, n0, α_Δ, k', ℓ, n) for PolyPriLearn at accuracy ``alpha`` (= η).

    ``d`` = Ldim(F); ``d_vc`` = VCdim(F) (default ``d``: erratum 7, the conservative choice);
    ``C`` defaults to the least integer making ``(d+3)α_Δ < η`` hold (the paper leaves it open).

    >>> p = paper_parameters(0.25, 0.1, 1.0, 1e-6, 1, d_vc=1)   # ggkm.md §4.3.3 (C ≈ 593 there)
    >>> p["C"], p["m"], p["n0"], p["k_prime"], f"{p['n']:.2g}"
    (590, 10328, 122074, 30510, '1.3e+09')
    """
    dl, dv = max(int(d), 1), max(int(d if d_vc is None else d_vc), 1)
    c = _smallest_c(alpha, beta, epsilon, delta, dl, dv, C0) if C is None else C
    m, n0, alpha_delta, k_prime = _poly_pri_learn_paper(alpha, beta, epsilon, delta, dl, dv, c, C0)
    log_ell = sum(math.log(k_prime * 2**t + 1) for t in range(1, dl + 1))
    return {"C": c, "C0": C0, "m": m, "n0": n0, "alpha_delta": alpha_delta, "k_prime": k_prime,
            "log_ell": log_ell, "n": m * n0, "condition_holds": (dl + 3) * alpha_delta < alpha}


def _generic_part(alpha: float, beta: float, epsilon: float, cover_size: int, c_generic: float) -> int:
    """Lemma 6.3: ``⌈C_G (ln|H| + ln(2/β)) / (α ε)⌉`` examples for the generic learner over H."""
    return math.ceil(c_generic * (math.log(max(cover_size, 1)) + math.log(2 / beta)) / (alpha * epsilon))


@functools.lru_cache(maxsize=256)
def proper_sample_size(alpha: float, beta: float, epsilon: float, delta: float, d: int, *,
                       d_vc: int | None = None, d_dual_vc: int | None = None, C: float | None = None,
                       C0: float = 1.0, C_generic: float = 8.0) -> int:
    """Theorem 6.4's sample size for (α, β)-accuracy, with explicit constants.

    Algorithm 3: PolyPriLearn at (ε, δ, α/4, β/2) (:func:`paper_parameters`) plus the generic
    learner over the cover H, ``|H| <= ⌈C_0 d*/(α/8)²⌉`` (Lemma 6.2; ``d* = d_dual_vc``, default
    Assouad's bound ``2^{d_V + 1}``), run at accuracy α/2 and confidence β/2 (Lemma 6.3,
    constant ``C_generic``).

    >>> f"{proper_sample_size(0.25, 0.1, 1.0, 1e-6, 1):.2g}"
    '2.2e+10'
    """
    a = check_accuracy_parameter(alpha, "alpha")
    b = check_accuracy_parameter(beta, "beta")
    eps, dlt = check_privacy_parameters(epsilon, delta)
    if dlt <= 0:
        raise ValueError("the proper learner is (ε, δ)-DP with δ > 0")
    dv = max(int(d if d_vc is None else d_vc), 1)
    part_a = paper_parameters(a / 4, b / 2, eps, dlt, d, d_vc=dv, C=C, C0=C0)["n"]
    d_star = 2 ** (dv + 1) if d_dual_vc is None else max(int(d_dual_vc), 1)
    cover = math.ceil(C0 * d_star / (a / 8) ** 2)
    return int(part_a) + _generic_part(a / 2, b / 2, eps, cover, C_generic)


# -- practical parameters -------------------------------------------------------------------------


def practical_parameters(n: int, d: int, epsilon: float, delta: float, alpha: float, beta: float, *,
                         blocks: int | None = None, k_prime: int = 1, alpha_delta: float | None = None,
                         generic_fraction: float = 0.2, agreement: float = 0.5) -> ProperParameters:
    """Explicit m, n0, α_Δ, k' for a sample of size n (ggkm.md §4.6, "practical mode").

    * part B gets ``floor(generic_fraction·n)`` examples, part A the rest;
    * ``α_Δ = α/(4(d+3))`` (Alg 3 runs PolyPriLearn at η = α/4, which needs (d+3)α_Δ < η);
    * ``m`` = the least m whose sparse-selection error ν(m) is below ``agreement·m`` -- an element
      found by that fraction of the blocks then wins w.p. >= 1 - β/2. The theorem's pigeonhole uses
      ``agreement = 1/(d+1)``; in practice stable blocks mostly agree, so 1/2 is the default.
      ``m <= |A|`` (at least one example per block); leftover examples of A are not used.
    """
    k_prime = int(k_prime)
    if k_prime < 1:
        raise ValueError(f"k_prime must be >= 1, got {k_prime}")
    if not 0 < generic_fraction < 1:
        raise ValueError(f"generic_fraction must be in (0, 1), got {generic_fraction}")
    if not 0 < agreement <= 1:
        raise ValueError(f"agreement must be in (0, 1], got {agreement}")
    dl = max(int(d), 0)
    log_ell = sum(math.log(k_prime * 2**t + 1) for t in range(1, dl + 1))
    part_b = max(1, math.floor(generic_fraction * n)) if n >= 2 else 0
    part_a = n - part_b
    if blocks is None:
        m = 1
        while selection_error(m, log_ell, epsilon, delta, beta / 2) >= agreement * m:
            m += 1
    else:
        m = int(blocks)
        if m < 1:
            raise ValueError(f"blocks must be >= 1, got {blocks}")
    m = max(1, min(m, part_a))
    ad = Fraction(alpha) / (4 * (dl + 3)) if alpha_delta is None else Fraction(alpha_delta)
    if ad <= 0:
        raise ValueError(f"alpha_delta must be > 0, got {alpha_delta}")
    return ProperParameters("practical", m, part_a // m, part_b, ad, k_prime, log_ell)


# -- PolyPriLearn (Algorithm 2) ------------------------------------------------------------------


@dataclass(frozen=True)
class PolyPriLearnOutcome:
    """f̂ (boolean table) and, for tests and diagnostics only (never released), the blocks' sets."""

    f_hat: np.ndarray
    sets: tuple[frozenset[bytes], ...]
    default_used: bool


def poly_pri_learn(lattice: ClassLattice, xs: np.ndarray, ys: np.ndarray, params: ProperParameters, *,
                   epsilon: float, delta: float, rng: RandomSource,
                   d: int | None = None) -> PolyPriLearnOutcome:
    """Algorithm 2 on ``xs, ys`` (already in block order): m blocks of n0, ReduceTree, sparse selection.

    The default (the ⊥ outcome) is row 0 of F: fixed and data-independent.
    """
    d = lattice.ldim(lattice.full) if d is None else d
    tables: dict[bytes, np.ndarray] = {}
    n0, m = params.block_size, params.blocks
    # ReduceTree is a pure function of its block: run it once per distinct block.
    blocks = np.concatenate([xs[:m * n0].astype(np.int64).reshape(m, n0),
                             ys[:m * n0].astype(np.int64).reshape(m, n0)], axis=1)
    distinct, inverse = np.unique(blocks, axis=0, return_inverse=True)
    results = []
    for row in distinct:
        bx, by = row[:n0], row[n0:]
        result = reduce_tree(lattice, row_mistakes(lattice.counts_matrix, bx, by), n0, params.k_prime,
                             params.alpha_delta, d)
        tables.update(result.s_hat)
        results.append(frozenset(result.s_hat))
    sets = [results[i] for i in np.asarray(inverse).reshape(-1).tolist()]
    ell = selection_bound(params.k_prime, d)
    choice = sparse_select(sets, epsilon=epsilon, delta=delta, ell=ell, default=b"", rng=rng)
    if choice == b"":
        return PolyPriLearnOutcome(lattice.matrix[0].copy(), tuple(sets), True)
    return PolyPriLearnOutcome(tables[choice], tuple(sets), False)  # type: ignore[index]


# -- the learner ---------------------------------------------------------------------------------


class ProperLearner:
    """Algorithm 3 as a :class:`~privstream.learning.private_learners.base.PrivateLearner`.

    Constructor parameters (all public; see :func:`practical_parameters`): ``blocks``, ``k_prime``,
    ``alpha_delta``, ``generic_fraction``, ``agreement`` for practical mode; ``C``, ``C0``,
    ``C_generic`` for the theorem's sample size; ``shuffle`` (default True: a data-independent
    uniformly random split into blocks, so sorted files still give i.i.d.-like blocks).
    """

    name = "proper"
    mechanism = MECHANISM

    def __init__(self, *, blocks: int | None = None, k_prime: int = 1, alpha_delta: float | None = None,
                 generic_fraction: float = 0.2, agreement: float = 0.5, C: float | None = None,
                 C0: float = 1.0, C_generic: float = 8.0, shuffle: bool = True) -> None:
        self.blocks, self.k_prime, self.alpha_delta = blocks, int(k_prime), alpha_delta
        self.generic_fraction, self.agreement = float(generic_fraction), float(agreement)
        self.constants = {"C": C, "C0": float(C0), "C_generic": float(C_generic)}
        self.shuffle = bool(shuffle)
        self._lattices: dict[tuple[str, int, int], tuple[ClassLattice, int]] = {}

    def lattice(self, hclass: HypothesisClass) -> tuple[ClassLattice, int]:
        """The class as a matrix lattice and its Ldim (cached per class spec)."""
        key = (hclass.spec, hclass.size, hclass.domain_size)
        if key not in self._lattices:
            lat = lattice_of(hclass)
            self._lattices[key] = (lat, lat.ldim(lat.full))
        return self._lattices[key]

    def parameters_for(self, n: int, d: int, epsilon: float, delta: float, alpha: float,
                       beta: float) -> tuple[ProperParameters, int]:
        """The run's parameters (paper mode when n reaches the theorem's size) and that size."""
        needed = proper_sample_size(alpha, beta, epsilon, delta, d, **self.constants)  # type: ignore[arg-type]
        if n >= needed:
            p = paper_parameters(alpha / 4, beta / 2, epsilon, delta, d, C=self.constants["C"],
                                 C0=self.constants["C0"])
            params = ProperParameters("paper", p["m"], p["n0"], n - p["n"], Fraction(p["alpha_delta"]),
                                      p["k_prime"], p["log_ell"])
            return params, needed
        params = practical_parameters(n, d, epsilon, delta, alpha, beta, blocks=self.blocks,
                                      k_prime=self.k_prime, alpha_delta=self.alpha_delta,
                                      generic_fraction=self.generic_fraction, agreement=self.agreement)
        return params, needed

    def fit(self, hclass: HypothesisClass, xs: np.ndarray, ys: np.ndarray, *, epsilon: float,
            delta: float = 0.0, alpha: float = 0.25, beta: float = 0.25,
            rng: RandomSource | None = None) -> LearnerResult:
        eps, dlt = check_privacy_parameters(epsilon, delta)
        if dlt <= 0:
            raise ValueError("the proper learner is (ε, δ)-DP with δ > 0 (sparse selection); pass --delta")
        a = check_accuracy_parameter(alpha, "alpha")
        b = check_accuracy_parameter(beta, "beta")
        points, labels = check_sample(hclass, xs, ys)
        lattice, d = self.lattice(hclass)  # size check before any data-dependent work
        source = resolve(rng)
        n = int(points.shape[0])
        params, needed = self.parameters_for(n, d, eps, dlt, a, b)
        if self.shuffle and n > 1:
            order = np.array(source.permutation(n), dtype=np.int64)  # independent of the data
            points, labels = points[order], labels[order]
        part_a = params.blocks * params.block_size
        tail = n - params.generic_size
        outcome = poly_pri_learn(lattice, points[:part_a], labels[:part_a], params,
                                 epsilon=eps, delta=dlt, rng=source, d=d)
        cover = minimax_cover(lattice.matrix, outcome.f_hat)  # post-processing of f̂
        row = self._select(lattice, cover.rows, points[tail:], labels[tail:], eps, source)
        hypothesis = hclass.hypothesis(row)
        # Properness is the product: never release anything that is not a row of the class.
        if not np.array_equal(np.asarray(hypothesis.truth_table(), dtype=bool), lattice.matrix[row]):
            raise AssertionError("proper learner produced a non-member; refusing to release it")
        parameters: dict[str, Any] = {
            **params.public(), "alpha": a, "beta": b, "ldim": d, "constants": dict(self.constants),
            "theorem": "GGKM Thm 6.4 (Alg 3 = Alg 2 + Lemma 6.2 cover + generic learner), realizable",
        }
        return LearnerResult(
            hypothesis=hypothesis, mechanism=MECHANISM, epsilon=eps, delta=dlt, proper=True,
            sample_size=n, parameters=parameters, theorem_sample_size=needed,
            accuracy_guarantee_holds=params.mode == "paper" and n >= needed,
        )

    @staticmethod
    def _select(lattice: ClassLattice, rows: tuple[int, ...], xs: np.ndarray, ys: np.ndarray,
                epsilon: float, rng: RandomSource) -> int:
        """Lemma 6.3: the generic learner (exponential mechanism, ε-DP) over the cover H ⊂ F."""
        if len(rows) == 1:
            return rows[0]
        sub = FiniteClass(lattice.matrix[list(rows)], spec="ggkm-cover")
        chosen = sample_hypothesis(error_levels(sub, xs, ys), epsilon, rng)
        table = np.asarray(chosen.truth_table(), dtype=bool)
        matches = [r for r in rows if np.array_equal(lattice.matrix[r], table)]
        if len(matches) != 1:
            raise AssertionError("the generic learner returned a function outside the cover")
        return matches[0]

    def __repr__(self) -> str:
        return f"ProperLearner(k_prime={self.k_prime}, blocks={self.blocks})"
