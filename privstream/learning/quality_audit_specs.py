"""The quality estimate (:mod:`privstream.learning.quality`) in the privacy audit: its production
function on worst-case neighbouring pairs, with the exact laws and broken variants the audit
must catch.

* ``quality`` (size private, add/remove-one): one mistaken example more moves both the error count
  and the size by 1; the released pair must be ε-DP.
* ``quality-count-window`` (size public, replace-one): one correct prediction turned wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from privstream.learning.audit.harness import AuditSpec, MechanismFactory
from privstream.learning.mechanisms import DiscreteLaplaceMechanism
from privstream.learning.quality import estimate_error
from privstream.learning.randomness import RandomSource

__all__ = ["quality_audit_spec", "quality_count_window_audit_spec"]

EPSILON = 1.0
_CORRECT, _MISTAKE = (0, 0), (1, 0)  # (prediction, label)
_ADD_REMOVE_PAIR = ((_CORRECT,) * 3, (_CORRECT,) * 3 + (_MISTAKE,))
_REPLACE_PAIR = ((_CORRECT,) * 4, (_CORRECT,) * 3 + (_MISTAKE,))
_REACH = 8  # outcomes clipped to [centre - reach, centre + reach] per coordinate


def _split(dataset: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    return [p for p, _ in dataset], [y for _, y in dataset]


def _dlap(scale: float, centre: int, lo: int, hi: int) -> dict[int, float]:
    """The discrete Laplace law around ``centre``, its tails lumped into ``lo`` and ``hi``."""
    q = math.exp(-1 / scale)
    mass = {v: (1 - q) / (1 + q) * q ** abs(v - centre) for v in range(lo + 1, hi)}
    below = q ** (centre - lo) / (1 + q)  # Pr[X <= lo] for lo < centre
    mass[lo], mass[hi] = below, 1 - below - math.fsum(mass.values())
    return mass


def _clip(value: int, lo: int, hi: int) -> int:
    return min(max(value, lo), hi)


def _private_size(epsilon: float, understated: bool = False, exact_size: bool = False) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> tuple[int, int]:
            preds, labels = _split(dataset)
            if understated:  # broken: the pair's sensitivity taken as 1, not 2
                e, n = DiscreteLaplaceMechanism(epsilon, 1, dimension=2, rng=rng).release(
                    [sum(p != y for p, y in dataset), len(dataset)]
                )
                return int(e), int(n)
            q = estimate_error(preds, labels, epsilon=epsilon, size_public=exact_size, rng=rng)
            size = q.size if exact_size else q.noisy_size  # broken: the true size published
            return q.noisy_errors, int(size or 0)

        return release

    return build


def quality_audit_spec() -> AuditSpec:
    """The size-private estimate: (noisy errors, noisy size) on an add/remove-one pair."""
    lo, hi = -_REACH, 4 + _REACH
    claimed = DiscreteLaplaceMechanism(EPSILON, 2, dimension=2).guarantee()

    def discretise(out: tuple[int, int]) -> Hashable:
        return _clip(out[0], lo, hi), _clip(out[1], lo, hi)

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        scale = 2 / EPSILON
        laws: list[dict[Hashable, float]] = []
        for dataset in _ADD_REMOVE_PAIR:
            e, n = sum(p != y for p, y in dataset), len(dataset)
            ev, nv = _dlap(scale, e, lo, hi), _dlap(scale, n, lo, hi)
            laws.append({(a, b): pa * pb for a, pa in ev.items() for b, pb in nv.items()})
        return laws[0], laws[1]

    return AuditSpec(
        name="quality",
        description=f"quality estimate, size private: (errors, size) + DLap(2/eps) each, eps={EPSILON}; "
        "pair: 3 correct vs 3 correct + 1 mistake",
        claimed=claimed,
        build=_private_size(EPSILON),
        pair=_ADD_REMOVE_PAIR,
        discretise=discretise,
        broken={
            "sensitivity_understated": _private_size(EPSILON, understated=True),
            "size_published_exactly": _private_size(EPSILON, exact_size=True),
        },
        samples=20_000,
        exact=exact,
    )


def _public_size(epsilon: float) -> MechanismFactory:
    def build(rng: RandomSource) -> Callable[[Any], Any]:
        def release(dataset: Any) -> int:
            preds, labels = _split(dataset)
            return estimate_error(preds, labels, epsilon=epsilon, size_public=True, rng=rng).noisy_errors

        return release

    return build


def quality_count_window_audit_spec() -> AuditSpec:
    """The size-public estimate (a count window): the noisy error count on a replace-one pair."""
    lo, hi = -_REACH, 1 + _REACH

    def exact() -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        scale = 1 / EPSILON
        laws: list[dict[Hashable, float]] = [
            {v: mass for v, mass in _dlap(scale, sum(p != y for p, y in d), lo, hi).items()}
            for d in _REPLACE_PAIR
        ]
        return laws[0], laws[1]

    return AuditSpec(
        name="quality-count-window",
        description=f"quality estimate, size public: errors + DLap(1/eps), eps={EPSILON}; "
        "pair: 4 correct vs 3 correct + 1 mistake",
        claimed=DiscreteLaplaceMechanism(EPSILON, 1).guarantee(),
        build=_public_size(EPSILON),
        pair=_REPLACE_PAIR,
        discretise=lambda out: _clip(out, lo, hi),
        broken={"noise_halved": _public_size(2 * EPSILON)},
        samples=20_000,
        exact=exact,
    )
