"""Windows and the release tree's nodes: deterministic ids, ranges, and user-level bounding.

Vocabulary. A *window* is level 0 of the release tree: ``size`` consecutive
examples (count windows) or ``seconds`` of time (time windows), window index ``w`` absolute so ids
are deterministic. A *node* ``(j, m)`` of level ``j`` covers the aligned level-0 windows
``[m·2^j, (m+1)·2^j)``; node ``(0, w)`` is window ``w``. Each window lies in exactly one node per
level, so an example's lifetime cost is the sum over the levels of one release's ε each (parallel
composition within a level, sequential over the levels).

Pure functions; the release agent applies them to what the state store holds.
"""

from __future__ import annotations

import math

import numpy as np

from privstream.agents.fits import prepared_input
from privstream.agents.interfaces import NodeBounds, NodeData, WindowData
from privstream.learning.randomness import RandomSource


def count_window_index(seq: int, size: int) -> int:
    """The count window of the example with sequence number ``seq`` (0-based)."""
    return seq // size


def count_family(generation: str, size: int) -> str:
    """The family of a stream's count windows: the store's generation and the size.

    >>> count_family("ab12", 2000)
    'ab12-c2000'
    """
    return f"{generation}-c{size}"


def time_family(seconds: float) -> str:
    """The family of time windows of this length (time itself names them: no generation).

    >>> time_family(60.0)
    't60'
    """
    return f"t{seconds:g}"


def node_id(family: str, level: int, index: int) -> str:
    """Deterministic id of node ``(level, index)``: a replay gives the same id.

    >>> node_id("t60", 3, 5)
    't60-L3-5'
    """
    return f"{family}-L{level}-{index}"


def node_windows(level: int, index: int) -> range:
    """The level-0 windows node ``(level, index)`` covers.

    >>> node_windows(2, 3)
    range(12, 16)
    """
    return range(index << level, (index + 1) << level)


def completed_nodes(window: int, top_level: int) -> list[tuple[int, int]]:
    """The nodes of levels 1..``top_level`` that window ``window`` completes (it is their last window).

    >>> completed_nodes(7, 4)
    [(1, 3), (2, 1), (3, 0)]
    >>> completed_nodes(4, 4)
    []
    """
    return [(j, ((window + 1) >> j) - 1) for j in range(1, top_level + 1) if (window + 1) % (1 << j) == 0]


def count_window_id(generation: str, index: int, size: int) -> str:
    """Deterministic id of a count window (node ``(0, index)``).

    >>> count_window_id("ab12", 3, 2000)
    'ab12-c2000-L0-3'
    """
    return node_id(count_family(generation, size), 0, index)


def time_window_index(moment: float, seconds: float) -> int:
    """The time window ``[k*seconds, (k+1)*seconds)`` holding ``moment`` (Unix seconds)."""
    return math.floor(moment / seconds)


def node_examples(node: NodeData) -> WindowData:
    """A node's compact data as the learner's input: a histogram expanded exactly (each (x, y) row
    repeated by its count, in the histogram's sorted order), user rows and vectors as stored (in
    arrival order). Sequence numbers are the rows' positions (the order the node keeps).

    >>> node = NodeData.from_rows(np.array([5, 3, 5]), np.array([1, 0, 1]), None, NodeBounds())
    >>> node_examples(node).xs, node_examples(node).ys
    (array([3, 5, 5]), array([0, 1, 1], dtype=uint8))
    """
    xs, ys = node.examples()
    n = len(ys)
    users = node.users.astype(object) if node.users is not None else np.full(n, None, dtype=object)
    return WindowData(xs, ys, users, np.arange(n, dtype=np.int64))


def learner_input(xs: np.ndarray, ys: np.ndarray, order: RandomSource) -> tuple[np.ndarray, np.ndarray]:
    """What the release agent gives a learner of an integer class for these examples: their
    histogram node expanded, in the random order drawn from ``order`` (the offline CLI uses it so
    that its release equals the service's for the same seed).

    A histogram node is expanded in sorted order, where a neighbour's sequence is shifted rather
    than changed in one position. A uniformly random order makes the learner's input a uniformly
    random permutation of the node's multiset: neighbouring multisets couple to sequences that
    differ in one position (replace-one) or by one insertion (add/remove), so any learner that is
    DP on sequences stays DP, whatever its output's dependence on order.

    >>> from privstream.learning.randomness import seeded
    >>> xs, ys = learner_input(np.array([3, 1, 3]), np.array([1, 0, 1]), seeded(0))
    >>> sorted(zip(xs.tolist(), ys.tolist()))
    [(1, 0), (3, 1), (3, 1)]
    """
    data = node_examples(NodeData.from_rows(xs, ys, None, NodeBounds()))
    return prepared_input(data.xs, data.ys, order, None)


def bound_contributions(window: WindowData, bound: int) -> WindowData:
    """Keep each user's first ``bound`` examples of the window or node (in arrival order).

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
