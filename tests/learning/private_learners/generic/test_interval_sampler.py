"""The O(n log n) exponential mechanism over intervals: its exact law, its certified weights, its rounds.

The law is checked two ways. *Exactly*, on every proposal of small samples: the proposal
probability times the acceptance factor, per member of the block, is one constant (as exact
rationals), the acceptance exponent is the block's errors minus the least errors (brute force over
the class), the blocks are the class's partition, and every acceptance probability is at most 1
(certified bounds): together, the output law is the exponential mechanism. *Statistically*,
seeded draws of the learner against the brute-force law. A broken sampler that skips the
acceptance step is shown wrong by the exact check.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privstream.learning.domain import as_points
from privstream.learning.hypothesis_classes import Intervals
from privstream.learning.private_learners import GenericLearner
from privstream.learning.private_learners.generic import interval_sampler as sampler_module
from privstream.learning.private_learners.generic.extended_floats import phi_power
from privstream.learning.private_learners.generic.interval_sampler import M_T, IntervalSampler, Proposal
from privstream.learning.randomness import exp_neg_bounds, seeded

PHI = Fraction(2**52, 2**52 - 1)

#: Datasets that stress the sampler: (name, N, xs, ys).
ADVERSARIAL = [
    ("empty", 6, [], []),
    ("all zeros", 6, [0, 1, 2, 3, 4, 5], [0, 0, 0, 0, 0, 0]),
    ("all ones", 6, [0, 1, 2, 3, 4, 5], [1, 1, 1, 1, 1, 1]),
    ("alternating", 6, [0, 1, 2, 3, 4, 5], [0, 1, 0, 1, 0, 1]),
    ("one huge point mass", 6, [2] * 12 + [4], [1] * 12 + [0]),
    ("decreasing W", 7, [6, 5, 4, 3, 1], [0, 0, 0, 0, 0]),
    ("mass against the rest", 7, [3] * 6 + [0, 1, 5, 6], [0] * 6 + [1, 1, 1, 1]),
]


def arrays(xs: list[int], ys: list[int], n_dom: int) -> tuple[np.ndarray, np.ndarray]:
    return as_points(np.array(xs, dtype=object), n_dom), np.array(ys, dtype=np.uint8)


def brute_errors(n_dom: int, xs: np.ndarray, ys: np.ndarray) -> dict:
    """errors of every interval (the reference)."""
    hclass = Intervals(n_dom)
    return {
        h: int((h.predict(xs).astype(np.uint8) != ys).sum())
        for h in (hclass.hypothesis(i) for i in range(hclass.size))
    }


def bounds_of(h) -> tuple[int, int]:
    """``(a, b)`` of ``1[a <= x < b]``; ``(0, 0)`` for the empty function."""
    first, changes = h.change_points()
    ends = ([0] if first else []) + list(changes) + [h.domain_size]
    return (ends[0], ends[1]) if len(ends) > 1 else (0, 0)


def block_of(h, points: list[int]) -> tuple[int, int]:
    """The proposal ``(row β, α)`` holding h: 0 for the empty function and in-gap intervals."""
    a, b = bounds_of(h)
    alpha, beta = bisect.bisect_left(points, a), bisect.bisect_left(points, b)
    return (0, -1) if alpha == beta else (beta, alpha)


def rho_power_bounds(coefficient: Fraction, gamma: int, bits: int = 256) -> tuple[Fraction, Fraction]:
    lo, hi = exp_neg_bounds(coefficient * gamma, bits)
    return Fraction(lo, 2**bits), Fraction(hi, 2**bits)


def assert_law_is_the_exponential_mechanism(
    n_dom: int, xs: list[int], ys: list[int], epsilon: float, sensitivity: float = 1
) -> IntervalSampler:
    """The exact check (module docstring), against brute force over the class."""
    px, py = arrays(xs, ys, n_dom)
    sampler = IntervalSampler(Intervals(n_dom), px, py, epsilon, sensitivity=sensitivity)
    errors = brute_errors(n_dom, px, py)
    least = min(errors.values())
    points = sorted(set(xs))
    members: dict[tuple[int, int], list] = {}
    for h in errors:
        members.setdefault(block_of(h, points), []).append(h)
    proposals = sampler.proposals()
    assert {(p.row, p.alpha) for p in proposals} == set(members)
    assert sum(sampler.proposal_probability(p) for p in proposals) == 1
    per_member = set()
    for proposal in proposals:
        block = members[(proposal.row, proposal.alpha)]
        assert sampler.block_size(proposal) == len(block)
        factor, gamma = sampler.acceptance(proposal)
        assert {errors[h] for h in block} == {least + gamma}  # one error level per block
        assert factor * rho_power_bounds(sampler.coefficient, gamma)[1] <= 1  # a <= 1, certified
        per_member.add(sampler.proposal_probability(proposal) * factor / len(block))
    assert len(per_member) == 1  # Pr[h] ∝ Pr[propose]·factor/size · ρ^γ: the same constant for all
    return sampler


@pytest.mark.parametrize(("name", "n_dom", "xs", "ys"), ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 7.0])
def test_exact_law_on_adversarial_samples(name, n_dom, xs, ys, epsilon) -> None:
    assert_law_is_the_exponential_mechanism(n_dom, xs, ys, epsilon)


@settings(max_examples=120, deadline=None)
@given(
    n_dom=st.integers(1, 7),
    data=st.data(),
    epsilon=st.sampled_from([0.01, 0.5, 2.0, 50.0]),
    sensitivity=st.sampled_from([1, 0.5]),
)
def test_exact_law_on_random_samples(n_dom, data, epsilon, sensitivity) -> None:
    point = st.one_of(st.just(0), st.just(n_dom - 1), st.integers(0, n_dom - 1))
    pairs = data.draw(st.lists(st.tuples(point, st.integers(0, 1)), max_size=7))
    assert_law_is_the_exponential_mechanism(
        n_dom, [x for x, _ in pairs], [y for _, y in pairs], epsilon, sensitivity
    )


@pytest.mark.parametrize("n_dom", [2**63, 2**64 + 3, 2**300])
def test_exact_identity_on_huge_domains(n_dom) -> None:
    """Blocks of astronomically many intervals: the same constant, and each block's exponent is
    the errors of its members (checked on the block's first and last interval) minus the least."""
    xs = [0, 5, 2**40, n_dom // 3, n_dom // 3, n_dom - 1]
    ys = [1, 0, 1, 1, 0, 1]
    px, py = arrays(xs, ys, n_dom)
    sampler = IntervalSampler(Intervals(n_dom), px, py, 1.0)
    proposals = sampler.proposals()
    assert sum(sampler.proposal_probability(p) for p in proposals) == 1
    points = sorted(set(xs))
    starts = [0] + [v + 1 for v in points]
    ends = [*points, n_dom]
    per_member, gammas = set(), {}
    for p in proposals:
        factor, gamma = sampler.acceptance(p)
        assert factor * rho_power_bounds(sampler.coefficient, gamma)[1] <= 1
        per_member.add(sampler.proposal_probability(p) * factor / sampler.block_size(p))
        if p.row:
            for a, b in ((starts[p.alpha], starts[p.row]), (ends[p.alpha], ends[p.row])):
                h = sampler_module.interval_hypothesis(n_dom, a, b)
                gammas.setdefault(int((h.predict(px).astype(np.uint8) != py).sum()) - gamma, set()).add(p)
    assert len(per_member) == 1
    assert len(gammas) == 1  # errors - γ is the same (least) number for every block
    assert sum(sampler.block_size(p) for p in proposals) == Intervals(n_dom).size


def chi_square_quantile(df: int, z: float = 3.719) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile (z = 3.719: level 1 - 1e-4)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize(("name", "n_dom", "xs", "ys"), ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_learner_draws_follow_the_brute_force_law(name, n_dom, xs, ys) -> None:
    """Seeded releases of the generic learner against exp(-ε·errors/2)/Z over all intervals."""
    px, py = arrays(xs, ys, n_dom)
    errors = brute_errors(n_dom, px, py)
    weights = {h: math.exp(-0.5 * e) for h, e in errors.items()}  # ε = 1
    total = math.fsum(weights.values())
    runs, rng, learner = 3000, seeded(17), GenericLearner()
    draws = Counter(
        learner.fit(Intervals(n_dom), px, py, epsilon=1.0, rng=rng).hypothesis for _ in range(runs)
    )
    assert set(draws) <= set(weights)
    chi2 = sum((draws.get(h, 0) - runs * w / total) ** 2 / (runs * w / total) for h, w in weights.items())
    assert chi2 < chi_square_quantile(len(weights) - 1)
    tv = 0.5 * sum(abs(draws.get(h, 0) / runs - w / total) for h, w in weights.items())
    assert tv < 0.05


def test_zero_examples_give_the_uniform_law() -> None:
    """n = 0: all scores equal, so the release is uniform over the class (exactly, and in draws)."""
    sampler = assert_law_is_the_exponential_mechanism(9, [], [], 1.0)
    assert [(p.row, sampler.acceptance(p)[1]) for p in sampler.proposals()] == [(0, 0)]
    rng = seeded(3)
    draws = Counter(bounds_of(sampler.draw(rng)) for _ in range(4600))
    assert len(draws) == Intervals(9).size  # 46 functions, about 100 draws each
    assert min(draws.values()) > 50 and max(draws.values()) < 160


def test_skipping_the_acceptance_is_shown_wrong() -> None:
    """A broken sampler that outputs its proposal (no acceptance step) has Pr[h] ∝ Pr[propose]/size,
    a rational; the exponential mechanism's ratios are powers of ρ = e^(-ε/2), irrational: the
    exact check separates them on the first pair of blocks with different errors."""
    px, py = arrays([1, 3, 3, 4], [1, 0, 1, 1], 6)
    sampler = IntervalSampler(Intervals(6), px, py, 1.0)
    proposals = sampler.proposals()
    broken = {p: sampler.proposal_probability(p) / sampler.block_size(p) for p in proposals}
    gamma = {p: sampler.acceptance(p)[1] for p in proposals}
    first = proposals[0]
    other = next(p for p in proposals if gamma[p] != gamma[first])
    ratio = broken[other] / broken[first]  # the broken law's Pr[h in other]/Pr[h in first], per member
    shift = gamma[other] - gamma[first]
    lo, hi = rho_power_bounds(sampler.coefficient, abs(shift))
    target_lo, target_hi = (lo, hi) if shift > 0 else (1 / hi, 1 / lo)
    assert not target_lo <= ratio <= target_hi
    # the production sampler's per-member probabilities have exactly the target ratio:
    fixed = {p: broken[p] * sampler.acceptance(p)[0] for p in proposals}
    assert fixed[other] == fixed[first]


def test_a_round_accepts_with_probability_close_to_one() -> None:
    """Σ Pr[propose]·a over all proposals, with certified lower bounds: above 1 - 1e-9 here."""
    px, py = arrays([0, 1, 2, 2, 5, 6, 9], [1, 0, 1, 1, 0, 1, 1], 12)
    sampler = IntervalSampler(Intervals(12), px, py, 0.7)
    accept = sum(
        sampler.proposal_probability(p)
        * sampler.acceptance(p)[0]
        * rho_power_bounds(sampler.coefficient, sampler.acceptance(p)[1])[0]
        for p in sampler.proposals()
    )
    assert 1 - 1e-9 < accept <= 1


@pytest.mark.parametrize("epsilon", [1e-9, 1e-3, 1.0, 1e6, 1e300])
def test_extreme_epsilons_release_valid_intervals(epsilon) -> None:
    """Tiny ε (a table reaching every exponent) and huge ε (every exponent clipped at once)."""
    rng = np.random.default_rng(3)
    xs = rng.integers(0, 2**32, 3000)
    ys = ((xs > 2**30) & (xs < 2**31)).astype(np.uint8)
    h = IntervalSampler(Intervals(2**32), xs, ys, epsilon).draw(seeded(1))
    a, b = bounds_of(h)
    assert 0 <= a < b <= 2**32 or (a, b) == (0, 0)
    if epsilon >= 1e6:  # essentially an empirical risk minimiser
        assert int((h.predict(xs).astype(np.uint8) != ys).sum()) == 0


@pytest.mark.parametrize("labels", ["zeros", "ones", "alternating", "mass", "noisy"])
def test_large_adversarial_windows(labels) -> None:
    """10^5 examples of every shape are released (no size guard) and land where they should."""
    rng = np.random.default_rng(8)
    n, n_dom = 100_000, 2**32
    xs = rng.integers(0, n_dom, n)
    if labels == "zeros":
        ys = np.zeros(n, dtype=np.uint8)
    elif labels == "ones":
        ys = np.ones(n, dtype=np.uint8)
    elif labels == "alternating":
        xs = np.arange(n) * (n_dom // n)
        ys = (np.arange(n) % 2).astype(np.uint8)
    elif labels == "mass":
        xs = np.concatenate((np.full(n // 2, 12345), xs[: n - n // 2]))
        ys = np.concatenate((np.ones(n // 2), np.zeros(n - n // 2))).astype(np.uint8)
    else:
        ys = (((xs >= 2**31) & (xs < 3 * 2**30)) ^ (rng.random(n) < 0.2)).astype(np.uint8)
    h = GenericLearner().fit(Intervals(n_dom), xs, ys, epsilon=1.0, rng=seeded(2)).hypothesis
    errors = int((h.predict(xs).astype(np.uint8) != ys).sum())
    best = {"zeros": 0, "ones": 0, "alternating": n // 2 - 1, "mass": 0, "noisy": None}[labels]
    if best is not None:
        assert errors <= best + 40  # ε = 1: a release 40 errors worse than the best has weight e^-20
    else:
        a, b = bounds_of(h)
        assert abs(a - 2**31) < 2**22 and abs(b - 3 * 2**30) < 2**22


# -- the certified pieces -------------------------------------------------------------------------


@pytest.mark.parametrize("coefficient", [Fraction(1, 2), Fraction(1, 2000), Fraction(37, 3)])
def test_power_table_is_certified(coefficient) -> None:
    """ρ̂^d within [φ^-M_T, φ^M_T]·ρ^d below the cut, exactly 2^-L (>= ρ^d) from it on."""
    powers = sampler_module._Powers(coefficient, 80, largest=300_000)
    ds = np.array(
        sorted(
            {0, 1, 2, 3, 7, 100, 255, 256, 4097, 65535, 65536, 123_457, 300_000}
            | {powers.cut - 1, powers.cut, powers.cut + 1} - {-1}
        )
    )
    ds = ds[ds <= 300_000]
    m, e = powers(ds)
    assert rho_power_bounds(coefficient, powers.cut)[1] <= Fraction(1, 2**80)  # ρ^d <= ρ^cut <= 2^-80
    for d, mi, ei in zip(ds.tolist(), m.tolist(), e.tolist(), strict=True):
        value = Fraction(mi) * Fraction(2) ** ei
        if d >= powers.cut:
            assert value == Fraction(1, 2**80)
        else:
            lo, hi = rho_power_bounds(coefficient, d, bits=400 + int(coefficient * d * 2))
            assert lo / phi_power(M_T) <= value <= hi * phi_power(M_T)


def test_prefix_scan_matches_exact_sums() -> None:
    """(M_β, F̂_β) against exact rationals: M the prefix minimum, F̂ within φ^±m_F of F."""
    rng = np.random.default_rng(4)
    coefficient = Fraction(3, 4)
    for k in (1, 2, 3, 5, 17, 100, 1000):
        w = np.cumsum(rng.integers(-3, 4, size=k)).astype(np.int64)
        sizes = rng.integers(1, 2**40, size=k).astype(np.uint64)
        powers = sampler_module._Powers(coefficient, 200, largest=int(w.max() - w.min()))
        am, ae = sampler_module.from_ints(sizes)
        mw, fm, fe = sampler_module._prefix_sums(w, am, ae, powers)
        assert mw.tolist() == np.minimum.accumulate(w).tolist()
        chain = 1 + 2 * k.bit_length() * (M_T + 2)
        for beta in sorted({0, k // 2, k - 1}):
            lo = hi = Fraction(0)
            for alpha in range(beta + 1):
                plo, phi_ = rho_power_bounds(coefficient, int(w[alpha] - mw[beta]))
                lo, hi = lo + int(sizes[alpha]) * plo, hi + int(sizes[alpha]) * phi_
            value = Fraction(float(fm[beta])) * Fraction(2) ** int(fe[beta])
            assert lo / phi_power(chain) <= value <= hi * phi_power(chain)


def test_in_gap_count_and_bit_lengths_are_exact() -> None:
    rng = np.random.default_rng(6)
    edges = np.array([0, 1, 2**64 - 1], dtype=np.uint64)
    gaps = np.concatenate((rng.integers(0, 2**63, 500, dtype=np.uint64), edges))
    exact = sum(int(g) * (int(g) + 1) // 2 for g in gaps)
    assert sampler_module._in_gap_count(gaps, sum(int(g) for g in gaps)) == exact
    assert sampler_module._bit_lengths(gaps).tolist() == [int(g).bit_length() for g in gaps]


def test_proposal_fields_describe_the_round() -> None:
    px, py = arrays([2, 4], [1, 0], 6)
    sampler = IntervalSampler(Intervals(6), px, py, 1.0)
    proposal = sampler.propose(seeded(0))
    assert isinstance(proposal, Proposal)
    assert proposal in sampler.proposals()
