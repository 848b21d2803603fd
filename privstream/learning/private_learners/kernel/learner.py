"""The vector learner ``"kernel"``: a Gaussian-kernel rule from noisy class mean embeddings, (ε, δ)-DP.

**Rule.** Features are mapped to the unit box with the *public* bounds, ``u = (x - lo)/(hi - lo)``
clipped to ``[0, 1]^d``. The released rule (:class:`~.rule.KernelModel`) is ``1[⟨v, φ(u)⟩ >= b]``
with ``φ`` the random Fourier features of the Gaussian kernel ``exp(-‖u - u'‖²/h²)``
(:mod:`.features`, ``frequencies`` of them, a public seed). ``v`` is the privatised difference of
the two classes' kernel mean embeddings, so ``⟨v, φ(u)⟩`` compares how close ``u`` is, on average,
to each class: a smooth nearest-class rule that is not linear in ``u`` and needs no search over
hypotheses. Noise is added once, to a sum in which every row is a vector of norm at most 1, so
its effect on a score does not grow with d or with the number of features.

**Mechanism** (:mod:`.steps`): four private steps, each using only public figures and the
earlier steps' outputs.

1. the rows' spread (two Gaussian releases, ρ/50 and ρ/25; skipped when ``bandwidth`` is given):
   the mean squared distance ``m₂`` between two rows sets the bandwidth,
   ``h² = relative_bandwidth · m₂`` (the mean-distance heuristic, made private);
2. the label counts (Gaussian, ρ/25): the class weights;
3. the class-weighted feature sum (Gaussian, the rest of ρ): ``v̂``;
4. the offset (exponential mechanism over 257 offsets on a public grid scaled by ``‖v̂‖``,
   ``ε_o = √(8ρ/20)``): the number of training errors of each offset, sensitivity 1.

**Privacy** (:mod:`.budget`): the steps are ρ_m + ρ_s-, ρ_c-, ρ_d- and ``ε_o²/8``-zCDP under the
release's relation (replace-one when n is public, add/remove-one with ``expected_size``); zCDP
composes by adding, and ρ is the largest budget whose Rényi conversion at δ is at most ε. So the
release is (ε, δ)-DP. δ must be in (0, 1). The model is post-processing of the steps' outputs;
the certificate reports only public figures (the bandwidth, when estimated, is a DP output).

**Accuracy.** There is no finite-sample theorem relative to a fixed class
(``theorem_sample_size = None``). Given ``v̂``, the offset's exponential mechanism has at most
``2 ln(257/β)/ε_o`` more training errors than the best offset of the grid with probability
``>= 1 - β``. On 64 image features (scikit-learn's digits, digit ≥ 5, n = 1,437) at (1, 10⁻⁶) its
test accuracy is about 0.89, that of non-private logistic regression (the measured figures are
in ``benchmarks/bench_real_data.py``).

>>> from privstream.learning.randomness import seeded
>>> gen = np.random.default_rng(0)
>>> X = gen.random((3000, 2)); y = ((X[:, 0] - 0.5) ** 2 + (X[:, 1] - 0.5) ** 2 < 0.1).astype(np.uint8)
>>> learner = KernelLearner(frequencies=256)
>>> res = learner.fit(X, y, epsilon=1.0, delta=1e-6, bounds=[[0, 1], [0, 1]], rng=seeded(1))
>>> res.delta, res.parameters["features"], res.model.kind
(1e-06, 512, 'random-features')
>>> test = gen.random((5000, 2)); truth = ((test[:, 0] - 0.5) ** 2 + (test[:, 1] - 0.5) ** 2 < 0.1)
>>> float(np.mean(res.model.predict(test) == truth)) > 0.9   # a disc: no halfspace gets above 0.69
True
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privstream.learning.errors import LearningInputError
from privstream.learning.parameters import Range
from privstream.learning.private_learners.base import check_expected_size, neighbouring_relation
from privstream.learning.private_learners.kernel.budget import (
    COUNTS_SHARE,
    MEAN_SHARE,
    OFFSET_SHARE,
    SPREAD_SHARE,
    split_budget,
)
from privstream.learning.private_learners.kernel.features import FEATURE_SEED, MAX_FREQUENCIES, RandomFeatures
from privstream.learning.private_learners.kernel.rule import KernelModel
from privstream.learning.private_learners.kernel.steps import (
    OFFSETS,
    choose_offset,
    class_weights,
    counts_sensitivity,
    direction_sensitivity,
    mean_sensitivity,
    noise_sd,
    offset_errors,
    private_counts,
    private_direction,
    private_spread,
)
from privstream.learning.private_learners.vector_base import (
    VectorLearnerResult,
    check_bounds,
    check_features,
    finite_epsilon,
    split_labels,
)
from privstream.learning.randomness import RandomSource, resolve

__all__ = ["DEFAULT_FREQUENCIES", "DEFAULT_RELATIVE_BANDWIDTH", "MECHANISM", "KernelLearner", "KernelModel"]

MECHANISM = "kernel-mean-embedding-gaussian"
DEFAULT_FREQUENCIES = 1024
#: h² as a multiple of the mean squared distance between two rows.
DEFAULT_RELATIVE_BANDWIDTH = 0.5


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


class KernelLearner:
    """The kernel learner as a :class:`~privstream.learning.private_learners.vector_base.VectorLearner`
    (see the module docstring). ``frequencies``: D (the rule has 2D weights); ``relative_bandwidth``:
    h² over the private mean squared distance between rows; ``bandwidth``: a public h on the unit
    box instead (then the spread is not estimated and its budget goes to the feature sum)."""

    parameter_ranges: ClassVar[dict[str, Range]] = {
        "frequencies": Range(1, MAX_FREQUENCIES, integer=True),
        "relative_bandwidth": Range(low=0, low_open=True),
        "bandwidth": Range(low=0, low_open=True, optional=True),
    }

    name = "kernel"

    def __init__(
        self,
        *,
        frequencies: int = DEFAULT_FREQUENCIES,
        relative_bandwidth: float = DEFAULT_RELATIVE_BANDWIDTH,
        bandwidth: float | None = None,
    ) -> None:
        if isinstance(frequencies, bool) or not isinstance(frequencies, int):
            raise ValueError(f"frequencies must be an int in [1, {MAX_FREQUENCIES}], got {frequencies!r}")
        if not 1 <= frequencies <= MAX_FREQUENCIES:
            raise ValueError(f"frequencies must be an int in [1, {MAX_FREQUENCIES}], got {frequencies!r}")
        self.frequencies = frequencies
        self.relative_bandwidth = _positive("relative_bandwidth", relative_bandwidth)
        self.bandwidth = None if bandwidth is None else _positive("bandwidth", bandwidth)

    def configuration_error(self, *, features: int, sizes: list[int], delta: float) -> str | None:
        """Refused without a δ in (0, 1): the learner is (ε, δ)-DP."""
        del features, sizes
        if not 0 < delta < 1:
            return f"the kernel learner is (ε, δ)-DP: set release.delta in (0, 1) (e.g. 1e-6), got {delta:g}"
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
        if not 0 < float(delta) < 1:
            raise LearningInputError(f"the kernel learner needs 0 < delta < 1 (e.g. 1e-6), got {delta!r}")
        dlt = float(delta)
        m = check_expected_size(expected_size)
        relation = neighbouring_relation(m)
        b = check_bounds(bounds)
        arr = check_features(X, b)
        n, d = arr.shape
        labels, labelled = split_labels(y, n)
        lo, hi = b[:, 0], b[:, 1]
        U = (arr - lo) / (hi - lo)
        src = resolve(rng)
        budget = split_budget(eps, dlt, public_bandwidth=self.bandwidth is not None)
        if self.bandwidth is None:
            spread = private_spread(U, budget.mean, budget.spread, relation, src)
            bandwidth = math.sqrt(self.relative_bandwidth * spread)
        else:
            bandwidth = self.bandwidth
        weights = class_weights(private_counts(labels, labelled, budget.counts, relation, src))
        features = RandomFeatures(d, self.frequencies, bandwidth)
        U_l, y_l = U[labelled], labels[labelled]
        v = private_direction(features, U_l, y_l, weights, budget.direction, relation, src)
        scale = float(np.linalg.norm(v)) or 1.0  # zero only if the noise cancels v exactly
        scores = features.scores(U_l, v)
        chosen = choose_offset(offset_errors(scores / scale, y_l), budget.offset_epsilon, src)
        offset = scale * float(OFFSETS[chosen])
        model = KernelModel(b, bandwidth=bandwidth, frequencies=self.frequencies, weights=v, offset=offset)
        parameters: dict[str, Any] = {
            "hypothesis_class": "random-features",
            "kernel": "gaussian exp(-|u - u'|^2 / h^2) on the unit box",
            "bandwidth_rule": (
                "h^2 = relative_bandwidth x private mean squared distance between rows"
                if self.bandwidth is None
                else "public"
            ),
            "frequencies": self.frequencies,
            "features": features.size,
            "feature_seed": FEATURE_SEED,
            "relative_bandwidth": self.relative_bandwidth,
            "offsets": int(OFFSETS.shape[0]),
            "rho": budget.total,
            "rho_mean": budget.mean,
            "rho_spread": budget.spread,
            "rho_counts": budget.counts,
            "rho_direction": budget.direction,
            "epsilon_offset": budget.offset_epsilon,
            "budget_shares": (
                f"mean {MEAN_SHARE}, spread {SPREAD_SHARE} (none with a public bandwidth), "
                f"counts {COUNTS_SHARE}, offset {OFFSET_SHARE}, direction the rest"
            ),
            "noise_sd_counts": noise_sd(budget.counts, counts_sensitivity(relation), 2),
            "noise_sd_direction": noise_sd(budget.direction, direction_sensitivity(relation), features.size),
            "conversion": "zCDP composition; Renyi conversion at delta (Canonne-Kamath-Steinke 2020)",
            "bounds": b.tolist(),
            "out_of_bounds": "clip",
            "score": "-#errors of the offset on labelled rows (sensitivity 1)",
        }
        if self.bandwidth is None:
            parameters["noise_sd_mean"] = noise_sd(budget.mean, mean_sensitivity(relation), d + 1)
            parameters["noise_sd_spread"] = noise_sd(budget.spread, 1.0, 1)
        else:
            parameters["bandwidth"] = self.bandwidth
        if m is not None:
            parameters["expected_size"] = m
        return VectorLearnerResult(
            model=model,
            mechanism=MECHANISM,
            epsilon=eps,
            delta=dlt,
            proper=True,
            sample_size=n,
            parameters=parameters,
            theorem="zCDP composition [Bun-Steinke 2016] of Gaussian mechanisms [CKS20 Thm 4] and an "
            "exponential mechanism [Cesar-Rogers 2021 Lemma 3.2]; Renyi conversion [CKS20 Prop 12]",
            guarantee=(
                f"({eps:g}, {dlt:g})-DP ({relation} rows); no finite-sample accuracy theorem: the offset "
                "has at most 2 ln(257/beta)/epsilon_offset more training errors than the grid's best "
                "w.p. >= 1 - beta"
            ),
            theorem_sample_size=None,
            accuracy_guarantee_holds=None,
            dp_outputs={"bandwidth": bandwidth},
            neighbouring_relation=relation,
        )
