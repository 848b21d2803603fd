"""Privacy guarantees as data, and pure composition functions (the ledger's arithmetic).

* :class:`PrivacyGuarantee` -- the privacy map of one release: (epsilon, delta) plus, when known, a
  zCDP parameter ``rho`` and a tabulated Rényi-DP curve ``rdp`` (order -> value).
* Composition of k releases on the same data (sequential):
  :func:`basic_composition` (Dwork-Roth Thm 3.16), :func:`advanced_composition`
  (Dwork-Rothblum-Vadhan 2010, Thm III.3 / Dwork-Roth Thm 3.20), and the tight accountant
  :func:`rdp_composition` (Rényi DP, Mironov 2017; conversion of Canonne-Kamath-Steinke 2020 Prop 12).
  :func:`tightest_composition` returns the best valid one.
* :func:`parallel_composition` for releases on *disjoint* data (disjoint windows at the example
  level): the max, because one example can only influence the release of its own window.

All inputs are validated (:class:`PrivacyParameterError`); everything is a pure function of floats.
Accounting is done in floating point (as in Google's dp-accounting): its rounding error is ~1e-15
relative, far below any budget granularity; sampling never uses floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from privstream.learning.errors import PrivacyParameterError

__all__ = [
    "DEFAULT_RDP_ORDERS",
    "PrivacyGuarantee",
    "advanced_composition",
    "basic_composition",
    "parallel_composition",
    "rdp_composition",
    "rdp_discrete_laplace",
    "rdp_pure_dp",
    "rdp_to_dp",
    "tightest_composition",
    "zcdp_for_dp",
    "zcdp_to_dp",
]

#: Rényi orders on which curves are tabulated (as in dp-accounting's RDP accountant).
DEFAULT_RDP_ORDERS: tuple[float, ...] = (
    tuple(1.0 + x / 10.0 for x in range(1, 100))
    + tuple(float(a) for a in range(11, 64))
    + (128.0, 256.0, 512.0)
)

REPLACE_ONE = "replace-one"


def _check_epsilon(epsilon: float, name: str = "epsilon", *, allow_zero: bool = True) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        raise PrivacyParameterError(f"{name} must be a real number, got {epsilon!r}")
    eps = float(epsilon)
    if not math.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise PrivacyParameterError(f"{name} must be finite and {bound}, got {epsilon!r}")
    return eps


def _check_delta(delta: float, name: str = "delta", *, allow_zero: bool = True) -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        raise PrivacyParameterError(f"{name} must be a real number, got {delta!r}")
    d = float(delta)
    if not (0.0 <= d < 1.0) or (d == 0 and not allow_zero):
        bound = "[0, 1)" if allow_zero else "(0, 1)"
        raise PrivacyParameterError(f"{name} must be in {bound}, got {delta!r}")
    return d


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a mechanism promises for one release, under ``neighbouring`` datasets.

    ``epsilon``/``delta``: approximate DP. ``rho``: the release is also rho-zCDP (Bun-Steinke 2016);
    for Gaussian noise (epsilon, delta) is then a conversion of rho at that delta. ``rdp``: pairs
    (alpha, D_alpha) bounding the Rényi divergence at those orders (Mironov 2017).
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    rdp: tuple[tuple[float, float], ...] = field(default=(), repr=False)
    mechanism: str = ""
    neighbouring: str = REPLACE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", _check_delta(self.delta))
        if self.rho is not None:
            object.__setattr__(self, "rho", _check_epsilon(self.rho, "rho"))
        for alpha, value in self.rdp:
            if not (alpha > 1 and value >= 0 and math.isfinite(value)):
                raise PrivacyParameterError(f"invalid RDP point ({alpha}, {value})")

    @property
    def is_pure(self) -> bool:
        """True for (epsilon, 0)-DP."""
        return self.delta == 0.0

    def rdp_at(self, alpha: float) -> float | None:
        """Best known bound on the Rényi divergence of order ``alpha``, or None if unknown.

        Combines the tabulated curve (points at exactly this order, normally
        :data:`DEFAULT_RDP_ORDERS`), rho-zCDP (D_alpha <= alpha·rho) and, for pure DP, the
        randomized-response bound (:func:`rdp_pure_dp`).
        """
        bounds = [v for a, v in self.rdp if a == alpha]
        if self.rho is not None:
            bounds.append(alpha * self.rho)
        if self.is_pure:
            bounds.append(rdp_pure_dp(self.epsilon, alpha))
        return min(bounds) if bounds else None


# -- (epsilon, delta) composition ---------------------------------------------------------------


def _as_list(guarantees: Iterable[PrivacyGuarantee]) -> list[PrivacyGuarantee]:
    gs = list(guarantees)
    if not gs:
        raise PrivacyParameterError("composition needs at least one guarantee")
    relations = {g.neighbouring for g in gs}
    if len(relations) > 1:
        raise PrivacyParameterError(f"cannot compose guarantees under different relations {relations}")
    return gs


def _known_rhos(guarantees: list[PrivacyGuarantee]) -> list[float] | None:
    """Every guarantee's zCDP rho, or None when one of them has none."""
    rhos = [g.rho for g in guarantees if g.rho is not None]
    return rhos if len(rhos) == len(guarantees) else None


