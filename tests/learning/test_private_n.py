"""Privacy that holds in every mode: n private, empty windows, no data-dependent failure.

For every algorithm of this module's scope (the generic learner, MWEM, the fooling sanitizer, PCL,
the semi-supervised learner, the density estimator, PCL2):

* **twins**: with ``expected_size=m`` (n private), samples of n, n + 1 and 0 examples give the same
  reported fields -- everything a certificate carries except the values of the DP outputs. This
  is also the service's fallback contract: a fit on zero examples with the same ``expected_size``
  publishes exactly the certificate of a real release;
* **zero examples** give a valid release in both modes, one that the public schemas accept;
* **nothing that depends on the data raises** (points outside the public bounds, unlabelled rows,
  samples too small to subsample).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from privstream.learning.consistent.density import pcde_fit
from privstream.learning.consistent.metric import pcl2_fit
from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.private_learners.vector_base import make_vector_learner
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers import make_sanitizer
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease

M = 300  # the operator's expected window size
FILE_CLASS = FiniteClass(np.random.default_rng(5).integers(0, 2, (12, 16)).astype(bool), "random.npy")
BOUNDS_2D = [[0.0, 1.0], [-1.0, 1.0]]


def _points(hclass: Any, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.default_rng(seed)
    xs = rs.integers(0, hclass.domain_size, n)
    return xs, (rs.random(n) < 0.3).astype(np.uint8) ^ (xs >= hclass.domain_size // 2)


def _bounds(d: int) -> list[list[float]]:
    return BOUNDS_2D + [[0.0, 1.0]] * (d - 2)


def _vectors(n: int, seed: int, unlabelled: float = 0.0, d: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.default_rng(seed)
    X = rs.random((n, d)) * ([1.4, 2.6] + [1.4] * (d - 2)) - ([0.2, 1.3] + [0.2] * (d - 2))  # some outside
    y = (X[:, 0] > 0.4).astype(np.int64)
    y[rs.random(n) < unlabelled] = -1
    return X, y


def learner_case(name: str, spec: Any) -> Callable[[int, int | None, int], Any]:
    hclass = spec if isinstance(spec, FiniteClass) else parse_class_spec(spec)

    def fit(n: int, m: int | None, seed: int) -> Any:
        xs, ys = _points(hclass, n, seed)
        return make_learner(name).fit(hclass, xs, ys, epsilon=1.0, rng=seeded(seed), expected_size=m)

    return fit


def sanitizer_case(
    name: str, spec: Any, labelled: bool = False, delta: float = 0.0, **params: Any
) -> Callable[[int, int | None, int], Any]:
    hclass = spec if isinstance(spec, FiniteClass) else parse_class_spec(spec)

    def fit(n: int, m: int | None, seed: int) -> Any:
        xs, ys = _points(hclass, n, seed)
        return make_sanitizer(name, **params).fit(
            hclass, xs, ys if labelled else None, epsilon=1.0, delta=delta, rng=seeded(seed), expected_size=m
        )

    return fit


def vector_case(
    name: str, delta: float = 0.0, unlabelled: float = 0.0, d: int = 2, **params: Any
) -> Callable[[int, int | None, int], Any]:
    def fit(n: int, m: int | None, seed: int) -> Any:
        X, y = _vectors(n, seed, unlabelled, d)
        return make_vector_learner(name, **params).fit(
            X, y, epsilon=1.0, delta=delta, bounds=_bounds(d), rng=seeded(seed), expected_size=m
        )

    return fit


CASES: dict[str, Callable[[int, int | None, int], Any]] = {
    "generic-thresholds": learner_case("generic", "thresholds:64"),
    "generic-points": learner_case("generic", "points:64"),
    "generic-intervals": learner_case("generic", "intervals:64"),
    "generic-file": learner_case("generic", FILE_CLASS),
    "mwem-thresholds": sanitizer_case("mwem", "thresholds:64", rounds=5),
    "mwem-points-labelled-zcdp": sanitizer_case("mwem", "points:64", labelled=True, delta=1e-6, rounds=5),
    "mwem-intervals": sanitizer_case("mwem", "intervals:2^32", rounds=5),
    "mwem-file": sanitizer_case("mwem", FILE_CLASS, rounds=5),
    "fooling-thresholds": sanitizer_case("fooling", "thresholds:32", delta=1e-6, learner="generic", rounds=3),
    "fooling-auto": sanitizer_case("fooling", "thresholds:8", delta=1e-6, rounds=2),
    "fooling-labelled": sanitizer_case(
        "fooling", "thresholds:32", labelled=True, delta=1e-6, learner="generic", rounds=3
    ),
    "bayes-consistent": vector_case("bayes-consistent"),
    "bayes-consistent-prf": vector_case("bayes-consistent", randomness="prf"),
    "semi-supervised": vector_case("semi-supervised", delta=1e-6, unlabelled=0.8, n_semi=50),
    "halfspaces": vector_case("halfspaces", unlabelled=0.3),
    # normals fitted privately: 2 of 5 features kept (the fit's parameters come from m alone)
    "halfspaces-fitted": vector_case("halfspaces", unlabelled=0.3, d=5, max_features=2, fit_from=0),
    "kernel": vector_case("kernel", delta=1e-6, unlabelled=0.3, d=3, frequencies=16),
    "kernel-public-bandwidth": vector_case(
        "kernel", delta=1e-6, unlabelled=0.3, frequencies=16, bandwidth=0.3
    ),
}


def reported(result: Any) -> dict[str, Any]:
    """Every field a certificate takes from a result, DP outputs by their keys only."""
    fields = {
        name: getattr(result, name)
        for name in (
            "mechanism",
            "epsilon",
            "delta",
            "parameters",
            "theorem_sample_size",
            "accuracy_guarantee_holds",
            "neighbouring_relation",
            "privacy",
        )
    }
    fields["dp_output_keys"] = sorted(result.dp_outputs)
    for extra in ("proper", "theorem", "guarantee", "hypothesis_class"):
        if hasattr(result, extra):
            fields[extra] = getattr(result, extra)
    return fields


def shape_of(result: Any) -> Any:
    """The data-independent form of the output (what its size would reveal)."""
    if hasattr(result, "model"):
        d = result.model.to_dict()
        return {k: v for k, v in d.items() if k in ("kind", "bounds", "cells_per_axis")} | {
            "cells": len(d.get("labels", ""))
        }
    if hasattr(result, "distribution"):
        return result.distribution.domain_size, result.distribution.labelled
    return result.hypothesis.domain_size


@pytest.mark.parametrize("case", sorted(CASES))
def test_with_n_private_the_reported_fields_do_not_depend_on_n(case: str) -> None:
    fit = CASES[case]
    runs = [fit(n, M, seed) for seed, n in enumerate((M - 40, M - 39, 0, M + 200))]
    first = reported(runs[0])
    assert first["neighbouring_relation"] == "add-remove-one"
    assert first["parameters"].get("expected_size", M) == M
    for other in runs[1:]:
        assert reported(other) == first
        assert shape_of(other) == shape_of(runs[0])
    assert [r.sample_size for r in runs] == [M - 40, M - 39, 0, M + 200]  # the truth stays in the result


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("m", [None, M])
def test_zero_examples_give_a_valid_public_release(case: str, m: int | None) -> None:
    result = CASES[case](0, m, 7)
    assert result.sample_size == 0
    assert result.neighbouring_relation == ("replace-one" if m is None else "add-remove-one")
    certificate = Certificate(
        mechanism=result.mechanism,
        epsilon=result.epsilon,
        delta=result.delta,
        neighbouring_relation=result.neighbouring_relation,
        privacy=result.privacy,
        parameters=result.parameters,
        dp_outputs=result.dp_outputs,
        proper=getattr(result, "proper", False),
        accuracy_guarantee_holds=result.accuracy_guarantee_holds,
        theorem_sample_size=result.theorem_sample_size,
        randomness="seeded",
        library_version="test",
    )
    if hasattr(result, "distribution"):
        assert result.distribution.weights.sum() == pytest.approx(1.0)
        release: Any = SanitizedRelease(
            stream_id="s",
            hypothesis_class="c",
            certificate=certificate,
            distribution=result.distribution.to_dict(),
            labelled=result.distribution.labelled,
        )
    else:
        model = result.model if hasattr(result, "model") else result.hypothesis
        release = HypothesisRelease(
            stream_id="s", hypothesis_class="c", certificate=certificate, hypothesis=model.to_dict()
        )
    assert type(release).model_validate_json(release.model_dump_json()) == release


def test_with_n_public_parameters_may_follow_n() -> None:
    """The contrast: without expected_size, PCL's grid follows n (public there), as in the paper."""

    def k(n: int, m: int | None) -> int:
        return CASES["bayes-consistent"](n, m, 1).parameters["cells_per_axis"]

    assert k(100, None) != k(10_000, None)
    assert k(100, 10_000) == k(10_000, 10_000)


