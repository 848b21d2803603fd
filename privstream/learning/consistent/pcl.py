"""PCL: the pure ε-DP universally Bayes-consistent classifier on a public box ([B Alg 2, Thm 1.5, 3.1, 3.2]).

**Rule.** Cut the public box into ``K = ⌈n^{1/(2d)}⌉`` cubes per axis (:mod:`.grid`, r = n^{-1/(2d)}).
In each cube κ let ``v_κ = #{i : x_i ∈ κ, y_i = 1} - #{i : x_i ∈ κ, y_i = 0}`` (= 2·Σ(y_i - ½), the
paper's vote; an empty cube has v = 0) and release the label

    h(κ) = b_κ   with probability e^{-ε|v_κ|/2},   else  1[v_κ > 0],          (b_κ a fair coin)

so ``Pr[h(κ) = 1] = 1 - ½e^{-ε v/2}`` for v >= 0 and ``½e^{ε v/2}`` for v <= 0. That is *exactly* the
law of the paper's ``1[Σ_{x_i∈κ}(y_i - ½) + Lap(1/ε) > 0]`` (exact privacy,
p(s) with s = v/2), sampled without any floating point: the coin is a fair random bit and the
Bernoulli(e^{-ε|v|/2}) is :meth:`RandomSource.bernoulli_exp` (CKS20 Alg. 1) on rational ε|v|/2.
Unlabelled rows (y = -1 or NaN) do not vote.

**Privacy (ε-DP, replace-one, n public).** K depends only on (n, d) and the public bounds; points
outside the bounds are clipped by a fixed per-row map. Cells are independent. ``p(v)`` and
``1 - p(v)`` are ``Pr[s + L ∈ A]`` for the Laplace mechanism
on ``s = v/2`` with ``L ~ Lap(1/ε)`` (A = (0, ∞) or its complement), so changing v by k changes
each by a factor at most ``e^{ε|k|/2}`` (Laplace density ratio; [B Thm 2.3]). A replacement
changes ``Σ_κ |Δv_κ| <= 2`` (one label flip moves one vote by 2; a move between cubes moves two
votes by 1). Multiplying over the changed cells, every
released table has probability within ``e^{ε·2/2} = e^ε`` on neighbours [B Thm 3.1]. Tight pair:
one cube with labels {1, 0} (v = 0) vs {0, 0} (v = -2): ``Pr[h = 1] = ½`` vs ``½e^{-ε}``.

**Where the noise comes from: information-theoretic by default.** The release is the label table
of *all* K^d cubes (see below), so the production learner (:class:`BayesConsistentLearner`,
``randomness="direct"``) simply draws every cube's coin and every occupied cube's Bernoulli from
the :class:`RandomSource` itself (:func:`label_table`): the guarantee is then information-theoretic,
like every other mechanism here (given ideal randomness from the source), and the certificate
says ``privacy: information-theoretic``. The keyed-PRF path below (``randomness="prf"``,
:func:`pcl_fit`) exists for one thing the dense table cannot do: a trusted-zone predictor
(:class:`CellLabels`) on grids far too large to materialise, whose empty cubes are computed on
demand and still agree with each other. Its privacy also rests on HMAC-SHA256 being a PRF, so a
release made that way says ``privacy: computational``.

**The PRF path, and why the key stays secret.** The noise of *every* cube (empty ones
included) comes from a keyed PRF (:mod:`.prf`, key from the secure source, one per release):
``b_κ`` is the cube's coin and the Bernoulli draw uses the cube's own stream. Empty cubes cost
nothing at fit time and are computed on demand, equal to a dense implementation with the same
key (:func:`dense_labels`). The *key is never released*: with it, b_κ and the Bernoulli draw of
each occupied cube are known, ``h(κ)`` becomes a deterministic function of v_κ and the privacy
is gone (e.g. v = 0 gives h = b_κ surely, v = 2 with b_κ = 0 gives h = 1 with prob. 1 - e^{-ε}).
Nor may the release list "the occupied cubes": that set is data-dependent and not private. The
public release (:class:`GridLabelModel`) is therefore the label table of **all** K^d cubes (packed
bits): a function of the ε-DP output h only, so any use of it is post-processing. Empty cubes are
fair coins, which cannot be compressed, so the release holds K^d bits (≈ √n for small d; for
large d the ceiling K >= 2 makes it 2^d and :class:`BayesConsistentLearner` refuses beyond
``max_cells``). The trusted-zone object :class:`CellLabels` holds the key and predicts lazily
anywhere; its answers are values of the same h.

**Add/remove-one neighbours** (``expected_size=m``, n private): the schedule K(n) would reveal n
(K^d is the size of the released table), so K = ⌈m^{1/(2d)}⌉ (or the public ``cells_per_axis``).
Then one row's arrival or departure moves one vote by 1 and changes nothing else, so the release
is ε/2-DP by the same argument; we report ε (the noise is not recalibrated to 2ε, so the same
table is also ε-DP under replace-one and one calibration serves both relations). Every reported
field (K, the table's size, the expected points per cube) is a function of (m, d, bounds, ε).

Universal consistency [B Thm 3.2] holds as n → ∞ for every distribution on the box; there is no
rate, and large d is statistically hopeless at practical n.

>>> import numpy as np
>>> from privstream.learning.randomness import seeded
>>> X = np.array([[0.1], [0.2], [0.7], [0.8]]); y = np.array([1, 1, 0, 0], dtype=np.uint8)
>>> res = BayesConsistentLearner().fit(X, y, epsilon=1.0, bounds=[[0, 1]], rng=seeded(0))
>>> res.epsilon, res.delta, res.model.grid.k
(1.0, 0.0, 2)
>>> res.model.predict(np.array([[0.05], [0.95]])).dtype
dtype('uint8')
>>> empty = BayesConsistentLearner().fit([], [], epsilon=1.0, bounds=[[0, 1]], rng=seeded(0),
...                                     expected_size=100)
>>> empty.model.grid.k, empty.neighbouring_relation, empty.privacy
(10, 'add-remove-one', 'information-theoretic')
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privstream.learning.consistent.grid import CubeGrid, cells_per_axis
from privstream.learning.consistent.prf import CellStream, coin_bits, coin_table, new_key
from privstream.learning.errors import HypothesisFormatError, LearningInputError
from privstream.learning.parameters import Range
from privstream.learning.private_learners.base import check_expected_size, neighbouring_relation
from privstream.learning.private_learners.vector_base import (
    VectorLearnerResult,
    check_bounds,
    check_features,
    finite_epsilon,
    split_labels,
)
from privstream.learning.randomness import RandomSource, resolve

__all__ = [
    "DEFAULT_MAX_CELLS",
    "MECHANISM",
    "BayesConsistentLearner",
    "CellLabels",
    "GridLabelModel",
    "ReleaseTooLargeError",
    "cell_label",
    "cell_votes",
    "dense_labels",
    "histogram_rule",
    "label_probability",
    "label_table",
    "pcl_fit",
]

MECHANISM = "pcl"
#: Largest released table (cells); 2^22 cells = 512 KiB of packed bits.
DEFAULT_MAX_CELLS = 2**22


class ReleaseTooLargeError(LearningInputError):
    """The dense label table of K^d cubes would exceed ``max_cells``."""


def label_probability(v: int, epsilon: float) -> float:
    """Exact ``Pr[h(κ) = 1]`` for a cube with vote ``v`` (float evaluation of the closed form)."""
    if v >= 0:
        return 1.0 - 0.5 * math.exp(-epsilon * v / 2)
    return 0.5 * math.exp(epsilon * v / 2)


def cell_label(v: int, epsilon: Fraction, stream: RandomSource, coin: int) -> int:
    """The label of one cube: ``coin`` w.p. e^{-ε|v|/2} (exact, from ``stream``), else ``1[v > 0]``."""
    if v == 0:  # e^0 = 1: the coin, whatever the stream (bernoulli_exp(0) consumes no bits)
        return int(coin)
    keep_coin = stream.bernoulli_exp(Fraction(epsilon) * abs(v) / 2)
    return int(coin) if keep_coin else int(v > 0)


def label_table(
    num_cells: int, ids: Iterable[int], votes: Iterable[int], epsilon: float, rng: RandomSource
) -> np.ndarray:
    """Every cell's label with fresh randomness from ``rng`` (no PRF): information-theoretic.

    ``num_cells`` fair coins first (all cells, so an empty cell is a coin), then each listed cell's
    Bernoulli(e^{-ε|v|/2}) draw; the draws are independent whatever order they are taken in.
    """
    num_bytes = -(-int(num_cells) // 8)
    raw = rng.getrandbits(8 * num_bytes).to_bytes(num_bytes, "little")
    table = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[: int(num_cells)].copy()
    eps_q = Fraction(epsilon)
    for c, v in zip(ids, votes, strict=True):
        table[c] = cell_label(int(v), eps_q, rng, int(table[c]))
    return table


def cell_votes(grid: CubeGrid, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(occupied cell ids, votes #1 - #0)``, ids sorted (a data-independent order)."""
    ids = grid.cell_ids(X)
    uniq, inverse = np.unique(ids, return_inverse=True)
    signed = 2.0 * y.astype(np.float64) - 1.0
    votes = np.bincount(inverse.reshape(-1), weights=signed, minlength=uniq.shape[0])
    return uniq, np.rint(votes).astype(np.int64)


