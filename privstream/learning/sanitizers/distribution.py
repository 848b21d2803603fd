"""The released object of a sanitizer: a synthetic distribution over domain blocks.

A :class:`SyntheticDistribution` on ``{0..N-1}`` is a partition of the domain into consecutive
blocks ``[e_j, e_{j+1})`` (``0 = e_0 < ... < e_k = N``) with a probability weight per block, spread
uniformly inside the block; the labelled variant (private query release over ``(x, y)``,
GGKM21 Definition 2.3) has one weight per block *and label*. The block boundaries are public: they
are the change points of queries the sanitizer has already released, or the leaves of a private
partition (never raw data points), so the release is compact (``O(#blocks)``) even on ``2^32`` or
``2^62`` domains (above 2^61 the edges are kept as exact Python ints instead of ``int64``).

Answers (GGKM21 ``Est``, Definition 2.3): ``answer(h) = Pr_{x~p}[h(x) = 1]`` (unlabelled) or
``Pr_{(x,y)~p}[h(x) = y]`` (labelled), computed exactly from the run-length form of ``h`` and the
piecewise-linear cumulative mass ``F(t) = Pr[x < t]``.

>>> d = SyntheticDistribution(8, (0, 4, 8), np.array([0.25, 0.75]))
>>> from privstream.learning.hypothesis_classes import threshold_hypothesis
>>> d.answer(threshold_hypothesis(8, 2))   # mass of x >= 2: half of block 0 plus block 1
0.875
>>> SyntheticDistribution.from_dict(d.to_dict()) == d
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import Any

import numpy as np

from privstream.learning.domain import INT64_MAX, json_int
from privstream.learning.errors import LearningInputError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_dict
from privstream.learning.randomness import RandomSource, resolve

__all__ = ["DistributionFormatError", "SyntheticDistribution"]

_SUM_TOLERANCE = 1e-9


class DistributionFormatError(LearningInputError):
    """A serialised synthetic distribution that is malformed, or a query on another domain."""


class SyntheticDistribution:
    """Weights over consecutive domain blocks (uniform inside a block); immutable.

    ``weights`` has shape ``(k,)`` (unlabelled) or ``(k, 2)`` (labelled: columns ``y = 0, 1``),
    non-negative, summing to 1.
    """

    __slots__ = ("_cum", "_edges_arr", "_lengths", "domain_size", "edges", "labelled", "weights")

    #: Largest domain kept in ``int64`` arithmetic (``t - edge`` and friends stay far from overflow).
    INT64_LIMIT = INT64_MAX // 4 + 1

    def __init__(self, domain_size: int, edges: Iterable[int], weights: np.ndarray) -> None:
        if type(domain_size) is not int or domain_size < 1:
            raise DistributionFormatError(f"domain size must be a positive int, got {domain_size!r}")
        e = tuple(int(v) for v in edges)
        if len(e) < 2 or e[0] != 0 or e[-1] != domain_size or any(a >= b for a, b in pairwise(e)):
            raise DistributionFormatError(f"block edges must increase strictly from 0 to {domain_size}")
        w = np.array(weights, dtype=np.float64)
        k = len(e) - 1
        if w.shape not in ((k,), (k, 2)):
            raise DistributionFormatError(
                f"{k} blocks need weights of shape ({k},) or ({k}, 2), not {w.shape}"
            )
        if not np.isfinite(w).all() or (w < 0).any():
            raise DistributionFormatError("weights must be finite and non-negative")
        total = float(w.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise DistributionFormatError(f"weights must sum to 1, got {total!r}")
        w.flags.writeable = False
        self.domain_size = domain_size
        self.edges = e
        self.weights = w
        self.labelled = w.ndim == 2
        self._edges_arr = np.array(e, dtype=np.int64 if domain_size <= self.INT64_LIMIT else object)
        self._lengths = np.diff(self._edges_arr).astype(np.float64)
        # cumulative mass below each edge, per label column for the labelled variant
        flat = w if w.ndim == 2 else w[:, None]
        self._cum = np.vstack([np.zeros((1, flat.shape[1])), np.cumsum(flat, axis=0)])

    # -- construction helpers ------------------------------------------------------------------

    @classmethod
    def uniform(cls, domain_size: int, labelled: bool = False) -> SyntheticDistribution:
        """One block holding all the mass (half per label when labelled): the MW starting point."""
        w = np.array([[0.5, 0.5]]) if labelled else np.array([1.0])
        return cls(domain_size, (0, domain_size), w)

    @property
    def num_blocks(self) -> int:
        return len(self.edges) - 1

    # -- answers -------------------------------------------------------------------------------

    def cdf(self, ts: np.ndarray) -> np.ndarray:
        """``F(t) = Pr[x < t]`` for integer ``t`` in ``[0, N]``; shape ``(len(ts), columns)``."""
        t = self._points(ts)
        j = np.clip(np.searchsorted(self._edges_arr, t, side="right") - 1, 0, self.num_blocks - 1)
        flat = self.weights if self.labelled else self.weights[:, None]
        frac = ((t - self._edges_arr[j]).astype(np.float64) / self._lengths[j])[:, None]
        cdf: np.ndarray = self._cum[j] + flat[j] * frac
        return cdf

    def _points(self, ts: object) -> np.ndarray:
        """Integer positions in the edges' dtype (exact Python ints above :attr:`INT64_LIMIT`)."""
        if self._edges_arr.dtype == object:
            return np.array([int(v) for v in np.asarray(ts, dtype=object).ravel()], dtype=object)
        return np.asarray(ts, dtype=np.int64)

    def _check_domain(self, h: Hypothesis) -> None:
        if h.domain_size != self.domain_size:
            raise DistributionFormatError(
                f"query on domain {h.domain_size} but the release is over domain {self.domain_size}"
            )

    def answer(self, h: Hypothesis | Mapping[str, Any]) -> float:
        """``Pr[h(x) = 1]``, or ``Pr[h(x) = y]`` for a labelled release."""
        if not isinstance(h, Hypothesis):
            h = hypothesis_from_dict(h)
        self._check_domain(h)
        first, changes = h.change_points()
        cuts = self._points([0, *changes, self.domain_size])
        mass = np.diff(self.cdf(cuts), axis=0)  # per run, per column
        ones = mass[(1 - first) :: 2]  # runs alternate, the first has value `first`
        if not self.labelled:
            return float(min(max(ones.sum(), 0.0), 1.0))
        # Pr[h = y] = Pr[y = 0] - Pr[h = 1, y = 0] + Pr[h = 1, y = 1]
        value = self._cum[-1, 0] - ones[:, 0].sum() + ones[:, 1].sum()
        return float(min(max(value, 0.0), 1.0))

    def density(self) -> np.ndarray:
        """Dense per-point probabilities, shape ``(N,)`` or ``(N, 2)`` (small domains only)."""
        if self.domain_size > 1 << 24:
            raise DistributionFormatError("density() is for small domains (at most 2^24 points)")
        reps = np.diff(self._edges_arr)
        per_point = self.weights / (self._lengths if not self.labelled else self._lengths[:, None])
        return np.repeat(per_point, reps, axis=0)

    # -- sampling (post-processing of a public release) -------------------------------------------

    def sample(self, n: int, rng: RandomSource | None = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """``n`` i.i.d. points (and labels when labelled) from the distribution.

        Synthetic draws are post-processing of the release, so their secrecy does not matter for
        privacy; numpy draws are seeded from ``rng`` (reproducible when ``rng`` is seeded).
        """
        if type(n) is not int or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        gen = np.random.default_rng(resolve(rng).getrandbits(128))
        flat = self.weights.reshape(-1)
        cells = gen.choice(flat.shape[0], size=n, p=flat / flat.sum())
        block = cells // 2 if self.labelled else cells
        lo = self._edges_arr[block]
        span = self._edges_arr[block + 1] - lo
        if self._edges_arr.dtype == object:  # exact ints: 64 random bits per draw, scaled into the span
            bits = gen.integers(0, 2**63, size=n, dtype=np.int64)
            xs = np.array(
                [a + (int(u) * int(w) >> 63) for a, u, w in zip(lo, bits, span, strict=True)], dtype=object
            )
        else:
            xs = lo + (gen.random(n) * span).astype(np.int64).clip(0, span - 1)
        if self.labelled:
            return xs, (cells % 2).astype(np.uint8)
        return xs

    # -- canonical JSON ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """``{"domain", "labelled", "edges": interior boundaries, "weights"}`` (JSON-able)."""
        return {
            "domain": self.domain_size,
            "labelled": self.labelled,
            "edges": list(self.edges[1:-1]),
            "weights": self.weights.tolist(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SyntheticDistribution:
        """Inverse of :meth:`to_dict`; raises :class:`DistributionFormatError` on malformed input."""
        try:
            n, labelled, inner, weights = d["domain"], d["labelled"], d["edges"], d["weights"]
        except (KeyError, TypeError) as exc:
            raise DistributionFormatError(f"malformed synthetic distribution: missing {exc}") from None
        # integers beyond 2^53 arrive as decimal strings (the public messages' number rule)
        inner = [json_int(v) for v in inner] if isinstance(inner, list) else [None]
        if any(v is None for v in inner):
            raise DistributionFormatError("edges must be a list of integers")
        if not isinstance(weights, list) or type(labelled) is not bool:
            raise DistributionFormatError("weights must be a list and labelled a boolean")
        try:
            w = np.array(weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise DistributionFormatError("weights must be numbers (number pairs when labelled)") from None
        if labelled != (w.ndim == 2):
            raise DistributionFormatError("labelled releases need a [w0, w1] pair per block")
        n = json_int(n)
        if n is None:
            raise DistributionFormatError(f"domain must be an int, got {d['domain']!r}")
        return cls(n, (0, *inner, n), w)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SyntheticDistribution)
            and self.domain_size == other.domain_size
            and self.edges == other.edges
            and self.weights.shape == other.weights.shape
            and bool(np.array_equal(self.weights, other.weights))
        )

    def __hash__(self) -> int:
        return hash((self.domain_size, self.edges, self.weights.tobytes()))

    def __repr__(self) -> str:
        kind = "labelled, " if self.labelled else ""
        return f"SyntheticDistribution(domain={self.domain_size}, {kind}{self.num_blocks} blocks)"