def test_mwem_with_n_private_normalises_by_a_noisy_count() -> None:
    hclass = parse_class_spec("thresholds:64")
    xs = np.random.default_rng(0).integers(0, 64, 2000)
    res = make_sanitizer("mwem", rounds=3).fit(hclass, xs, epsilon=2.0, rng=seeded(1), expected_size=500)
    assert res.parameters["epsilon_count"] == pytest.approx(0.1)  # count_share 0.05 of ε
    assert res.parameters["epsilon_spent"] == pytest.approx(2.0)
    assert abs(res.dp_outputs["noisy_size"] - 2000) < 300  # DLap at ε = 0.1: scale 10
    assert res.accuracy_guarantee_holds is False and res.parameters["expected_size"] == 500
    with pytest.raises(ValueError, match="expected_size"):
        make_sanitizer("mwem").fit(hclass, xs, epsilon=1.0, expected_size=-3)


def test_fooling_with_n_private_subsamples_by_poisson_and_reports_m() -> None:
    hclass = parse_class_spec("thresholds:32")
    xs = np.random.default_rng(0).integers(0, 32, 4000)
    res = make_sanitizer("fooling", learner="generic", rounds=2).fit(
        hclass, xs, epsilon=1.0, delta=1e-6, rng=seeded(2), expected_size=3000
    )
    p = res.parameters
    assert p["subsample_size"] == int(p["tau"] * 3000) >= 1 and p["subsampling"].startswith("Poisson")
    assert p["tau"] * 2**32 == int(p["tau"] * 2**32)  # dyadic: the Bernoulli draws are exact