class GridLabelModel:
    """The public release of PCL: the label of every cube of a public grid (a function of h only).

    ``predict`` clips queries to the bounds (post-processing; any rule would do).
    """

    kind = "grid-labels"

    def __init__(self, grid: CubeGrid, labels: np.ndarray) -> None:
        labels = np.asarray(labels, dtype=np.uint8)
        if labels.shape != (grid.num_cells,) or (labels.size and labels.max() > 1):
            raise HypothesisFormatError(f"need {grid.num_cells} labels in {{0, 1}}")
        self.grid = grid
        self.labels = labels

    def predict(self, X: np.ndarray) -> np.ndarray:
        arr = check_features(X, self.grid.bounds)
        labels: np.ndarray = self.labels[self.grid.cell_ids(arr)]
        return labels

    def to_dict(self) -> dict[str, Any]:
        packed = np.packbits(self.labels, bitorder="little").tobytes()
        return {
            "kind": self.kind,
            "bounds": self.grid.bounds.tolist(),
            "cells_per_axis": self.grid.k,
            "labels": base64.b64encode(packed).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GridLabelModel:
        try:
            if d["kind"] != cls.kind:
                raise HypothesisFormatError(f"not a {cls.kind} model")
            grid = CubeGrid(d["bounds"], d["cells_per_axis"])
            raw = base64.b64decode(d["labels"], validate=True)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            if isinstance(exc, HypothesisFormatError):
                raise
            raise HypothesisFormatError(f"malformed {cls.kind} model: {exc}") from None
        if len(raw) != -(-grid.num_cells // 8):
            raise HypothesisFormatError(f"{len(raw)} label bytes for {grid.num_cells} cells")
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
        if bits[grid.num_cells :].any():
            raise HypothesisFormatError("non-canonical label table (padding bits set)")
        return cls(grid, bits[: grid.num_cells])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GridLabelModel) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.to_dict()["labels"])


