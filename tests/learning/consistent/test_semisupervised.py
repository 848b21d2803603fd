"""The private semi-supervised learner (privstream.learning.consistent.semisupervised)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import privstream.learning.consistent.semisupervised as ssl
from privstream.learning.audit import privacy_loss
from privstream.learning.errors import LearningInputError
from privstream.learning.mechanisms import ExponentialMechanism
from privstream.learning.private_learners.vector_base import make_vector_learner, vector_model_from_dict
from privstream.learning.randomness import seeded

UNIT = [[0.0, 1.0]]


def _patterns(models: list[ssl.StumpModel], pts: np.ndarray) -> set[bytes]:
    return {m.predict(pts).tobytes() for m in models}


def test_cover_has_one_stump_per_labelling_of_the_points() -> None:
    pts = np.round(np.random.default_rng(0).random((12, 2)), 1)  # ties on purpose
    cover = ssl.stump_cover(pts, seeded(1))
    members = [cover.member(i) for i in range(len(cover))]
    mine = [m.predict(pts).tobytes() for m in members]
    assert len(set(mine)) == len(mine)  # no duplicate labellings
    # every stump's labelling on pts is in the cover (all thresholds on a fine grid, both signs)
    every = [
        ssl.StumpModel(j, t, s) for j in range(2) for t in np.linspace(-0.05, 1.05, 221) for s in (1, -1)
    ]
    assert _patterns(every, pts) <= set(mine)
    assert len(cover) <= 2 + 2 * 2 * (12 - 1)


def test_vc_bound_and_sample_sizes() -> None:
    assert [ssl.stump_vc_bound(d) for d in (1, 2, 4)] == [2, 3, 5]
    assert ssl.unlabelled_sample_size(1, 0.25, 0.25) == math.ceil(max(16 * 3, 32 * math.log2(52)))
    m = ssl.labelled_sample_size(1000, 0.5, 0.1, 0.1)
    assert m == math.ceil(2 * math.log(30_000) / 0.05)


def test_unlabelled_rows_reach_only_the_density_estimator_and_labels_only_the_em(monkeypatch) -> None:
    gen = np.random.default_rng(1)
    X = gen.random((400, 1))
    y = np.full(400, -1)
    y[:40] = (X[:40, 0] >= 0.5).astype(np.int64)
    seen: dict[str, np.ndarray] = {}
    real_pcde, real_em = ssl.pcde_fit, ssl.semi_private_learner

    def spy_pcde(rows, **kw):  # type: ignore[no-untyped-def]
        seen["pcde"] = np.array(rows)
        return real_pcde(rows, **kw)

    def spy_em(cover, Xl, yl, eps, rng):  # type: ignore[no-untyped-def]
        seen["em"] = np.array(Xl)
        seen["eps"] = eps
        return real_em(cover, Xl, yl, eps, rng)

    monkeypatch.setattr(ssl, "pcde_fit", spy_pcde)
    monkeypatch.setattr(ssl, "semi_private_learner", spy_em)
    res = ssl.SemiSupervisedLearner(n_semi=50).fit(X, y, epsilon=1.0, delta=1e-4, bounds=UNIT, rng=seeded(2))
    np.testing.assert_array_equal(seen["pcde"], X[40:])
    np.testing.assert_array_equal(seen["em"], X[:40])
    assert seen["eps"] == 0.5 and (res.epsilon, res.delta) == (1.0, 1e-4)  # sequential: 0.5 + 0.5
    assert res.accuracy_guarantee_holds is None  # the labelled count is private
    assert "40" not in str(res.parameters) and res.proper


def test_em_step_exact_privacy_for_a_fixed_cover() -> None:
    """For every replace-one neighbour of small labelled samples, the EM's output law moves <= ε_S."""
    cover = ssl.stump_cover(np.linspace(0.05, 0.95, 7)[:, None], seeded(3))
    eps = 0.5
    mech = ExponentialMechanism(eps)
    points = [0.1, 0.5, 0.9]

    def law(rows: tuple[tuple[float, int], ...]) -> dict[int, float]:
        X = np.array([[x] for x, _ in rows])
        errors = cover.errors(X, np.array([lab for _, lab in rows], dtype=np.uint8))
        levels, counts = np.unique(errors, return_counts=True)
        p = mech.block_probabilities([(int(c), -int(e)) for e, c in zip(levels, counts, strict=True)])
        level_p = dict(zip(levels.tolist(), p, strict=True))
        return {i: level_p[int(e)] / int(counts[levels.tolist().index(int(e))]) for i, e in enumerate(errors)}

    worst = 0.0
    rows = list(itertools.product(points, (0, 1)))
    for data in itertools.product(rows, repeat=2):
        for i, new in itertools.product(range(2), rows):
            other = list(data)
            other[i] = new
            worst = max(worst, privacy_loss(law(data), law(tuple(other))))
    assert worst <= eps + 1e-12


