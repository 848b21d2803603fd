"""Windows for private releases: deterministic ids and user-level contribution bounding.

Pure functions; the release agent applies them to what the state store holds.
"""

from __future__ import annotations

import math

import numpy as np

from privstream.agents.interfaces import WindowData


def count_window_index(seq: int, size: int) -> int:
    """The count window of the example with sequence number ``seq`` (0-based)."""
    return seq // size


def count_window_id(generation: str, index: int, size: int) -> str:
    """Deterministic id of a count window: a replay of the same examples gives the same id.

    >>> count_window_id("ab12", 3, 2000)
    'ab12-c2000-3'
    """
    return f"{generation}-c{size}-{index}"


def time_window_index(moment: float, seconds: float) -> int:
    """The time window ``[k*seconds, (k+1)*seconds)`` holding ``moment`` (Unix seconds)."""
    return math.floor(moment / seconds)


def time_window_id(index: int, seconds: float) -> str:
    """Deterministic id of a time window; independent of the store (time itself names it).

    >>> time_window_id(5, 60.0)
    't60-5'
    """
    return f"t{seconds:g}-{index}"


def bound_contributions(window: WindowData, bound: int) -> WindowData:
    """Keep each user's first ``bound`` examples of the window (in arrival order).

    This is what makes user-level privacy hold: a user changes at most ``bound`` examples of
    the learner's input. Deterministic (by sequence number), so a replay keeps the same ones.
    Every example of a user-level stream carries a user id: validation rejects those without.
    """
    if bound < 1:
        raise ValueError(f"the contribution bound must be >= 1, got {bound}")
    order = np.argsort(window.seqs, kind="stable")
    kept: list[int] = []
    seen: dict[object, int] = {}
    for i in order.tolist():
        user = window.users[i]
        count = seen.get(user, 0)
        if count < bound:
            seen[user] = count + 1
            kept.append(i)
    idx = np.array(sorted(kept, key=lambda i: window.seqs[i]), dtype=np.int64)
    return WindowData(window.xs[idx], window.ys[idx], window.users[idx], window.seqs[idx])


def user_level_parameters(epsilon: float, delta: float, bound: int) -> tuple[float, float]:
    """Per-example (ε', δ') that give (ε, δ) at the user level when a user has ``bound`` examples.

    Group privacy: an (ε', δ')-DP mechanism is (kε', k·e^{(k-1)ε'}·δ')-DP for groups of k
    neighbouring changes (Dwork & Roth, Thm 2.2 and its approximate form). With ε' = ε/k and
    δ' = δ / (k·e^{(k-1)ε/k}), the group guarantee is exactly (ε, δ).

    >>> user_level_parameters(1.0, 0.0, 4)
    (0.25, 0.0)
    """
    k = bound
    return epsilon / k, delta / (k * math.exp((k - 1) * epsilon / k))