class CellLabels:
    """Trusted-zone PCL predictor: secret key + labels of occupied cubes; empty cubes lazily.

    Every answer is a value of the released ε-DP table h; never serialise the key
    (:meth:`release` gives the public form).
    """

    def __init__(self, grid: CubeGrid, key: bytes, epsilon: float, occupied: dict[int, int]) -> None:
        self.grid = grid
        self.epsilon = epsilon
        self._key = key
        self._occupied = occupied  # cell id -> label, computed once at fit time

    def predict(self, X: np.ndarray) -> np.ndarray:
        arr = check_features(X, self.grid.bounds)
        ids = self.grid.cell_ids(arr)
        out = coin_bits(self._key, ids)
        for i, c in enumerate(ids.tolist()):
            label = self._occupied.get(c)
            if label is not None:
                out[i] = label
        return out

    def table(self) -> np.ndarray:
        """Labels of all K^d cubes (dense; for the release and for tests)."""
        labels = coin_table(self._key, int(self.grid.num_cells))
        for c, label in self._occupied.items():
            labels[c] = label
        return labels

    def release(self, max_cells: int = DEFAULT_MAX_CELLS) -> GridLabelModel:
        if self.grid.num_cells > max_cells:
            raise ReleaseTooLargeError(
                f"the released table would have K^d = {self.grid.k}^{self.grid.d} = {self.grid.num_cells} "
                f"cells (> max_cells = {max_cells}); PCL must release every cube's label (see "
                f"privstream.learning.consistent.pcl). Use fewer features or raise max_cells"
            )
        return GridLabelModel(self.grid, self.table())