def basic_composition(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Sequential composition: epsilons and deltas add (Dwork-Roth Thm 3.16); so do rhos."""
    gs = _as_list(guarantees)
    rhos = _known_rhos(gs)
    return PrivacyGuarantee(
        epsilon=math.fsum(g.epsilon for g in gs),
        delta=min(math.fsum(g.delta for g in gs), math.nextafter(1.0, 0.0)),
        rho=None if rhos is None else math.fsum(rhos),
        mechanism="basic_composition",
        neighbouring=gs[0].neighbouring,
    )


def advanced_composition(guarantee: PrivacyGuarantee, k: int, delta_slack: float) -> PrivacyGuarantee:
    """k-fold adaptive composition of an (eps, delta)-DP mechanism (DRV10 Thm III.3).

    Result: (sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1), k delta + delta').
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise PrivacyParameterError(f"k must be an int >= 1, got {k!r}")
    slack = _check_delta(delta_slack, "delta_slack", allow_zero=False)
    eps = guarantee.epsilon
    eps_total = math.sqrt(2 * k * math.log(1 / slack)) * eps + k * eps * math.expm1(eps)
    return PrivacyGuarantee(
        epsilon=eps_total,
        delta=k * guarantee.delta + slack,
        mechanism="advanced_composition",
        neighbouring=guarantee.neighbouring,
    )


def parallel_composition(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Releases computed on pairwise *disjoint* parts of the data (e.g. disjoint windows).

    One example lies in one part, so a neighbouring pair changes one release only: the overall
    guarantee is the worst single one (McSherry 2009, Thm 4). Not valid for overlapping windows or
    for a privacy unit (user) that contributes to several parts -- use sequential composition there.
    """
    gs = _as_list(guarantees)
    rhos = _known_rhos(gs)
    return PrivacyGuarantee(
        epsilon=max(g.epsilon for g in gs),
        delta=max(g.delta for g in gs),
        rho=None if rhos is None else max(rhos),
        mechanism="parallel_composition",
        neighbouring=gs[0].neighbouring,
    )


# -- zCDP and Rényi DP ---------------------------------------------------------------------------


def zcdp_to_dp(rho: float, delta: float) -> float:
    """epsilon with rho-zCDP => (epsilon, delta)-DP: rho + 2 sqrt(rho ln(1/delta)) [BS16 Prop 1.3]."""
    rho = _check_epsilon(rho, "rho")
    delta = _check_delta(delta, allow_zero=False)
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def zcdp_for_dp(epsilon: float, delta: float) -> float:
    """Largest rho with zcdp_to_dp(rho, delta) <= epsilon: (sqrt(L + eps) - sqrt(L))², L = ln(1/delta)."""
    eps = _check_epsilon(epsilon, allow_zero=False)
    log_inv = math.log(1 / _check_delta(delta, allow_zero=False))
    # eps / (sqrt(L+eps) + sqrt(L)) == sqrt(L+eps) - sqrt(L), without cancellation
    return (eps / (math.sqrt(log_inv + eps) + math.sqrt(log_inv))) ** 2


def rdp_pure_dp(epsilon: float, alpha: float) -> float:
    """Rényi divergence bound of order alpha for any epsilon-DP mechanism.

    Randomized response dominates every eps-DP mechanism (Kairouz-Oh-Viswanath 2015, Thm 2.5), so
    by data processing D_alpha <= D_alpha(RR_eps)
    = log((e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps)) / (alpha - 1).
    """
    eps = _check_epsilon(epsilon)
    if not alpha > 1:
        raise PrivacyParameterError(f"Rényi order must be > 1, got {alpha}")
    if eps == 0:
        return 0.0
    log_num = _logaddexp(alpha * eps, (1 - alpha) * eps)
    value = (log_num - _logaddexp(0.0, eps)) / (alpha - 1)
    return min(max(value, 0.0), eps)


def rdp_discrete_laplace(shift: int, scale: float, alpha: float) -> float:
    """Exact Rényi divergence D_alpha(L || L + shift) of the discrete Laplace Pr[z] ∝ exp(-|z|/scale).

    Closed form of sum_z P(z)^alpha Q(z)^(1-alpha) split at 0 and ``shift`` (three geometric
    series); it tends to Mironov's Laplace formula (2017, Prop 6) as scale, shift -> inf with
    shift/scale fixed. Symmetric in the direction of the shift.
    """
    if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
        raise PrivacyParameterError(f"shift must be an int >= 0, got {shift!r}")
    _check_epsilon(scale, "scale", allow_zero=False)
    if not alpha > 1:
        raise PrivacyParameterError(f"Rényi order must be > 1, got {alpha}")
    if shift == 0:
        return 0.0
    log_q = -1.0 / scale
    d = float(shift)
    # S·(1+q) = q^{(1-a)D} + q^{aD} + q^{(1-a)D} (1-q) r (1-r^{D-1})/(1-r),  r = q^{2a-1}
    b = 2 * alpha - 1
    middle = 0.0
    if shift > 1:
        middle = (
            math.expm1(log_q) / math.expm1(b * log_q) * math.exp(b * log_q) * -math.expm1(b * (d - 1) * log_q)
        )
    log_s = _logaddexp((1 - alpha) * d * log_q + math.log1p(middle), alpha * d * log_q)
    log_s -= math.log1p(math.exp(log_q))
    return max(log_s / (alpha - 1), 0.0)


def rdp_to_dp(orders: Sequence[float], rdp: Sequence[float], delta: float) -> float:
    """Smallest epsilon over the orders with (alpha, rdp)-RDP => (epsilon, delta)-DP.

    epsilon = rdp + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1)
    (Canonne-Kamath-Steinke 2020 Prop 12; Balle et al. 2020 Thm 21), never above the classical
    rdp + log(1/delta)/(alpha-1) (Mironov 2017 Prop 3).
    """
    delta = _check_delta(delta, allow_zero=False)
    if len(orders) != len(rdp) or not orders:
        raise PrivacyParameterError("orders and rdp must be non-empty and of equal length")
    best = math.inf
    for alpha, value in zip(orders, rdp, strict=True):
        if not alpha > 1:
            raise PrivacyParameterError(f"Rényi order must be > 1, got {alpha}")
        eps = value + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
        best = min(best, max(eps, 0.0))
    return best


def rdp_composition(
    guarantees: Iterable[PrivacyGuarantee],
    delta: float,
    orders: Sequence[float] = DEFAULT_RDP_ORDERS,
) -> PrivacyGuarantee:
    """Tight sequential composition via Rényi DP.

    Releases with an RDP description (rho, a curve, or pure DP) are summed order by order and
    converted at ``delta`` (:func:`rdp_to_dp`); releases known only as (eps, delta > 0) are added
    by basic composition on top (valid: basic composition of the two groups).
    """
    gs = _as_list(guarantees)
    delta = _check_delta(delta, allow_zero=False)
    totals = [0.0] * len(orders)
    rest: list[PrivacyGuarantee] = []
    any_rdp = False
    for g in gs:
        values = [v for v in (g.rdp_at(a) for a in orders) if v is not None]
        if len(values) < len(orders):  # no Rényi curve: composed by its (epsilon, delta)
            rest.append(g)
            continue
        any_rdp = True
        totals = [t + v for t, v in zip(totals, values, strict=True)]
    eps = rdp_to_dp(orders, totals, delta) if any_rdp else 0.0
    used_delta = delta if any_rdp else 0.0
    eps += math.fsum(g.epsilon for g in rest)
    rhos = _known_rhos(gs)
    return PrivacyGuarantee(
        epsilon=eps,
        delta=min(used_delta + math.fsum(g.delta for g in rest), math.nextafter(1.0, 0.0)),
        rho=None if rhos is None else math.fsum(rhos),
        mechanism="rdp_composition",
        neighbouring=gs[0].neighbouring,
    )


def tightest_composition(guarantees: Iterable[PrivacyGuarantee], delta_slack: float) -> PrivacyGuarantee:
    """The smallest-epsilon valid sequential composition with delta <= sum(delta_i) + delta_slack.

    Candidates: basic; advanced (when all guarantees are identical); RDP.
    """
    gs = _as_list(guarantees)
    slack = _check_delta(delta_slack, "delta_slack", allow_zero=False)
    candidates = [basic_composition(gs), rdp_composition(gs, slack)]
    if all(g == gs[0] for g in gs):
        candidates.append(advanced_composition(gs[0], len(gs), slack))
    return min(candidates, key=lambda g: (g.epsilon, g.delta))


def _logaddexp(a: float, b: float) -> float:
    hi, lo = (a, b) if a >= b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))
