"""Every registered audit spec (:data:`privstream.learning.audit.AUDITS`) passes; its broken variants fail.

Parametrised over the registry at collection time, so a spec is audited the day it is
registered. Every audit runs the production code path with a seeded source and reports an honest
lower confidence bound on ε (confidence 0.999: a correct mechanism is flagged with probability
<= 1e-3 per audit for a fresh seed; the seeds are fixed, so runs are reproducible). Each spec
must pass at its claim, and each deliberately broken variant must be caught; where the output law
is computable, the claim is also checked exactly (hockey-stick divergence <= δ both ways).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest

from privstream.learning.audit import AUDITS, AuditSpec, audit_spec, hockey_stick, run_audit


class Runs(NamedTuple):
    """How CI runs one audit: runs per dataset, the seed, and the power it must show.

    ``min_lower_bound``: the lower bound must reach it; ``estimate``: the point estimate must fall
    in this open interval (on a pair whose exact loss is known, the audit attains it).
    """

    samples: int
    seed: int
    min_lower_bound: float = 0.0
    estimate: tuple[float, float] | None = None
    slow: bool = False  # too many runs for CI: marked slow (an exact check must cover it in CI)


#: CI's runs for (spec, variant) (``None``: the production mechanism): the smallest counts that
#: are reliable for these fixed seeds. Unlisted audits run at the spec's own ``samples``, seed 1
#: for the production mechanism and seed 2 for a broken variant.
RUNS: dict[tuple[str, str | None], Runs] = {
    ("generic", None): Runs(6000, 3, min_lower_bound=0.2),  # exact loss on its pair: 0.886
    ("generic", "sensitivity_understated"): Runs(6000, 4),  # true loss on the pair ≈ 1.75
    ("generic", "no_noise"): Runs(2000, 5),
    ("generic-intervals", None): Runs(6000, 3, min_lower_bound=0.2),  # exact loss on its pair: 0.780
    ("generic-intervals", "sensitivity_understated"): Runs(6000, 4),  # true loss ≈ 1.54
    ("generic-intervals", "no_noise"): Runs(2000, 5),
    ("proper", None): Runs(3000, 4),
    ("proper", "scores_not_halved"): Runs(3000, 5),
    ("proper", "no_noise"): Runs(3000, 5),
    ("global-stability", None): Runs(2000, 1),
    ("global-stability", "exact_histogram"): Runs(1000, 2),
    ("global-stability", "no_threshold"): Runs(1000, 2),
    ("bayes-consistent", None): Runs(2500, 3, min_lower_bound=0.6, estimate=(0.8, 1.2)),  # exact loss: ε
    ("bayes-consistent", "noise_halved"): Runs(1000, 4),  # a 2ε loss needs more runs than an ∞ one
    ("bayes-consistent", "no_noise"): Runs(500, 4),
    ("bayes-consistent-empty-cell", None): Runs(800, 5),
    ("bayes-consistent-empty-cell", "empty_cells_unkeyed"): Runs(500, 4),
    ("bayes-consistent-empty-cell", "bounds_from_data"): Runs(500, 4),
    ("pcde", None): Runs(1000, 1),
    ("pcde", "no_threshold"): Runs(200, 1),
    ("semi-supervised", None): Runs(300, 2),
    ("semi-supervised", "no_noise"): Runs(120, 2),
    ("halfspaces", None): Runs(4000, 2, min_lower_bound=0.2, estimate=(0.6, 1.2)),  # exact loss: 0.895
    ("halfspaces", "epsilon_doubled"): Runs(6000, 2),  # exact loss on the pair ≈ 1.92
    ("halfspaces", "no_noise"): Runs(100, 2),
    # one-vs-rest: 3ε in all on the pair (exact loss 1.79, tests/learning/private_learners): 24,000 runs
    ("one-vs-rest", "budget_not_split"): Runs(24_000, 2, slow=True),
    ("halfspaces-fitted", None): Runs(2000, 1),
    ("halfspaces-fitted", "selection_argmax"): Runs(300, 2),
    ("halfspaces-fitted", "direction_exact"): Runs(300, 2),
    ("kernel", None): Runs(3000, 1),
    ("kernel", "no_noise"): Runs(300, 2),
    ("kernel", "noise_halved"): Runs(8000, 2),  # a Gaussian tail: lower bound ≈ 1.2 at this seed
    ("kernel-spread", None): Runs(3000, 1),
    ("kernel-spread", "no_noise"): Runs(300, 2),
    ("kernel-spread", "unclipped"): Runs(3000, 2),
    ("mwem", None): Runs(600, 0),
    ("mwem", "selection_without_noise"): Runs(300, 0, min_lower_bound=2.0),
    ("mwem", "measurement_without_noise"): Runs(300, 0),
    ("mwem-zcdp", None): Runs(500, 2),
    ("mwem-zcdp", "selection_without_noise"): Runs(300, 0),
    ("mwem-add-remove", None): Runs(2000, 1),
    ("mwem-add-remove", "true_size_normaliser"): Runs(600, 2),  # an implied n seen under one dataset only
    ("fooling", None): Runs(500, 0),
    ("fooling", "noiseless_check"): Runs(6000, 0),  # the changed point shows in ~τ = 4.5% of the runs
    ("hierarchical", None): Runs(2000, 1),
    ("hierarchical", "no_partition_noise"): Runs(1000, 2, min_lower_bound=3.0),
    ("hierarchical", "no_count_noise"): Runs(400, 2, min_lower_bound=3.0),
    ("hierarchical-partition", None): Runs(3000, 1),
    ("hierarchical-points", None): Runs(4000, 1),  # exact loss on its pair: 0.927
    ("hierarchical-points", "no_noise"): Runs(400, 2),
    ("hierarchical-points", "weights_doubled"): Runs(16000, 2),  # exact loss on the pair 1.13
    ("hierarchical-partition", "no_noise"): Runs(400, 2),
    # The missing depth bias shows only in rare events (exact loss 2x the claim at probability
    # ~1e-3): 10^5 runs (about 4 minutes), so slow; CI checks it exactly
    # (tests/learning/sanitizers/test_hierarchical_audit.py).
    ("hierarchical-partition", "no_depth_bias"): Runs(100_000, 3, slow=True),
}

NAMES = sorted(AUDITS)
SPECS: dict[str, AuditSpec] = {name: audit_spec(name) for name in NAMES}
BROKEN = [(name, variant) for name in NAMES for variant in sorted(SPECS[name].broken)]
EXACT = [name for name in NAMES if SPECS[name].exact is not None]


def runs(name: str, variant: str | None) -> Runs:
    return RUNS.get((name, variant), Runs(SPECS[name].samples, 1 if variant is None else 2))


@pytest.mark.parametrize("name", NAMES)
def test_spec_names_a_pair_a_claim_and_positive_controls(name: str) -> None:
    spec = SPECS[name]
    assert isinstance(spec, AuditSpec) and spec.name == name
    assert len(spec.pair) == 2 and spec.pair[0] != spec.pair[1]
    assert spec.broken, f"{name} has no positive control"
    assert spec.description and spec.samples >= 4


@pytest.mark.parametrize("name", EXACT)
def test_exact_privacy_on_the_worst_case_pair(name: str) -> None:
    spec = SPECS[name]
    assert spec.exact is not None
    p, q = spec.exact()
    assert math.fsum(p.values()) == pytest.approx(1.0, abs=1e-9)
    assert math.fsum(q.values()) == pytest.approx(1.0, abs=1e-9)
    eps, delta = spec.claimed.epsilon, spec.claimed.delta
    for a, b in ((p, q), (q, p)):
        assert hockey_stick(a, b, eps) <= delta + 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_passes_at_its_claim(name: str) -> None:
    samples, seed, min_lower_bound, estimate, _ = runs(name, None)
    result = run_audit(SPECS[name], samples=samples, seed=seed)
    assert result.passed, result.summary()
    assert result.epsilon_lower_bound >= min_lower_bound, f"the audit lacks power: {result.summary()}"
    if estimate is not None:
        assert estimate[0] < result.epsilon_estimate < estimate[1], result.summary()


BROKEN_PARAMS = [
    pytest.param(n, v, id=f"{n}-{v}", marks=[pytest.mark.slow] if runs(n, v).slow else []) for n, v in BROKEN
]


@pytest.mark.parametrize(("name", "variant"), BROKEN_PARAMS)
def test_broken_variant_is_caught(name: str, variant: str) -> None:
    samples, seed, min_lower_bound, _, _ = runs(name, variant)
    result = run_audit(SPECS[name], variant=variant, samples=samples, seed=seed)
    assert not result.passed, result.summary()
    assert result.epsilon_lower_bound > max(result.claimed_epsilon, min_lower_bound), result.summary()


def test_every_listed_run_names_a_registered_audit() -> None:
    known = {(name, None) for name in NAMES} | set(BROKEN)
    assert not set(RUNS) - known, sorted(set(RUNS) - known, key=str)