def _grid_votes(
    X: object, y: object, bounds: object, k: int | None, expected_size: int | None
) -> tuple[CubeGrid, np.ndarray, np.ndarray]:
    """The public grid (K from ``k``, else from m or n) and the occupied cubes' votes.

    Unlabelled rows do not vote (a row turning unlabelled moves one vote by 1: covered by the
    privacy argument), so no label pattern can make a fit fail.
    """
    b = check_bounds(bounds)
    arr = check_features(X, b)
    size = arr.shape[0] if expected_size is None else expected_size
    grid = CubeGrid(b, cells_per_axis(max(size, 1), b.shape[0]) if k is None else k)
    labels, labelled = split_labels(y, arr.shape[0])
    ids, votes = cell_votes(grid, arr[labelled], labels[labelled])
    return grid, ids, votes


def pcl_fit(
    X: object,
    y: object,
    *,
    epsilon: float,
    bounds: object,
    rng: RandomSource | None = None,
    cells_per_axis: int | None = None,
    expected_size: int | None = None,
) -> CellLabels:
    """Fit PCL with PRF noise (ε-DP, *computational*): the lazy trusted-zone predictor.

    ``cells_per_axis`` overrides the paper's schedule; ``expected_size`` sets it when n is private.
    """
    eps = finite_epsilon(epsilon)
    grid, ids, votes = _grid_votes(X, y, bounds, cells_per_axis, check_expected_size(expected_size))
    key = new_key(resolve(rng))
    coins = coin_bits(key, ids)
    eps_q = Fraction(eps)
    occupied = {
        int(c): cell_label(int(v), eps_q, CellStream(key, int(c)), int(b))
        for c, v, b in zip(ids.tolist(), votes.tolist(), coins.tolist(), strict=True)
    }
    return CellLabels(grid, key, eps, occupied)


def dense_labels(grid: CubeGrid, key: bytes, epsilon: float, votes: Mapping[int, int]) -> np.ndarray:
    """Reference: every cube's label computed the same way, empty cubes included (v = 0)."""
    eps_q = Fraction(epsilon)
    ids = np.arange(int(grid.num_cells), dtype=np.int64)
    coins = coin_bits(key, ids)
    return np.array(
        [
            cell_label(int(votes.get(c, 0)), eps_q, CellStream(key, c), int(coins[c]))
            for c in range(int(grid.num_cells))
        ],
        dtype=np.uint8,
    )


def histogram_rule(
    X: object, y: object, *, bounds: object, cells_per_axis: int | None = None
) -> GridLabelModel:
    """The classical NON-PRIVATE histogram rule on the same grid: ``1[v_κ > 0]`` (empty cubes: 0).

    A baseline for benchmarks and tests, never a release.
    """
    grid, ids, votes = _grid_votes(X, y, bounds, cells_per_axis, None)
    table = np.zeros(int(grid.num_cells), dtype=np.uint8)
    table[ids.astype(np.int64)] = (votes > 0).astype(np.uint8)
    return GridLabelModel(grid, table)