def _threshold_error(model: ssl.StumpModel, cut: float = 0.3) -> float:
    """Mass between the released stump and the target 1[x >= cut] under U[0, 1]."""
    grid = (np.arange(20_000) + 0.5) / 20_000
    return float(np.mean(model.predict(grid[:, None]) != (grid >= cut)))


def _ssl1(m: int, u: int, seed: int, **kw: object) -> ssl.VectorLearnerResult:  # type: ignore[name-defined]
    gen = np.random.default_rng(seed)
    X = gen.random((m + u, 1))
    y = (X[:, 0] >= 0.3).astype(np.int64)
    y[m:] = -1
    return ssl.SemiSupervisedLearner(**kw).fit(
        X, y, epsilon=1.0, delta=(m + u) ** -2.0, bounds=UNIT, rng=seeded(seed)
    )


def test_accuracy_with_the_stated_number_of_labels() -> None:
    """With the theorem's labelled size, error <= α in >= 1 - β of the runs."""
    alpha = beta = 0.1
    probe = _ssl1(10, 10_000, 0, n_semi=1000, alpha=alpha, beta=beta)
    m = probe.theorem_sample_size
    assert m is not None and 300 < m < 600
    errors = [
        _threshold_error(_ssl1(m, 10_000, s, n_semi=1000, alpha=alpha, beta=beta).model) for s in range(8)
    ]
    assert sum(e > alpha for e in errors) <= 1
    assert np.mean(errors) < 0.03
    few = [_threshold_error(_ssl1(30, 10_000, s, n_semi=1000).model) for s in range(8)]
    assert np.mean(few) > np.mean(errors)  # fewer labels, worse


def test_model_round_trip_and_errors() -> None:
    res = _ssl1(100, 2000, 1, n_semi=200)
    d = res.model.to_dict()
    assert vector_model_from_dict(d) == res.model
    assert set(d) in ({"kind", "feature", "threshold", "sign"}, {"kind", "constant"})
    learner = make_vector_learner("semi-supervised", n_semi=10)
    with pytest.raises(LearningInputError, match="delta"):
        learner.fit(np.zeros((5, 1)), np.array([1, 0, -1, -1, -1]), epsilon=1.0, delta=0.0, bounds=UNIT)
    nan_labels = np.array([1.0, np.nan, 0.0, np.nan])
    out = learner.fit(
        np.random.default_rng(0).random((4, 1)),
        nan_labels,
        epsilon=1.0,
        delta=0.01,
        bounds=UNIT,
        rng=seeded(0),
    )
    assert out.model.predict(np.zeros((2, 1))).dtype == np.uint8


def test_distribution_dependence_narrow_support() -> None:
    """A support of width 2·10^-5: at a fixed m = 300 the error falls as |U| grows."""
    c, gamma = math.sqrt(2) - 1, 1e-5
    grid = c - gamma + (np.arange(20_000) + 0.5) / 20_000 * 2 * gamma

    def error(u: int, seed: int) -> float:
        gen = np.random.default_rng(seed)
        n = 300 + u
        X = (c - gamma + 2 * gamma * gen.random(n))[:, None]
        y = (X[:, 0] >= c).astype(np.int64)
        y[300:] = -1
        res = ssl.SemiSupervisedLearner(n_semi=1000).fit(
            X, y, epsilon=1.0, delta=n**-2.0, bounds=UNIT, rng=seeded(seed)
        )
        return float(np.mean(res.model.predict(grid[:, None]) != (grid >= c)))

    few, many = (np.mean([error(u, s) for s in range(4)]) for u in (10**3, 10**5))
    assert few > 0.25 and many < 0.2 and many < few / 2


def test_public_resolution_for_add_remove_neighbours() -> None:
    """With cells_per_axis fixed (time windows: n private), the density grid does not depend on n."""
    learner = ssl.SemiSupervisedLearner(n_semi=50, cells_per_axis=8)
    ks = set()
    for n in (99, 100, 5000):
        X = np.random.default_rng(n).random((n, 1))
        y = np.full(n, -1)
        y[:10] = (X[:10, 0] >= 0.5).astype(np.int64)
        res = learner.fit(X, y, epsilon=1.0, delta=1e-6, bounds=UNIT, rng=seeded(n))
        ks.add(res.parameters["density_cells_per_axis"])
    assert ks == {8}
