"""PCL2 on a finite metric space (privstream.learning.consistent.metric)."""

from __future__ import annotations

import numpy as np
import pytest

from privstream.learning.consistent.metric import euclidean, manhattan, maximal_packing, pcl2_fit
from privstream.learning.randomness import seeded


@pytest.mark.parametrize("metric", [euclidean, manhattan])
def test_packing_is_maximal_a_cover_and_cells_have_diameter_at_most_2r(metric) -> None:  # type: ignore[no-untyped-def]
    ground = np.random.default_rng(0).random((300, 2))
    r = 0.2
    p = maximal_packing(ground, r, metric)
    centres = ground[p.centres]
    for i, c in enumerate(centres):  # packing: pairwise >= r
        d = metric(c, centres)
        assert np.all(np.delete(d, i) >= r)
    for i, g in enumerate(ground):  # cover (Thm A.4.1) and nearest-centre cells
        d = metric(g, centres)
        assert d.min() < r or np.isclose(d.min(), r)
        assert d[p.cell[i]] == d.min()
    for k in range(p.centres.size):  # Lemma A.8: diam(V) <= 2r
        members = ground[p.cell == k]
        assert max(float(metric(a, members).max()) for a in members) <= 2 * r + 1e-12


def test_ties_go_to_the_lowest_index_centre() -> None:
    ground = np.array([[0.0], [1.0], [0.5]])
    p = maximal_packing(ground, 0.6)
    assert p.centres.tolist() == [0, 1] and p.cell.tolist() == [0, 1, 0]


def test_consistency_on_a_finite_metric_space() -> None:
    """2000 points of [0, 1] under |·| (ddim 1), η(x) = x (F1 on a finite space): excess falls with n."""
    ground = ((np.arange(2000) + 0.5) / 2000)[:, None]
    eta = ground[:, 0]
    bayes = (eta > 0.5).astype(np.uint8)

    def excess(n: int, seed: int) -> float:
        gen = np.random.default_rng(seed)
        pts = gen.integers(0, ground.shape[0], size=n)
        y = (gen.random(n) < eta[pts]).astype(np.uint8)
        model = pcl2_fit(pts, y, ground=ground, ddim=1, epsilon=1.0, metric=manhattan, rng=seeded(seed))
        h = model.predict(np.arange(ground.shape[0]))
        return float(np.mean(np.abs(2 * eta - 1) * (h != bayes)))

    means = [np.mean([excess(n, s) for s in range(4)]) for n in (10**3, 10**4, 10**5)]
    assert means[0] > means[1] > means[2]
    assert means[2] < 0.01


def test_cell_labels_have_the_pcl_law() -> None:
    """One cell holding labels {1, 0} vs {0, 0}: Pr[1] = ½ vs ½e^{-ε} (PCL's tight pair)."""
    ground = np.array([[0.0], [0.01]])
    runs = 1500
    ones = [
        sum(
            int(
                pcl2_fit(
                    np.array([0, 1]),
                    np.array(lab),
                    ground=ground,
                    ddim=1,
                    epsilon=1.0,
                    radius=1.0,
                    rng=seeded(s),
                ).predict(np.array([0]))[0]
            )
            for s in range(runs)
        )
        for lab in ([1, 0], [0, 0])
    ]
    assert abs(ones[0] / runs - 0.5) < 0.05
    assert abs(ones[1] / runs - 0.5 * np.exp(-1.0)) < 0.04