def test_pcl_privacy_kind_follows_its_randomness() -> None:
    X, y = _vectors(500, 0)
    direct = make_vector_learner("bayes-consistent").fit(X, y, epsilon=1.0, bounds=BOUNDS_2D, rng=seeded(0))
    prf = make_vector_learner("bayes-consistent", randomness="prf").fit(
        X, y, epsilon=1.0, bounds=BOUNDS_2D, rng=seeded(0)
    )
    assert direct.privacy == "information-theoretic" and prf.privacy == "computational"
    assert direct.certificate_fields()["privacy"] == "information-theoretic"
    cert = Certificate(**prf.certificate_fields(), randomness="seeded", library_version="test")
    assert cert.privacy == "computational" and "PRF" in cert.parameters["noise"]
    with pytest.raises(ValueError, match="randomness"):
        make_vector_learner("bayes-consistent", randomness="hmac")


def test_vector_learners_never_refuse_data() -> None:
    """Out-of-bounds values are clipped and unlabelled rows cast no vote: no data makes fit raise."""
    X = np.array([[-50.0, 9.0], [0.5, 0.0], [3.0, -7.0]])
    y = np.array([1, -1, 0])
    cases = (
        ("bayes-consistent", {}),
        ("semi-supervised", {"n_semi": 20}),
        ("halfspaces", {}),
        ("halfspaces", {"fit_from": 0}),  # d = 2: never fitted, whatever fit_from
    )
    for name, params in cases:
        res = make_vector_learner(name, **params).fit(
            X, y, epsilon=1.0, delta=1e-6, bounds=BOUNDS_2D, rng=seeded(1)
        )
        assert res.parameters["out_of_bounds"] == "clip"
        assert res.model.predict(X).shape == (3,)


def test_density_estimator_with_n_private() -> None:
    """PCDE: the grid and the released normaliser come from m; zero rows release the fallback."""
    fits = [
        pcde_fit(
            _vectors(n, n)[0], epsilon=1.0, delta=1e-6, bounds=BOUNDS_2D, rng=seeded(n), expected_size=400
        )
        for n in (0, 399, 400, 1000)
    ]
    assert {(f.grid.k, f.n) for f in fits} == {(5, 400)}
    assert fits[0].fallback_used and fits[0].density(np.array([[0.5, 0.0]])) == pytest.approx([0.5])
    public = pcde_fit(np.zeros((0, 2)), epsilon=1.0, delta=1e-6, bounds=BOUNDS_2D, rng=seeded(0))
    assert public.fallback_used and public.n == 0
    with pytest.raises(ValueError, match="not both"):
        pcde_fit(np.zeros((0, 2)), epsilon=1.0, delta=1e-6, bounds=BOUNDS_2D, n=5, expected_size=5)


def test_metric_learner_with_n_private() -> None:
    """PCL2: the packing (radius, centres) comes from m; zero points are fine in both modes."""
    ground = np.linspace(0, 1, 41)[:, None]
    models = []
    for n in (0, 30, 31, 200):
        rs = np.random.default_rng(n)
        points = rs.integers(0, 41, n)
        models.append(
            pcl2_fit(
                points,
                (points > 20).astype(np.int64),
                ground=ground,
                ddim=1,
                epsilon=1.0,
                rng=seeded(n),
                expected_size=30,
            )
        )
    assert len({(m.packing.radius, tuple(m.packing.centres.tolist())) for m in models}) == 1
    assert {m.privacy for m in models} == {"information-theoretic"}
    empty = pcl2_fit(
        np.array([], dtype=np.int64), np.array([]), ground=ground, ddim=1, epsilon=1.0, rng=seeded(0)
    )  # n = 0, n public: radius = the diameter, every cell a coin
    assert empty.packing.radius == 1.0 and empty.labels.shape == empty.packing.centres.shape
    prf = pcl2_fit(
        np.array([3, 30]),
        np.array([0, 1]),
        ground=ground,
        ddim=1,
        epsilon=1.0,
        rng=seeded(0),
        randomness="prf",
    )
    assert prf.privacy == "computational"
