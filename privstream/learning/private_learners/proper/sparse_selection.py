"""(ε, δ)-DP sparse selection (GGKM Def 5.1 / Prop 5.6): pick an element lying in many users' sets.

GGKM21 Proposition 5.6 ([GKM20 Lemma 36] is not reproduced in the paper; this is our instantiation,
with its proof). m users hold sets ``S_i`` of at most ``ell`` elements (``ell`` public, possibly
astronomically large); neighbours replace one user's set by another of size ``<= ell``.

    c(u) = #{i : u in S_i} for u in C = ∪ S_i
    output u in C with weight exp(ε'·c(u)/2), or the phantom ⊥ with weight W0; ⊥ -> ``default``

This is the exponential mechanism (score c, sensitivity 1) over ``C ∪ {⊥}``, sampled exactly by
:meth:`~privstream.learning.mechanisms.ExponentialMechanism.select_block`: the phantom is one block
of ``ceil(ell/δ)`` members with score 1, i.e. ``W0 = ceil(ell/δ)·e^{ε'/2} >= ell·e^{ε'/2}/δ``.

**Privacy.** Replacing ``S_i`` moves every count by at most 1; elements in ``C' \\ C`` (at most
``ell``) have count 1 in ``C'``. Their total mass is ``<= ell·e^{ε'/2}/W0 <= δ``; the normalisers obey
``Z' <= e^{ε'/2}Z + ell·e^{ε'/2} <= e^{ε'/2}(1 + δ)Z`` (since ``Z >= W0``). So every outcome
``o`` outside ``C' \\ C`` has ``P'(o) <= e^{ε'}(1+δ)·P(o)`` and the mechanism is
``(ε' + ln(1 + δ), δ)``-DP. We run it with ``ε' = ε - ln(1 + δ)``: exactly (ε, δ)-DP.

**Utility.** With ``c*`` the largest count, ``Pr[c(o) < c* - η] <= m·ell·e^{-ε'η/2} + W0·e^{-ε'c*/2}``;
so the error is at most :func:`selection_error` ``ν = max((2/ε')ln(2m·ell/β), (2/ε')ln(2W0/β))``
with probability ``>= 1 - β`` (output ⊥ counts as an error only when ``c* > ν``).

>>> from privstream.learning.randomness import seeded
>>> sets = [{"a"}] * 60 + [{"b"}] * 5
>>> sparse_select(sets, epsilon=1.0, delta=1e-6, ell=1, default="none", rng=seeded(1))
'a'
>>> law = selection_law([{"a"}], epsilon=1.0, delta=1e-6, ell=1, default="none")
>>> round(law["a"], 8) <= 1e-6
True
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Hashable, Sequence
from fractions import Fraction
from typing import TypeVar

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.mechanisms._common import positive_int, positive_real, probability
from privstream.learning.ordering import natural_order
from privstream.learning.randomness import RandomSource

__all__ = ["MECHANISM", "guarantee", "inner_epsilon", "selection_error", "selection_law", "sparse_select"]

MECHANISM = "sparse-selection"


def inner_epsilon(epsilon: float, delta: float) -> float:
    """``ε' = ε - ln(1 + δ)``: the exponential mechanism's parameter for an (ε, δ) guarantee."""
    eps = float(positive_real(epsilon, "epsilon"))
    dlt = probability(delta, "delta")
    inner = eps - math.log1p(dlt)
    if inner <= 0:
        raise PrivacyParameterError(f"sparse selection needs epsilon > ln(1 + delta); got {eps}, {dlt}")
    return inner


H = TypeVar("H", bound=Hashable)


def _phantom_size(ell: int, delta: float) -> int:
    """``ceil(ell/δ)``, exactly (δ is a float, hence a dyadic rational)."""
    return math.ceil(Fraction(positive_int(ell, "ell")) / Fraction(delta))


def _blocks(sets: Sequence[Collection[H]], ell: int, delta: float) -> tuple[list[H], list[tuple[int, int]]]:
    counts: Counter[H] = Counter()
    for s in sets:
        if len(s) > ell:
            raise PrivacyParameterError(f"a set has {len(s)} elements, more than the public bound {ell}")
        counts.update(set(s))
    # A data-independent candidate order (sorted keys), so seeded runs are reproducible and the
    # position of an element reveals nothing beyond its count.
    keys = natural_order(counts)
    if keys is None:
        keys = sorted(counts, key=repr)
    blocks = [(1, counts[u]) for u in keys]
    blocks.append((_phantom_size(ell, delta), 1))
    return keys, blocks


def sparse_select(
    sets: Sequence[Collection[H]],
    *,
    epsilon: float,
    delta: float,
    ell: int,
    default: H,
    rng: RandomSource | None = None,
) -> H:
    """One (ε, δ)-DP draw: an element of many sets, or ``default`` (data-independent) for ⊥."""
    eps_inner = inner_epsilon(epsilon, delta)
    keys, blocks = _blocks(sets, ell, delta)
    i = ExponentialMechanism(eps_inner, 1, rng=rng).select_block(blocks)
    return default if i == len(keys) else keys[i]


def selection_law(
    sets: Sequence[Collection[Hashable]], *, epsilon: float, delta: float, ell: int, default: Hashable
) -> dict[Hashable, float]:
    """The exact output distribution of :func:`sparse_select` (floats; tests and audits only)."""
    eps_inner = inner_epsilon(epsilon, delta)
    keys, blocks = _blocks(sets, ell, delta)
    probs = ExponentialMechanism(eps_inner, 1).block_probabilities(blocks)
    law: dict[Hashable, float] = {}
    for key, p in zip([*keys, default], probs, strict=True):
        law[key] = law.get(key, 0.0) + p
    return law


def selection_error(m: int, log_ell: float, epsilon: float, delta: float, beta: float) -> float:
    """ν: with probability ``>= 1 - β`` the output's count is at least ``c* - ν`` (module docstring).

    ``log_ell = ln(ell)`` (ell itself may not fit a float).

    >>> round(selection_error(100, math.log(3), 1.0, 1e-6, 0.1), 2)
    36.82
    """
    eps = inner_epsilon(epsilon, delta)
    b = probability(beta, "beta")
    log_w0 = log_ell - math.log(delta) + eps / 2  # ln W0 up to the ceil (< 1 unit)
    return max(2 / eps * (math.log(2 * m / b) + log_ell), 2 / eps * (math.log(2 / b) + log_w0))


def guarantee(epsilon: float, delta: float) -> PrivacyGuarantee:
    """The (ε, δ) guarantee of :func:`sparse_select` (replace-one-set neighbours)."""
    inner_epsilon(epsilon, delta)  # validates
    return PrivacyGuarantee(epsilon=float(epsilon), delta=float(delta), mechanism=MECHANISM)
