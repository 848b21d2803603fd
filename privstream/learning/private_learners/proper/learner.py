"""The proper private learner of Ghazi–Golowich–Kumar–Manurangsi (STOC 2021), name ``"proper"``.

GGKM21 (Algorithms 1–3, Theorems 5.7 and 6.4). Two stages on disjoint parts of the
sample:

1. **PolyPriLearn** (Alg 2) on part A: m blocks; ReduceTree (GGKM Alg 1) maps each block to a set
   Ŝ^(j) of SOA classifiers of k'-irreducible restricted subclasses (it is deterministic and reads
   only its block); the (ε, δ)-DP sparse selection picks f̂ lying in many Ŝ^(j) (falling back to
   the class's row 0, data-independent). f̂ may be improper.
2. **PolyPriPropLearn** (Alg 3): a cover H ⊂ F of f̂ (Lemma 6.2; post-processing of f̂) and the
   generic learner (exponential mechanism, Lemma 6.3, ε-DP) over H on part B.

**The split.** n public (``expected_size=None``, replace-one neighbours): a data-independent uniformly
random permutation, then m consecutive blocks of n0, part B the last ``generic_size`` examples (sizes
from n). n private (``expected_size=E``, add/remove-one neighbours): m, n0 and |B| come from E only,
and each example independently goes to block j with probability n0/E, to part B with probability
|B|/E, or is left out (the rest), with the learner's own coins (:func:`random_split`). A positional
split would let one removed example shift every later block.

**Privacy: (ε, δ)-DP for every sample and every parameter setting.** *Replace-one*: a changed
example lies in one block of A (changing at most one Ŝ^(j): ReduceTree is deterministic and uses only
its block) or in B. Sparse selection is (ε, δ)-DP when one set changes (GGKM21 Proposition 5.6, for
any sets of at most ℓ elements), H is post-processing of f̂, and the generic learner
is (ε, 0)-DP on B; parallel composition over the disjoint parts gives (ε, δ). *Add/remove-one*:
couple the runs on D and D + z by giving every common example the same assignment (assignments are
independent of each other and of the data); z's own draw a puts it in one block (one set changes:
the sparse selection's neighbour), in B (the exponential mechanism with score -errors has sensitivity
1 under adding an example) or nowhere (identical outputs). For every a the two output laws are
(ε, δ)-close, so their mixtures over a are too; this holds for n = 0 and n far from E. Nothing here
depends on the parameters being the theorem's, nor on how Ŝ^(j) is computed as long as it is a
function of block j alone with at most ℓ elements (the structured path below, including blocks that
abstain): practical parameters change accuracy only.

**ℓ.** The public bound on |Ŝ| is ``min(Π_t (k'2^t + 1), |F|)``
(:func:`~.reduce_tree.selection_bound`: Lemma 5.5, and the leaves' classes are
disjoint subsets of F). On ``thresholds:2^32`` that is
ln ℓ = 22 instead of 366, which is what makes a few hundred blocks enough.

**Properness.** The release is always a row of F: it is drawn from H ⊂ F, and ``fit`` asserts the
member check before returning (an improper f̂ is never released). ``LearnerResult.proper = True``.

**Accuracy: theory vs practice.** :func:`proper_sample_size` is the sample
size of Theorem 6.4 with explicit constants (C_0 of Thm 2.1, C of Alg 2, the generic learner's
constant); at ε = 1, δ = 1e-6 it is ~10^9 even for Ldim 1. When n reaches it the learner runs the
paper's parameters (``mode = "paper"``) and ``accuracy_guarantee_holds`` is True; otherwise it runs
the *practical* parameters of :func:`practical_parameters` (same algorithm, explicit m, n0, α_Δ,
k') and reports ``accuracy_guarantee_holds = False``.

**Classes and cost.** File classes: Ldim, irreducibility and ReduceTree are exact searches over
subclasses of the class as a matrix (:func:`~.irreducibility.lattice_of`, at most
4,096 rows), and the cover is the Lemma 6.2 LP on the whole matrix. Thresholds, points and intervals
of any size (up to 2^62): Ldim from the classes' closed forms, ReduceTree per block from
:func:`~.structured_reduce.block_set` (the block's low-error class L as a small
matrix over its change points when ``|L| <= 4,096``, closed forms for the version-space regime
otherwise), the sets as boxes of members and their selection by
:func:`~.structured_selection.select`, the cover by
:func:`~.minimax_cover.structured_cover`. Beyond 4,096 rows practical mode caps
α_Δ at ``1/((d+2)·n0 + 1)`` so that every level of ReduceTree is the block's version space (the
closed forms' regime). Cost per fit: O(n log n) to split, per block O(n0 log n0) plus a ReduceTree on
at most ``min(|L|, 4,096)`` rows (independent of N), the selection O(m log m) (thresholds, points) or
O(m²) (intervals: a grid of the m version spaces' corners), the cover O(1) for a member.
``path="matrix"`` forces the matrix computation on a structured class (the reference the tests
compare with).

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
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, ClassVar, TypedDict

import numpy as np

from privstream.learning.errors import InvariantError, LearningInputError
from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.parameters import Range
from privstream.learning.private_learners.base import (
    LearnerResult,
    check_fit,
    check_fit_parameters,
    neighbouring_relation,
)
from privstream.learning.private_learners.generic.error_levels import error_levels
from privstream.learning.private_learners.generic.learner import sample_hypothesis
from privstream.learning.private_learners.proper.irreducibility import MAX_ROWS, ClassLattice, lattice_of
from privstream.learning.private_learners.proper.minimax_cover import minimax_cover, structured_cover
from privstream.learning.private_learners.proper.reduce_tree import reduce_tree, row_mistakes, selection_bound
from privstream.learning.private_learners.proper.sparse_selection import selection_error, sparse_select
from privstream.learning.private_learners.proper.structured_reduce import (
    block_set,
    is_structured,
    lattice_block_set,
    top_bound,
)
from privstream.learning.private_learners.proper.structured_selection import BlockSet, coordinates, select
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "MECHANISM",
    "PolyPriLearnOutcome",
    "ProperLearner",
    "ProperParameters",
    "paper_parameters",
    "poly_pri_learn",
    "positional_split",
    "practical_parameters",
    "proper_sample_size",
    "random_split",
]

MECHANISM = "ggkm-proper (reduce-tree + sparse selection + generic over a minimax cover)"

#: Block of an example: ``0..m-1``, then these two labels.
PART_B, UNUSED = -1, -2


@dataclass(frozen=True)
class ProperParameters:
    """The explicit parameters of one run (all public, data-independent).

    ``blocks`` m, ``block_size`` n0 (it also scales ReduceTree's levels), ``generic_size`` |B|;
    with ``expected_size`` E they are the expected layout of the random split (``m·n0 + |B| <= E``).
    ``ell`` is the public bound on |Ŝ| (may be astronomically large; ``log_ell`` is published).
    """

    mode: str  # "paper" or "practical"
    blocks: int  # m
    block_size: int  # n0
    generic_size: int  # examples of part B (the generic learner over the cover)
    alpha_delta: Fraction
    k_prime: int
    log_ell: float  # ln ℓ
    ell: int = 1
    expected_size: int | None = None

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out["alpha_delta"] = float(self.alpha_delta)
        del out["ell"]  # may exceed 2^53; log_ell says it
        return out


# -- the theorem's parameters ---------------------------------------------------------------------


def _poly_pri_learn_paper(
    eta: float, beta: float, epsilon: float, delta: float, d: int, d_v: int, c: float, c0: float
) -> tuple[int, int, float, int]:
    """Alg 2 step 1 verbatim: (m, n0, α_Δ, k') with constants C and C_0 (d, d_V >= 1)."""
    m = math.ceil(c * d**3 * math.log(1 / (epsilon * delta * beta * eta)) / epsilon)
    n0 = math.ceil(c * d**2 * d_v * math.log(d * m / (eta * beta)) / eta**2)
    alpha_delta = 6 * c0 * math.sqrt((d_v + math.log(2 * m / beta)) / n0)
    k_prime = max(math.ceil(n0 * (d + 3) * alpha_delta), math.ceil(64 * c0 * d / eta**2))
    return m, n0, alpha_delta, k_prime


def _smallest_c(eta: float, beta: float, epsilon: float, delta: float, d: int, d_v: int, c0: float) -> int:
    """The least integer C with (d_L + 3)α_Δ < η (the paper's C is unspecified)."""

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


class ProperConstants(TypedDict):
    """The constants of the sample-size bounds (the keywords of :func:`proper_sample_size`)."""

    C: float | None
    C0: float
    C_generic: float


def paper_parameters(
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    d: int,
    *,
    d_vc: int | None = None,
    C: float | None = None,
    C0: float = 1.0,
) -> dict[str, Any]:
    """Algorithm 2's (m, n0, α_Δ, k', ℓ, n) for PolyPriLearn at accuracy ``alpha`` (= η).

    ``d`` = Ldim(F); ``d_vc`` = VCdim(F) (default ``d``: erratum 7, the conservative choice);
    ``C`` defaults to the least integer making ``(d+3)α_Δ < η`` hold (the paper leaves it open).

    >>> p = paper_parameters(0.25, 0.1, 1.0, 1e-6, 1, d_vc=1)   # C ≈ 593 here
    >>> p["C"], p["m"], p["n0"], p["k_prime"], f"{p['n']:.2g}"
    (590, 10328, 122074, 30510, '1.3e+09')
    """
    dl, dv = max(int(d), 1), max(int(d if d_vc is None else d_vc), 1)
    c = _smallest_c(alpha, beta, epsilon, delta, dl, dv, C0) if C is None else C
    m, n0, alpha_delta, k_prime = _poly_pri_learn_paper(alpha, beta, epsilon, delta, dl, dv, c, C0)
    log_ell = sum(math.log(k_prime * 2**t + 1) for t in range(1, dl + 1))
    return {
        "C": c,
        "C0": C0,
        "m": m,
        "n0": n0,
        "alpha_delta": alpha_delta,
        "k_prime": k_prime,
        "log_ell": log_ell,
        "n": m * n0,
        "condition_holds": (dl + 3) * alpha_delta < alpha,
    }


def _generic_part(alpha: float, beta: float, epsilon: float, cover_size: int, c_generic: float) -> int:
    """Lemma 6.3: ``⌈C_G (ln|H| + ln(2/β)) / (α ε)⌉`` examples for the generic learner over H."""
    return math.ceil(c_generic * (math.log(max(cover_size, 1)) + math.log(2 / beta)) / (alpha * epsilon))


@functools.lru_cache(maxsize=256)
def proper_sample_size(
    alpha: float,
    beta: float,
    epsilon: float,
    delta: float,
    d: int,
    *,
    d_vc: int | None = None,
    d_dual_vc: int | None = None,
    C: float | None = None,
    C0: float = 1.0,
    C_generic: float = 8.0,
) -> int:
    """Theorem 6.4's sample size for (α, β)-accuracy, with explicit constants.

    Algorithm 3: PolyPriLearn at (ε, δ, α/4, β/2) (:func:`paper_parameters`) plus the generic
    learner over the cover H, ``|H| <= ⌈C_0 d*/(α/8)²⌉`` (Lemma 6.2; ``d* = d_dual_vc``, default
    Assouad's bound ``2^{d_V + 1}``), run at accuracy α/2 and confidence β/2 (Lemma 6.3,
    constant ``C_generic``).

    >>> f"{proper_sample_size(0.25, 0.1, 1.0, 1e-6, 1):.2g}"
    '2.2e+10'
    """
    eps, dlt, a, b, _ = check_fit_parameters(epsilon, delta, alpha, beta)
    if dlt <= 0:
        raise ValueError("the proper learner is (ε, δ)-DP with δ > 0")
    dv = max(int(d if d_vc is None else d_vc), 1)
    part_a = paper_parameters(a / 4, b / 2, eps, dlt, d, d_vc=dv, C=C, C0=C0)["n"]
    d_star = 2 ** (dv + 1) if d_dual_vc is None else max(int(d_dual_vc), 1)
    cover = math.ceil(C0 * d_star / (a / 8) ** 2)
    return int(part_a) + _generic_part(a / 2, b / 2, eps, cover, C_generic)


# -- practical parameters -------------------------------------------------------------------------


def _log_ell(k_prime: int, d: int, class_size: int | None) -> float:
    log_pi = sum(math.log(k_prime * 2**t + 1) for t in range(1, d + 1))
    return log_pi if class_size is None else min(log_pi, math.log(max(1, int(class_size))))


def practical_parameters(
    n: int,
    d: int,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
    *,
    blocks: int | None = None,
    k_prime: int = 1,
    alpha_delta: float | None = None,
    generic_fraction: float = 0.2,
    agreement: float = 0.5,
    class_size: int | None = None,
    version_space_regime: bool = False,
    expected: bool = False,
) -> ProperParameters:
    """Explicit m, n0, α_Δ, k' for a sample of size n (practical mode).

    * part B gets ``floor(generic_fraction·n)`` examples, part A the rest;
    * ℓ = ``min(Π_t (k'2^t + 1), class_size)`` (:func:`~.reduce_tree.selection_bound`);
    * ``m`` = the least m whose sparse-selection error ν(m) is below ``agreement·m`` -- an element
      found by that fraction of the blocks then wins w.p. >= 1 - β/2. The theorem's pigeonhole uses
      ``agreement = 1/(d+1)``; in practice stable blocks mostly agree, so 1/2 is the default.
      ``m <= |A|`` (at least one example per block); leftover examples of A are not used;
    * ``α_Δ = α/(4(d+3))`` (Alg 3 runs PolyPriLearn at η = α/4, which needs (d+3)α_Δ < η); with
      ``version_space_regime`` (classes beyond the matrix path) at most ``1/((d+2)·n0 + 1)``, so that
      ReduceTree's top level allows no mistake (:mod:`.structured_reduce`).

    >>> p = practical_parameters(20_000, 32, 1.0, 1e-6, 0.1, 0.1, class_size=2**32 + 1,
    ...                          version_space_regime=True)
    >>> p.blocks, p.block_size, p.generic_size, round(p.log_ell, 2), 34 * p.alpha_delta * p.block_size < 1
    (161, 99, 4000, 22.18, True)
    """
    k_prime = int(k_prime)
    if k_prime < 1:
        raise ValueError(f"k_prime must be >= 1, got {k_prime}")
    if not 0 < generic_fraction < 1:
        raise ValueError(f"generic_fraction must be in (0, 1), got {generic_fraction}")
    if not 0 < agreement <= 1:
        raise ValueError(f"agreement must be in (0, 1], got {agreement}")
    dl = max(int(d), 0)
    ell = selection_bound(k_prime, dl, class_size)
    log_ell = _log_ell(k_prime, dl, class_size)
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
    n0 = part_a // m
    if alpha_delta is None:
        ad = Fraction(alpha) / (4 * (dl + 3))
        if version_space_regime:
            ad = min(ad, Fraction(1, (dl + 2) * n0 + 1))
    else:
        ad = Fraction(alpha_delta)
    if ad <= 0:
        raise ValueError(f"alpha_delta must be > 0, got {alpha_delta}")
    return ProperParameters("practical", m, n0, part_b, ad, k_prime, log_ell, ell, n if expected else None)


# -- the split into blocks and part B -------------------------------------------------------------


def positional_split(n: int, params: ProperParameters, rng: RandomSource, shuffle: bool) -> np.ndarray:
    """n public: blocks of n0 in a data-independent random order (or the given order), B at the end."""
    out = np.full(n, UNUSED, dtype=np.int64)
    m, n0 = params.blocks, params.block_size
    out[: m * n0] = np.arange(m * n0, dtype=np.int64) // max(n0, 1)
    out[n - params.generic_size :] = PART_B
    if shuffle and n > 1:
        order = np.array(rng.permutation(n), dtype=np.int64)  # independent of the data
        shuffled = np.empty_like(out)
        shuffled[order] = out
        return shuffled
    return out


def random_split(n: int, params: ProperParameters, rng: RandomSource) -> np.ndarray:
    """n private: every example's part is its own uniform draw on [0, E) (module docstring)."""
    total = params.expected_size
    if total is None:
        raise InvariantError("invariant broken: total is not None")
    m, n0 = params.blocks, params.block_size
    draws = np.array([rng.uniform_int(total) for _ in range(n)], dtype=np.int64)
    out = np.where(draws < m * n0, draws // max(n0, 1), UNUSED)
    out[draws >= total - params.generic_size] = PART_B
    return out


def _parts(
    points: np.ndarray, labels: np.ndarray, block_of: np.ndarray, m: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The m blocks (examples in their order of arrival within each block)."""
    owner = np.where(block_of >= 0, block_of, m)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(m + 1), side="left")
    return [(points[order[lo:hi]], labels[order[lo:hi]]) for lo, hi in itertools.pairwise(bounds.tolist())]


# -- PolyPriLearn (Algorithm 2) on a class given as a matrix ---------------------------------------


@dataclass(frozen=True)
class PolyPriLearnOutcome:
    """f̂ (boolean table) and, for tests and diagnostics only (never released), the blocks' sets."""

    f_hat: np.ndarray
    sets: tuple[frozenset[bytes], ...]
    default_used: bool


def poly_pri_learn(
    lattice: ClassLattice,
    blocks: Sequence[tuple[np.ndarray, np.ndarray]],
    params: ProperParameters,
    *,
    epsilon: float,
    delta: float,
    rng: RandomSource,
    d: int | None = None,
) -> PolyPriLearnOutcome:
    """Algorithm 2 on the blocks: ReduceTree on each, sparse selection over the sets.

    The default (the ⊥ outcome) is row 0 of F: fixed and data-independent. ``params.block_size``
    scales the levels of every block (public).
    """
    d = lattice.ldim(lattice.full) if d is None else d
    tables: dict[bytes, np.ndarray] = {}
    cache: dict[bytes, frozenset[bytes]] = {}
    sets = []
    for bx, by in blocks:  # ReduceTree is a pure function of its block: run it once per distinct block
        key = np.asarray(bx, dtype=np.int64).tobytes() + b"|" + np.asarray(by, dtype=np.int64).tobytes()
        if key not in cache:
            result = reduce_tree(
                lattice,
                row_mistakes(lattice.counts_matrix, bx, by),
                params.block_size,
                params.k_prime,
                params.alpha_delta,
                d,
            )
            tables.update(result.s_hat)
            cache[key] = frozenset(result.s_hat)
        sets.append(cache[key])
    choice = sparse_select(sets, epsilon=epsilon, delta=delta, ell=params.ell, default=b"", rng=rng)
    if choice == b"":
        return PolyPriLearnOutcome(lattice.matrix[0].copy(), tuple(sets), True)
    return PolyPriLearnOutcome(tables[choice], tuple(sets), False)


# -- the learner ---------------------------------------------------------------------------------

PATHS = ("auto", "matrix", "structured")


class ProperLearner:
    """Algorithm 3 as a :class:`~privstream.learning.private_learners.base.PrivateLearner`.

    Constructor parameters (all public; see :func:`practical_parameters`): ``blocks``, ``k_prime``,
    ``alpha_delta``, ``generic_fraction``, ``agreement`` for practical mode; ``C``, ``C0``,
    ``C_generic`` for the theorem's sample size; ``shuffle`` (default True: with n public, a
    data-independent uniformly random split into blocks, so sorted files still give i.i.d.-like
    blocks); ``path`` (``"auto"``: structured classes by closed forms, file classes as a matrix;
    ``"matrix"`` forces the matrix on a structured class, ``"structured"`` refuses file classes).
    """

    name = "proper"
    mechanism = MECHANISM
    #: As :func:`practical_parameters` and :func:`paper_parameters` check them (``path``, a string,
    #: is checked by the constructor).
    parameter_ranges: ClassVar[dict[str, Range]] = {
        "blocks": Range(low=1, integer=True, optional=True),
        "k_prime": Range(low=1, integer=True),
        "alpha_delta": Range(0, 1, low_open=True, high_open=True, optional=True),
        "generic_fraction": Range(0, 1, low_open=True, high_open=True),
        "agreement": Range(0, 1, low_open=True),
        "C": Range(low=0, low_open=True, optional=True),
        "C0": Range(low=0, low_open=True),
        "C_generic": Range(low=0, low_open=True),
    }

    def __init__(
        self,
        *,
        blocks: int | None = None,
        k_prime: int = 1,
        alpha_delta: float | None = None,
        generic_fraction: float = 0.2,
        agreement: float = 0.5,
        C: float | None = None,
        C0: float = 1.0,
        C_generic: float = 8.0,
        shuffle: bool = True,
        path: str = "auto",
    ) -> None:
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        self.blocks, self.k_prime, self.alpha_delta = blocks, int(k_prime), alpha_delta
        self.generic_fraction, self.agreement = float(generic_fraction), float(agreement)
        self.constants: ProperConstants = {"C": C, "C0": float(C0), "C_generic": float(C_generic)}
        self.shuffle = bool(shuffle)
        self.path = path
        self._lattices: dict[tuple[str, int, int], tuple[ClassLattice, int]] = {}

    def lattice(self, hclass: HypothesisClass) -> tuple[ClassLattice, int]:
        """The class as a matrix lattice and its Ldim (cached per class spec)."""
        key = (hclass.spec, hclass.size, hclass.domain_size)
        if key not in self._lattices:
            lat = lattice_of(hclass)
            self._lattices[key] = (lat, lat.ldim(lat.full))
        return self._lattices[key]

    def uses_structured_path(self, hclass: HypothesisClass) -> bool:
        """Closed forms (thresholds, points, intervals) unless ``path="matrix"``."""
        if self.path == "structured" and not is_structured(hclass):
            raise LearningInputError(f"{hclass.spec}: path 'structured' takes thresholds, points, intervals")
        return is_structured(hclass) and self.path != "matrix"

    def parameters_for(
        self,
        n: int,
        d: int,
        epsilon: float,
        delta: float,
        alpha: float,
        beta: float,
        *,
        class_size: int | None = None,
        version_space_regime: bool = False,
        expected: bool = False,
    ) -> tuple[ProperParameters, int]:
        """The run's parameters (paper mode when n reaches the theorem's size) and that size."""
        needed = proper_sample_size(alpha, beta, epsilon, delta, d, **self.constants)
        if n >= needed:
            p = paper_parameters(
                alpha / 4, beta / 2, epsilon, delta, d, C=self.constants["C"], C0=self.constants["C0"]
            )
            params = ProperParameters(
                "paper",
                p["m"],
                p["n0"],
                n - p["n"],
                Fraction(p["alpha_delta"]),
                p["k_prime"],
                _log_ell(p["k_prime"], d, class_size),
                selection_bound(p["k_prime"], d, class_size),
                n if expected else None,
            )
            return params, needed
        params = practical_parameters(
            n,
            d,
            epsilon,
            delta,
            alpha,
            beta,
            blocks=self.blocks,
            k_prime=self.k_prime,
            alpha_delta=self.alpha_delta,
            generic_fraction=self.generic_fraction,
            agreement=self.agreement,
            class_size=class_size,
            version_space_regime=version_space_regime,
            expected=expected,
        )
        return params, needed

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
            raise ValueError("the proper learner is (ε, δ)-DP with δ > 0 (sparse selection); pass --delta")
        structured = self.uses_structured_path(hclass)
        # everything below up to the split depends on the class and the configuration only
        lattice: ClassLattice | None = None
        if structured:
            d = hclass.version_space().ldim()
        else:
            lattice, d = self.lattice(hclass)  # size check before any data-dependent work
        n = int(points.shape[0])
        size = n if expected is None else expected
        large = structured and hclass.size > MAX_ROWS
        params, needed = self.parameters_for(
            size,
            d,
            eps,
            dlt,
            a,
            b,
            class_size=hclass.size,
            version_space_regime=large,
            expected=expected is not None,
        )
        if large and top_bound(params.block_size, params.alpha_delta, d) > 0:
            raise LearningInputError(
                f"{hclass.spec}: beyond {MAX_ROWS} hypotheses the proper learner needs the version-space "
                f"regime (d+2)·alpha_delta·n0 < 1 (here d={d}, n0={params.block_size}, alpha_delta="
                f"{float(params.alpha_delta):.3g}); leave alpha_delta unset"
            )
        source = resolve(rng)
        block_of = self._split(n, params, source)
        blocks = _parts(points, labels, block_of, params.blocks)
        in_b = block_of == PART_B
        if is_structured(hclass):
            hypothesis = self._structured(
                hclass,
                lattice if not structured else None,
                blocks,
                points[in_b],
                labels[in_b],
                params,
                d,
                eps,
                dlt,
                source,
            )
        else:
            if lattice is None:
                raise InvariantError("invariant broken: lattice is not None")
            outcome = poly_pri_learn(lattice, blocks, params, epsilon=eps, delta=dlt, rng=source, d=d)
            cover = minimax_cover(lattice.matrix, outcome.f_hat)  # post-processing of f̂
            row = self._select(lattice, cover.rows, points[in_b], labels[in_b], eps, source)
            hypothesis = hclass.hypothesis(row)
            # Properness is the product: never release anything that is not a row of the class.
            if not np.array_equal(np.asarray(hypothesis.truth_table(), dtype=bool), lattice.matrix[row]):
                raise AssertionError("proper learner produced a non-member; refusing to release it")
        parameters: dict[str, Any] = {
            **params.public(),
            "alpha": a,
            "beta": b,
            "ldim": d,
            "constants": dict(self.constants),
            "path": "structured" if structured else "matrix",
            "neighbours": "replace-one" if expected is None else "add/remove-one",
            "theorem": "GGKM Thm 6.4 (Alg 3 = Alg 2 + Lemma 6.2 cover + generic learner), realizable",
        }
        return LearnerResult(
            hypothesis=hypothesis,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=dlt,
            proper=True,
            sample_size=n,
            parameters=parameters,
            theorem_sample_size=needed,
            accuracy_guarantee_holds=params.mode == "paper" and size >= needed,
            neighbouring_relation=neighbouring_relation(expected),
        )

    def _structured(
        self,
        hclass: HypothesisClass,
        reference: ClassLattice | None,
        blocks: list[tuple[np.ndarray, np.ndarray]],
        xs_b: np.ndarray,
        ys_b: np.ndarray,
        params: ProperParameters,
        d: int,
        eps: float,
        dlt: float,
        rng: RandomSource,
    ) -> Hypothesis:
        """Alg 3 on thresholds, points, intervals: sets as boxes, structured cover, explicit selection.

        ``reference`` given: the sets come from ReduceTree on the whole class as a matrix, with no closed
        form and no cap (``path="matrix"``, the reference the tests compare with).
        """
        n0, k_prime, alpha_delta = params.block_size, params.k_prime, params.alpha_delta
        # small classes share one lattice (and its memo) between blocks
        shared = self.lattice(hclass)[0] if reference is None and hclass.size <= MAX_ROWS else None
        sets: list[BlockSet] = []
        cache: dict[bytes, BlockSet] = {}
        for bx, by in blocks:
            key = np.asarray(bx, dtype=np.int64).tobytes() + b"|" + np.asarray(by, dtype=np.int64).tobytes()
            if key not in cache:
                cache[key] = (
                    lattice_block_set(
                        hclass, reference, bx, by, n0=n0, k_prime=k_prime, alpha_delta=alpha_delta, d=d
                    )
                    if reference is not None
                    else block_set(
                        hclass, bx, by, lattice=shared, n0=n0, k_prime=k_prime, alpha_delta=alpha_delta, d=d
                    )[0]
                )
            sets.append(cache[key])
        f_hat = select(hclass, sets, epsilon=eps, delta=dlt, ell=params.ell, rng=rng)
        cover, _ = structured_cover(hclass, f_hat)  # post-processing of f̂
        hypothesis = (
            cover[0]
            if len(cover) == 1
            else cover[
                ExponentialMechanism(eps, 1, rng=rng).select(
                    [-int(np.count_nonzero(h.predict(xs_b) != ys_b)) if xs_b.size else 0 for h in cover]
                )
            ]
        )
        if coordinates(hclass, hypothesis) is None:
            raise AssertionError("proper learner produced a non-member; refusing to release it")
        return hypothesis

    def _split(self, n: int, params: ProperParameters, rng: RandomSource) -> np.ndarray:
        """Block of every example (``PART_B``, ``UNUSED``): positional with n public, random with E."""
        if params.expected_size is None:
            return positional_split(n, params, rng, self.shuffle)
        return random_split(n, params, rng)

    @staticmethod
    def _select(
        lattice: ClassLattice,
        rows: tuple[int, ...],
        xs: np.ndarray,
        ys: np.ndarray,
        epsilon: float,
        rng: RandomSource,
    ) -> int:
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
        return f"ProperLearner(k_prime={self.k_prime}, blocks={self.blocks}, path={self.path!r})"