class BayesConsistentLearner:
    """PCL behind the :class:`~privstream.learning.private_learners.vector_base.VectorLearner` interface.

    Pure ε-DP (``delta`` is accepted and ignored: the release reports δ = 0). ``randomness``:
    ``"direct"`` (default; information-theoretic) or ``"prf"`` (the keyed PRF of :func:`pcl_fit`;
    computational). ``cells_per_axis`` replaces the schedule in n (or m) by a public K.
    """

    name = "bayes-consistent"
    parameter_ranges: ClassVar[dict[str, Range]] = {
        "max_cells": Range(low=1, integer=True),
        "cells_per_axis": Range(low=1, integer=True, optional=True),
    }

    def __init__(
        self,
        *,
        max_cells: int = DEFAULT_MAX_CELLS,
        cells_per_axis: int | None = None,
        randomness: str = "direct",
    ) -> None:
        if randomness not in ("direct", "prf"):
            raise ValueError(f"randomness must be 'direct' or 'prf', got {randomness!r}")
        self.max_cells = int(max_cells)
        self.cells_per_axis = cells_per_axis
        self.randomness = randomness

    def configuration_error(self, *, features: int, sizes: list[int], delta: float) -> str | None:
        """Refused where some node's grid would pass ``max_cells`` (every cube's label is released)."""
        del delta  # pure ε-DP: any δ is fine
        for size in sorted(sizes):
            k = cells_per_axis(max(size, 1), features) if self.cells_per_axis is None else self.cells_per_axis
            if k**features > self.max_cells:
                return (
                    f"{self.name} on {features} features needs K^d = {k}^{features} cubes at a node of "
                    f"{size} examples, more than max_cells = {self.max_cells} (every cube's label is "
                    f"released): use fewer features or another learner (halfspaces, kernel)"
                )
        return None

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        epsilon: float,
        delta: float = 0.0,
        bounds: np.ndarray,
        rng: RandomSource | None = None,
        expected_size: int | None = None,
    ) -> VectorLearnerResult:
        eps = finite_epsilon(epsilon)
        b = check_bounds(bounds)
        m = check_expected_size(expected_size)
        d = b.shape[0]
        n = int(check_features(X, b).shape[0])
        size = n if m is None else m  # the public size the schedule may use
        k = cells_per_axis(max(size, 1), d) if self.cells_per_axis is None else self.cells_per_axis
        if k**d > self.max_cells:  # refuse before touching the data (a function of the public size)
            raise ReleaseTooLargeError(
                f"PCL on d = {d} features with {'n' if m is None else 'expected_size'} = {size} needs "
                f"K^d = {k}^{d} cubes (> max_cells = {self.max_cells}); every cube's label must be released"
            )
        if self.randomness == "prf":
            model = pcl_fit(X, y, epsilon=eps, bounds=b, rng=rng, cells_per_axis=k).release(self.max_cells)
        else:
            grid, ids, votes = _grid_votes(X, y, b, k, None)
            model = GridLabelModel(
                grid, label_table(grid.num_cells, ids.tolist(), votes.tolist(), eps, resolve(rng))
            )
        parameters: dict[str, Any] = {
            "cells_per_axis": k,
            "schedule": "paper" if self.cells_per_axis is None else "override",
            "resolution": 1.0 / k,
            "out_of_bounds": "clip",
            "bounds": b.tolist(),
            "noise": "exact per-cube Laplace(1/eps) vote law, "
            + ("keyed PRF (HMAC-SHA256)" if self.randomness == "prf" else "drawn from the random source"),
            "cells": int(k**d),
            "expected_points_per_cell": size / k**d,
        }
        if m is not None:
            parameters["expected_size"] = m
        relation = neighbouring_relation(m)
        return VectorLearnerResult(
            model=model,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=0.0,
            proper=False,
            sample_size=n,
            parameters=parameters,
            theorem="[B Alg 2; Thm 3.1 (privacy), Thm 3.2 (universal consistency)]",
            guarantee=f"pure eps-DP ({relation}); universally Bayes consistent as n grows, no rate",
            theorem_sample_size=None,
            accuracy_guarantee_holds=None,
            neighbouring_relation=relation,
            privacy="computational" if self.randomness == "prf" else "information-theoretic",
        )
