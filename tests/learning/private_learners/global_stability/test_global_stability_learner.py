"""Algorithm M, the "global-stability" learner: parameter tables 3.4, exact
release law of the histogram + exponential mechanism on the surviving list, privacy accounting, the
canary audits (replace-one and add/remove) with broken variants, the random split of private-n
mode, membership, practical accuracy, the CLI."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from privstream.learning.audit import audit_spec, run_audit
from privstream.learning.errors import PrivacyParameterError
from privstream.learning.hypotheses import hypothesis_from_runs, hypothesis_from_table
from privstream.learning.hypothesis_classes import FiniteClass, parse_class_spec, point_hypothesis
from privstream.learning.mechanisms import ExponentialMechanism, StableHistogram
from privstream.learning.private_learners import LEARNERS, PrivateLearner, make_learner
from privstream.learning.private_learners.global_stability.algorithm_g import FAIL_KEY
from privstream.learning.private_learners.global_stability.audit_specs import ADD_REMOVE_PAIR, AUDIT_PAIR
from privstream.learning.private_learners.global_stability.learner import (
    GlobalStabilityLearner,
    MParameters,
    _theory_m_parameters,
    algorithm_m,
    global_stability_sample_size,
    is_member,
    log10_closed_form,
    n_generic_list,
    positional_split,
    practical_parameters,
    random_split,
    theory_parameters,
)
from privstream.learning.randomness import seeded

# -- theory calculator: table 3.4 (alpha = beta = 0.1, eps = 1, delta = 1e-6) -------------------


@pytest.mark.parametrize(
    ("d", "eta", "k", "m", "n_prime"),
    [
        (1, Fraction(1, 1024), 1_354_324, 1_310_880, 8_937),
        (2, Fraction(1, 393_216), 819_565_915, 2_684_354_880, 13_222),
    ],
)
def test_theory_parameters_reproduce_table_3_4(d, eta, k, m, n_prime) -> None:
    p = theory_parameters(0.1, 0.1, 1.0, 1e-6, d)
    assert (p.eta, p.K, p.m, p.n_prime) == (eta, k, m, n_prime)
    assert p.n_total == k * m + n_prime == global_stability_sample_size(0.1, 0.1, 1.0, 1e-6, d)
    assert p.K == p.K_sampling > p.K_histogram  # the sampling condition dominates
    assert p.n_aux == math.ceil(2 ** (d + 3) / 0.1) and m - p.n_aux == p.N


def test_theory_parameters_d3_and_orders_of_magnitude() -> None:
    p = theory_parameters(0.1, 0.1, 1.0, 1e-6, 3)
    assert p.m == 1_407_374_883_553_920 and p.n_prime == 21_414
    assert round(p.K / 1e14, 4) == 1.2166
    assert f"{p.n_total:.3g}" == "1.71e+29"
    assert f"{theory_parameters(0.1, 0.1, 1.0, 1e-6, 1).n_total:.4g}" == "1.775e+12"
    assert f"{theory_parameters(0.1, 0.1, 1.0, 1e-6, 2).n_total:.2g}" == "2.2e+18"


def test_theory_histogram_condition_and_constants() -> None:
    p = theory_parameters(0.1, 0.1, 1.0, 1e-6, 1)
    t = math.ceil(4 * math.log(3 * p.K_histogram / 0.1))
    assert p.K_histogram * p.eta / 8 >= p.hist_threshold + t  # the condition holds at K_histogram
    assert p.hist_threshold == StableHistogram(0.5, 1e-6).threshold
    # constants are exposed: a smaller sampling constant lowers K proportionally
    q = theory_parameters(0.1, 0.1, 1.0, 1e-6, 1, sampling_constant=64)
    assert abs(q.K_sampling - p.K_sampling / 2) <= 1
    assert n_generic_list(2048, 0.05, 0.1 / 3, 0.5) == 8937
    assert n_generic_list(2048, 0.05, 0.1 / 3, 0.5, c_sample=18) < 8937
    # huge d stays exact (integers with hundreds of digits)
    assert theory_parameters(0.1, 0.1, 1.0, 1e-6, 8).n_total > 10**300
    with pytest.raises(PrivacyParameterError, match="delta > 0"):
        theory_parameters(0.1, 0.1, 1.0, 0.0, 1)


# -- practical parameters ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 100, 1000, 10_000, 123_457])
@pytest.mark.parametrize("expected", [False, True])
def test_practical_layout_covers_the_window(n, expected) -> None:
    p = practical_parameters(n, 1.0, 1e-6, 0.1, 0.1, expected=expected)
    assert p.num_batches * p.batch_size + p.n_prime == n
    assert p.expected_size == (n if expected else None)
    assert p.n_prime >= 0 and p.num_batches >= 0
    assert 1 <= p.min_batch <= max(1, p.batch_size)
    if p.num_batches and 4 * p.hist_threshold <= 3 * p.num_batches:
        assert math.isclose(p.prune_below * p.num_batches, p.hist_threshold)  # cut = T/K
    else:
        assert p.eta == 1.0  # K < 4T/3: too few batches for anything to be released reliably


def test_practical_mode_is_correlated_erm_with_parallel_composition() -> None:
    p = practical_parameters(20_000, 1.0, 1e-6, 0.1, 0.1)
    assert (p.batch_learner, p.hist_epsilon, p.select_epsilon) == ("correlated-erm", 1.0, 1.0)
    assert p.hist_threshold == StableHistogram(1.0, 1e-6).threshold == 28
    # K = ceil((T + ceil(2 ln 30)) / stability) batches; the tolerance is α/2
    assert p.num_batches == math.ceil((28 + math.ceil(2 * math.log(30))) / 0.25) == 140
    assert p.tolerance == 0.05 and p.min_batch == math.ceil(p.batch_size / 2)
    # at this size the practical G has a budget and a depth above 0: nothing here is degenerate
    assert p.batch_size >= 100 and p.n_prime < 0.2 * 20_000 + p.num_batches
    # theory mode keeps the paper's basic composition (ε/2 + ε/2) and G
    t = _theory_m_parameters(theory_parameters(0.1, 0.1, 1.0, 1e-6, 1), 2 * 10**12, False)
    assert (t.batch_learner, t.hist_epsilon, t.select_epsilon, t.mode) == ("g", 0.5, 0.5, "theory")


# -- exact release law of steps 2-4 on a small input -------------------------------------------


def test_release_law_of_histogram_and_exponential_mechanism_exact() -> None:
    """points:4, K = 6 one-example batches (G = SOA of one example: ``1[x = 3]`` after (3, 1), the
    all-zero function after a negative), S' = 3 examples. Steps 2-4 have the closed-form law:
    each item is released independently with ``Pr[c + Z >= T]``, then the exponential mechanism at
    ε/2 picks among the survivors (all-zero when none). The empirical law of 6000 runs of
    :func:`algorithm_m` must match it (4.5-sigma bands)."""
    hclass = parse_class_spec("points:4")
    eps, delta = 4.0, 0.2
    hist = StableHistogram(eps / 2, delta)
    xs = np.array([3, 3, 0, 1, 2, 3, 3, 0, 1], dtype=np.int64)  # batches: 3 positives, 3 negatives
    ys = np.array([1, 1, 0, 0, 0, 1, 1, 0, 0], dtype=np.uint8)  # S' = (3,1), (0,0), (1,0)
    params = MParameters(
        mode="practical",
        num_batches=6,
        batch_size=1,
        n_aux=1,
        budget=0,
        max_depth=0,
        eta=4 / 18,
        n_prime=3,
        hist_threshold=hist.threshold,  # cut 1/6: keeps all
        hist_epsilon=eps / 2,
        select_epsilon=eps / 2,
        batch_learner="g",
    )
    zero, point = point_hypothesis(4, None), point_hypothesis(4, 3)
    counts = {zero: 3, point: 3}
    errors = {zero: 1, point: 0}
    law: dict = {zero: 0.0, point: 0.0}
    for released in itertools.product([False, True], repeat=2):
        p = math.prod(
            hist.release_probability(counts[h]) if r else 1 - hist.release_probability(counts[h])
            for h, r in zip((zero, point), released, strict=True)
        )
        survivors = [h for h, r in zip((zero, point), released, strict=True) if r]
        if not survivors:
            law[zero] += p
            continue
        probs = ExponentialMechanism(eps / 2).probabilities([-errors[h] for h in survivors])
        for h, q in zip(survivors, probs, strict=True):
            law[h] += p * q
    runs = 6000
    rng = seeded(21)
    seen = Counter(
        algorithm_m(hclass, xs, ys, params, epsilon=eps, delta=delta, rng=rng).hypothesis for _ in range(runs)
    )
    assert set(seen) <= {zero, point}
    for h, p in law.items():
        assert abs(seen[h] / runs - p) <= 4.5 * math.sqrt(p * (1 - p) / runs) + 1e-9, (h, seen[h], p)
    assert 0.05 < law[point] < 0.95  # the check is not degenerate


def test_fail_is_dropped_and_empty_list_gives_the_default() -> None:
    hclass = parse_class_spec("points:8")
    xs = np.zeros(40, dtype=np.int64)
    ys = np.zeros(40, dtype=np.uint8)
    # depth 1 on constant data always exhausts the budget: every run is Fail
    params = MParameters(
        mode="practical",
        num_batches=4,
        batch_size=10,
        n_aux=2,
        budget=8,
        max_depth=1,
        eta=0.01,
        n_prime=0,
        hist_threshold=2,
        hist_epsilon=4.0,
        select_epsilon=4.0,
        batch_learner="g",
    )
    for seed in range(30):
        out = algorithm_m(
            hclass,
            xs,
            ys,
            params,
            epsilon=8.0,
            delta=0.5,
            rng=seeded(seed),
            histogram=lambda keys, rng: dict(Counter(keys)),
        )  # exact counts: Fail shows
        depth_one = [r for r in out.runs if r.depth == 1]
        assert all(r.key == FAIL_KEY for r in depth_one)
        assert all(h is not None for h in out.candidates)
        assert out.hypothesis == hypothesis_from_runs(8, 0, ())  # the zero function or the default


def test_layout_mismatch_is_refused() -> None:
    params = practical_parameters(100, 1.0, 1e-6, 0.1, 0.1)
    with pytest.raises(ValueError, match="layout"):
        algorithm_m(
            parse_class_spec("points:8"),
            np.zeros(99, dtype=np.int64),
            np.zeros(99, dtype=np.uint8),
            params,
            epsilon=1.0,
            delta=1e-6,
            rng=seeded(0),
        )


# -- privacy: accounting and the empirical audit -----------------------------------------------


def test_accounting_is_parallel_hist_eps_delta_and_em_eps_in_practical_mode(monkeypatch) -> None:
    """Practical mode: batches and S' are disjoint, so the histogram gets (ε, δ) and the selection
    ε (parallel composition, module docstring); the release claims (ε, δ)."""
    import privstream.learning.private_learners.global_stability.learner as gs

    seen = {}
    real_hist, real_em = gs._stable_histogram, gs.ExponentialMechanism

    def spy_hist(epsilon, delta, rng):
        seen["hist"] = (epsilon, delta)
        return real_hist(epsilon, delta, rng)

    def spy_em(epsilon, sensitivity, rng):
        seen["em"] = (epsilon, sensitivity)
        return real_em(epsilon, sensitivity, rng=rng)

    monkeypatch.setattr(gs, "_stable_histogram", spy_hist)
    monkeypatch.setattr(gs, "ExponentialMechanism", spy_em)
    hclass = parse_class_spec("points:64")
    xs = np.arange(3000) % 4
    result = GlobalStabilityLearner().fit(
        hclass, xs, (xs == 1).astype(np.uint8), epsilon=0.8, delta=1e-5, rng=seeded(1)
    )
    assert seen == {"hist": (0.8, 1e-5), "em": (0.8, 1)}
    assert (result.epsilon, result.delta) == (0.8, 1e-5)


def test_delta_zero_and_bad_parameters_are_refused() -> None:
    learner = GlobalStabilityLearner()
    hclass = parse_class_spec("points:8")
    xs, ys = np.zeros(10, dtype=np.int64), np.zeros(10, dtype=np.uint8)
    with pytest.raises(PrivacyParameterError, match="delta > 0"):
        learner.fit(hclass, xs, ys, epsilon=1.0, delta=0.0)
    with pytest.raises(PrivacyParameterError):
        learner.fit(hclass, xs, ys, epsilon=-1.0, delta=1e-6)
    with pytest.raises(ValueError):
        GlobalStabilityLearner(tie=2)
    with pytest.raises(ValueError):
        GlobalStabilityLearner(stability=0.0)


def test_audit_spec_is_the_canary_at_the_learner_s_claim() -> None:
    """The canary pair at (2, 0.05); the contract suite audits it and its broken histograms."""
    spec = audit_spec("global-stability")
    assert spec.pair == AUDIT_PAIR
    assert (spec.claimed.epsilon, spec.claimed.delta) == (2.0, 0.05)
    assert set(spec.broken) == {"exact_histogram", "no_threshold"}


def test_canary_release_rate_is_below_delta() -> None:
    """The canary's hypothesis (count 1) reaches the output at most with the histogram's p <= δ."""
    spec = audit_spec("global-stability")
    release = spec.build(seeded(9))
    runs = 1500
    hits = sum(release(AUDIT_PAIR[0]).predict(7) for _ in range(runs))
    p = StableHistogram(2.0, 0.05).release_probability(1)
    assert p <= 0.05
    assert hits / runs <= p + 4 * math.sqrt(p / runs)


# -- the learner interface ---------------------------------------------------------------------


def test_registered_and_protocol() -> None:
    assert "global-stability" in LEARNERS
    learner = make_learner("global-stability", stability=0.6)
    assert isinstance(learner, PrivateLearner) and learner.name == "global-stability"


def test_deterministic_given_the_seed_and_result_fields() -> None:
    hclass = parse_class_spec("points:1024")
    xs = np.where(np.arange(1000) % 5 == 0, 17, np.arange(1000) % 1024)
    ys = (xs == 17).astype(np.uint8)
    a = make_learner("global-stability").fit(
        hclass, xs, ys, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.1, rng=seeded(5)
    )
    b = make_learner("global-stability").fit(
        hclass, xs, ys, epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.1, rng=seeded(5)
    )
    assert a == b
    assert a.theorem_sample_size == global_stability_sample_size(0.1, 0.1, 1.0, 1e-6, 1)
    assert a.accuracy_guarantee_holds is False and a.parameters["mode"] == "practical"
    assert a.proper == is_member(hclass, a.hypothesis)
    json.dumps(a.parameters)  # the certificate's parameters are JSON-able


def test_is_member_is_truthful() -> None:
    for spec in ("thresholds:9", "points:9", "intervals:7"):
        hclass = parse_class_spec(spec)
        table = hclass.matrix()
        members = {hypothesis_from_table(row) for row in table}
        assert all(is_member(hclass, h) for h in members)
        for bits in itertools.product([0, 1], repeat=hclass.domain_size):
            h = hypothesis_from_table(np.array(bits, dtype=bool))
            assert is_member(hclass, h) == (h in members), (spec, bits)
    rows = np.array([[1, 0, 1], [0, 0, 1]], dtype=bool)
    finite = FiniteClass(rows, "two-rows")
    assert is_member(finite, hypothesis_from_table(rows[0]))
    assert not is_member(finite, hypothesis_from_table(np.array([1, 1, 1], dtype=bool)))


# -- accuracy with practical parameters (fixed seeds) ------------------------------------------


def _errors(spec: str, n: int, seeds: range, expected_size: int | None = None) -> list[float]:
    hclass = parse_class_spec(spec)
    size = hclass.domain_size
    if spec.startswith("points"):  # target 1[x = 17] carrying mass 0.2: all-zero has error 0.2
        marginal = np.full(size, 0.8 / size)
        marginal[17] += 0.2
        target = np.arange(size) == 17
    elif spec.startswith("intervals"):  # [N/4, 5N/8), uniform marginal: the empty set has error 0.375
        marginal = np.full(size, 1 / size)
        target = (np.arange(size) >= size // 4) & (np.arange(size) < 5 * size // 8)
    else:  # threshold at the middle, uniform marginal
        marginal = np.full(size, 1 / size)
        target = np.arange(size) >= size // 2
    errors = []
    for seed in seeds:
        data = np.random.default_rng(seed)
        xs = data.choice(size, size=n, p=marginal)
        result = make_learner("global-stability").fit(
            hclass,
            xs,
            target[xs].astype(np.uint8),
            epsilon=1.0,
            delta=1e-6,
            alpha=0.1,
            beta=0.1,
            rng=seeded(seed),
            expected_size=expected_size,
        )
        errors.append(float(marginal[result.hypothesis.truth_table() != target].sum()))
    return errors


@pytest.mark.parametrize("spec", ["thresholds:1024", "points:1024", "intervals:1024"])
@pytest.mark.parametrize("private_n", [False, True])
def test_hold_out_error_at_20000(spec, private_n) -> None:
    """The hold-out check: error <= 0.1 at n = 20,000, ε = 1, δ = 1e-6 over 2^10, in both
    modes (observed over 20 seeds: 0.9-quantiles 0.025 thresholds, 0 points, 0.05 intervals; the
    old practical G released the all-zero function, error 0.5/0.2/0.375)."""
    errors = _errors(spec, 20_000, range(6), expected_size=20_000 if private_n else None)
    assert max(errors) <= 0.1, errors


# -- private n: add/remove neighbours with expected_size ---------------------------------------


def test_parameters_under_private_n_depend_on_the_expected_size_only() -> None:
    hclass = parse_class_spec("thresholds:1024")
    results = []
    for n in (0, 1, 500, 20_000, 60_000):
        xs = np.random.default_rng(n).integers(0, 1024, n)
        results.append(
            make_learner("global-stability").fit(
                hclass,
                xs,
                (xs >= 300).astype(np.uint8),
                epsilon=1.0,
                delta=1e-6,
                alpha=0.1,
                beta=0.1,
                rng=seeded(3),
                expected_size=20_000,
            )
        )
    first = results[0]
    for r in results:
        assert r.parameters == first.parameters  # no n, no data-dependent list size
        assert (r.theorem_sample_size, r.accuracy_guarantee_holds, r.mechanism) == (
            first.theorem_sample_size,
            first.accuracy_guarantee_holds,
            first.mechanism,
        )
    assert [r.sample_size for r in results] == [0, 1, 500, 20_000, 60_000]  # kept, never published
    assert "released_list_size" not in first.parameters
    assert first.parameters["neighbours"] == "add/remove-one" and first.parameters["expected_size"] == 20_000
    # an empty window is released like any other (every batch is Fail: the all-zero default)
    assert results[0].hypothesis == hypothesis_from_runs(1024, 0, ())
    assert max(abs(results[3].hypothesis.truth_table().astype(int) - (np.arange(1024) >= 300))) <= 1
    json.dumps(first.parameters)


def test_zero_examples_give_a_release_in_both_modes() -> None:
    hclass = parse_class_spec("intervals:64")
    empty = np.zeros(0, dtype=np.int64)
    for expected in (None, 1, 5000):
        r = make_learner("global-stability").fit(
            hclass,
            empty,
            empty.astype(np.uint8),
            epsilon=1.0,
            delta=1e-6,
            rng=seeded(0),
            expected_size=expected,
        )
        assert r.hypothesis.domain_size == 64 and r.sample_size == 0
    with pytest.raises(ValueError, match="expected_size"):
        make_learner("global-stability").fit(
            hclass, empty, empty.astype(np.uint8), epsilon=1.0, delta=1e-6, expected_size=0
        )


def test_random_split_is_independent_per_example() -> None:
    """Each example's batch is its own uniform draw on [0, E): the first n assignments do not depend
    on later examples (the coupling of the privacy proof), and the frequencies match m/E and n'/E."""
    p = practical_parameters(2000, 1.0, 1e-6, 0.1, 0.1, expected=True)
    a = random_split(5000, p, seeded(7))
    b = random_split(5001, p, seeded(7))
    assert np.array_equal(a, b[:5000])  # adding an example changes one batch only
    assert a.min() >= 0 and a.max() <= p.num_batches
    counts = np.bincount(a, minlength=p.num_batches + 1)
    share = p.n_prime / 2000
    assert abs(counts[-1] / 5000 - share) <= 5 * math.sqrt(share * (1 - share) / 5000)
    per_batch = p.batch_size / 2000
    assert abs(counts[:-1].mean() / 5000 - per_batch) <= 0.01
    # the positional split (n public) is the paper's fixed layout
    q = practical_parameters(100, 1.0, 1e-6, 0.1, 0.1)
    pos = positional_split(100, q)
    assert (
        pos.tolist()
        == [i // q.batch_size for i in range(q.num_batches * q.batch_size)] + [q.num_batches] * q.n_prime
    )


def test_add_remove_audit_passes_and_catches_the_positional_split() -> None:
    spec = audit_spec("global-stability-add-remove")
    assert spec.pair == ADD_REMOVE_PAIR and len(spec.pair[1][0]) == len(spec.pair[0][0]) + 1
    ok = run_audit(spec, samples=2000, seed=1)
    assert ok.passed, ok.summary()
    bad = run_audit(spec, variant="positional", samples=2000, seed=2)
    assert not bad.passed, bad.summary()


def test_theorem_size_beyond_the_exact_chain() -> None:
    """Ldim > 16: the chain's integers have 2^(d+2) bits, so only log10(n_total) is computed (closed
    form, within 2e-4 of the exact chain where both exist); the learner still runs."""
    for d in range(1, 11):
        for eps in (0.1, 1.0):
            exact = math.log10(global_stability_sample_size(0.1, 0.1, eps, 1e-6, d))
            assert abs(log10_closed_form(0.1, 0.1, eps, 1e-6, d) - exact) < 1e-3
    hclass = parse_class_spec("thresholds:4294967296")
    xs = np.random.default_rng(0).integers(0, 2**32, 5000)
    r = make_learner("global-stability").fit(
        hclass,
        xs,
        (xs >= 2**30).astype(np.uint8),
        epsilon=1.0,
        delta=1e-6,
        alpha=0.1,
        beta=0.1,
        rng=seeded(1),
    )
    assert r.theorem_sample_size is None and not r.accuracy_guarantee_holds
    assert r.parameters["theorem_sample_size_log10"] == pytest.approx(1.034e10, rel=1e-3)
    assert r.parameters["ldim"] == 32
