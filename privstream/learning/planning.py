"""How many examples does each learner and sanitizer need on a class? The planner behind ``privstream plan``.

For every registered learner (:data:`~privstream.learning.private_learners.LEARNERS`) and sanitizer
(:data:`~privstream.learning.sanitizers.SANITIZERS`) that applies to the class (a fit on a small
synthetic sample succeeds; the vector learners never apply to a 1-D class), :func:`plan` reports

* the sample size its **theorem** needs for (α, β) at (ε, δ): the exact integer of the algorithm's own
  calculator, published as a float (None beyond 10^308) with its log10 (JSON numbers stay below 2^53);
* the sample size it needs **in practice**: the least n of a grid (100, 200, 500, 1000, ...) at which at
  least a fraction 1 - β of ``runs`` fits on fresh synthetic data reach error α, measured by seeded
  simulation within a time budget (learners: population error; sanitizers: the largest error over all
  queries of the class, :func:`~privstream.learning.sanitizers.evaluation.class_errors`);
* a recommendation: the learner (and the sanitizer) with the smallest practical n.

**The synthetic data** (:class:`SyntheticProblem`) are realizable by the class: a seeded target member
(a threshold in the middle half, an interval of at least N/8 points, a point, a non-constant row of a
file class) and the marginal "half uniform on the domain, half uniform on the target's ones", so both
labels are frequent and a learner must find the target's boundary (a point of mass 1/2, not 1/N).
Errors are exact (from run lengths, no truth tables), so domains up to 2^62 work.

The service asks :func:`window_too_small` at start: the same simulation at one size, the window's.

**The publication slot.** Every release is published at a deadline: the end of a slot of
``publish_delay_seconds`` on its stream's learner (a learner still running then is stopped and a
data-independent default goes out). The slot must sit well above the learner's worst run time on
the largest input it can get, the input cap ``max_node_examples``. :func:`runtime_inputs` gives
public inputs of that size (never the data) and :func:`slot_advice` turns the measured time into a
slot; ``privstream plan --node-size N`` reports it per candidate, and the service derives the same
at start-up when ``publish_delay_seconds`` is not set.

>>> p = plan("thresholds:1024", epsilon=1.0, alpha=0.1, time_budget=5, runs=3, names=["generic"])
>>> entry = p.candidates[0]
>>> entry.name, entry.applies, entry.practical_size <= 1000, entry.theorem_sample_size_log10 > 2
('generic', True, True, True)
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privstream.learning.errors import LearningInputError, PrivacyParameterError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_runs
from privstream.learning.hypothesis_classes import (
    FiniteClass,
    HypothesisClass,
    Intervals,
    Points,
    Thresholds,
    interval_hypothesis,
    parse_class_spec,
    point_hypothesis,
    threshold_hypothesis,
)
from privstream.learning.private_learners.base import (
    LEARNERS,
    check_accuracy_parameter,
    check_privacy_parameters,
    make_learner,
)
from privstream.learning.private_learners.vector_base import VECTOR_LEARNERS
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers.base import SANITIZERS, make_sanitizer

__all__ = [
    "GRID",
    "Candidate",
    "Measurement",
    "Plan",
    "Progress",
    "SyntheticProblem",
    "plan",
    "runtime_inputs",
    "slot_advice",
    "synthetic_problem",
    "window_check",
    "window_too_small",
]

#: Sample sizes tried, in order; the practical size is the first one that works.
GRID: tuple[int, ...] = (
    100,
    200,
    500,
    1000,
    2000,
    5000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
)
#: How the planner's data are drawn (also in its JSON).
SYNTHETIC_DATA = "realizable: a seeded target member; marginal 1/2 uniform on the domain + 1/2 on its ones"
#: The size of the applicability probe (a fit that must not raise).
PROBE_SIZE = 2000

#: ``progress(fraction_done, message)``: called as the simulation advances.
Progress = Callable[[float, str], None]


# -- realizable synthetic data -----------------------------------------------------------------------


def _runs(h: Hypothesis) -> list[tuple[int, int, int]]:
    """``(start, end, value)`` of every run of h."""
    first, changes = h.change_points()
    edges = [0, *changes, h.domain_size]
    return [(a, b, (first + i) % 2) for i, (a, b) in enumerate(itertools.pairwise(edges))]


@dataclass(frozen=True)
class SyntheticProblem:
    """A target member and the marginal "½ uniform on the domain + ½ uniform on the target's ones"."""

    hclass: HypothesisClass
    target: Hypothesis

    @property
    def ones(self) -> list[tuple[int, int]]:
        return [(a, b) for a, b, v in _runs(self.target) if v]

    def sample(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """n labelled examples (seeded; experiments only, nothing here is private)."""
        rng = np.random.default_rng(seed)
        size = self.hclass.domain_size
        ones = self.ones
        xs = rng.integers(0, size, n, dtype=np.int64)
        if ones:
            lengths = np.array([b - a for a, b in ones], dtype=np.float64)
            take = rng.random(n) < 0.5
            which = rng.choice(len(ones), size=int(take.sum()), p=lengths / lengths.sum())
            starts = np.array([a for a, _ in ones], dtype=np.int64)[which]
            spans = np.array([b - a for a, b in ones], dtype=np.int64)[which]
            xs[take] = starts + (rng.random(which.size) * spans).astype(np.int64)
        return xs, self.target.predict(xs)

    def error(self, h: Hypothesis) -> float:
        """The exact population error of h under the marginal."""
        size = self.hclass.domain_size
        cuts = sorted({0, size, *h.change_points()[1], *self.target.change_points()[1]})
        wrong = wrong_ones = 0
        for a, b in itertools.pairwise(cuts):
            t = self.target.predict(a)
            if h.predict(a) != t:
                wrong += b - a
                wrong_ones += (b - a) if t else 0
        total_ones = sum(b - a for a, b in self.ones)
        return 0.5 * wrong / size + (0.5 * wrong_ones / total_ones if total_ones else 0.5 * wrong / size)


def synthetic_problem(hclass: HypothesisClass, seed: int = 0) -> SyntheticProblem:
    """A seeded realizable problem on the class (module docstring).

    >>> p = synthetic_problem(parse_class_spec("points:1000"), seed=1)
    >>> p.error(p.target), p.error(point_hypothesis(1000, None))
    (0.0, 0.5005)
    """
    rng = np.random.default_rng(seed)
    n = hclass.domain_size
    if isinstance(hclass, Thresholds):
        target = threshold_hypothesis(n, int(rng.integers(n // 4, max(n // 4 + 1, 3 * n // 4 + 1))))
    elif isinstance(hclass, Points):
        target = point_hypothesis(n, int(rng.integers(0, n)))
    elif isinstance(hclass, Intervals):
        length = int(rng.integers(max(1, n // 8), max(2, n // 2 + 1)))
        start = int(rng.integers(0, n - length + 1))
        target = interval_hypothesis(n, start, start + length)
    elif isinstance(hclass, FiniteClass):
        rows = [i for i in range(hclass.size) if 0 < hclass.hypothesis(i).truth_table().sum() < n]
        target = hclass.hypothesis(int(rng.choice(rows)) if rows else int(rng.integers(0, hclass.size)))
    else:
        target = hclass.hypothesis(int(rng.integers(0, hclass.size)))
    return SyntheticProblem(hclass, hypothesis_from_runs(n, *target.change_points()))


# -- one fit, judged ---------------------------------------------------------------------------------


def _fit_error(
    kind: str,
    algorithm: Any,
    problem: SyntheticProblem,
    n: int,
    seed: int,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
) -> tuple[float, Any]:
    """(error, result) of one seeded fit on n fresh examples."""
    xs, ys = problem.sample(n, seed)
    rng = seeded(seed)
    if kind == "learner":
        result = algorithm.fit(
            problem.hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, rng=rng
        )
        return problem.error(result.hypothesis), result
    from privstream.learning.sanitizers.evaluation import class_errors  # sanitizers only

    result = algorithm.fit(
        problem.hclass, xs, None, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, rng=rng
    )
    return class_errors(problem.hclass, result.distribution, xs)[0], result


@dataclass(frozen=True)
class Measurement:
    """``successes`` of ``runs`` fits at size n reached error <= α; mean fit time."""

    n: int
    runs: int
    successes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "runs": self.runs,
            "successes": self.successes,
            "success_rate": round(self.successes / self.runs, 4) if self.runs else None,
            "fit_seconds": round(self.seconds, 4),
        }


def _measure(
    kind: str,
    algorithm: Any,
    problem: SyntheticProblem,
    n: int,
    *,
    runs: int,
    seed: int,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
    deadline: float,
) -> Measurement | None:
    """Up to ``runs`` fits at n, stopping once the success rate cannot reach 1 - β (None: out of time)."""
    allowed = math.floor(beta * runs)
    successes = failures = 0
    spent = 0.0
    for r in range(runs):
        if time.monotonic() > deadline:
            return None
        start = time.monotonic()
        try:
            err, _ = _fit_error(kind, algorithm, problem, n, seed + 7919 * r, epsilon, delta, alpha, beta)
            ok = err <= alpha
        except (ValueError, PrivacyParameterError):  # e.g. too few points for this size: a failure
            ok = False
        spent += time.monotonic() - start
        successes += ok
        failures += not ok
        if failures > allowed:
            break
    done = successes + failures
    return Measurement(n, done, successes, spent / max(done, 1))


# -- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One learner or sanitizer on the class: theorem size, practical size and how it was measured.

    ``status``: ``"measured"`` (practical size found), ``"not reached"`` (no grid size worked),
    ``"out of time"`` (the budget ran out first), ``"not applicable"`` (``reason`` says why).
    """

    kind: str
    name: str
    applies: bool
    reason: str = ""
    theorem_sample_size: int | None = None
    practical_size: int | None = None
    status: str = "not applicable"
    measurements: tuple[Measurement, ...] = ()
    theorem_log10: float | None = None  # when the exact size is not computed (too large to build)
    node_fit_seconds: float | None = None  # the worst fit on runtime_inputs at the plan's node size
    publish_delay_seconds: float | None = None  # the slot for it (slot_advice: the fit and a default)
    slot_parts: dict[str, Any] | None = None  # the service's measurement of that slot, part by part

    @property
    def theorem_sample_size_log10(self) -> float | None:
        t = self.theorem_sample_size
        if t is None:
            return None if self.theorem_log10 is None else round(self.theorem_log10, 3)
        return round(math.log10(t), 3) if t > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        t = self.theorem_sample_size
        as_float = None if t is None or t > 1e308 else float(t)
        return {
            "kind": self.kind,
            "name": self.name,
            "applies": self.applies,
            "reason": self.reason,
            "theorem_sample_size": as_float,
            "theorem_sample_size_log10": self.theorem_sample_size_log10,
            "practical_size": self.practical_size,
            "status": self.status,
            "measurements": [m.to_dict() for m in self.measurements],
            "node_fit_seconds": None if self.node_fit_seconds is None else round(self.node_fit_seconds, 4),
            "publish_delay_seconds": self.publish_delay_seconds,
            "slot_parts": self.slot_parts,
        }


@dataclass(frozen=True)
class Plan:
    """The planner's answer for one class and (ε, δ, α, β)."""

    hypothesis_class: str
    epsilon: float
    delta: float
    alpha: float
    beta: float
    seed: int
    runs: int
    time_budget: float
    candidates: tuple[Candidate, ...]
    recommendation: dict[str, Any] = field(default_factory=dict)
    node_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "hypothesis_class": self.hypothesis_class,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "alpha": self.alpha,
            "beta": self.beta,
            "seed": self.seed,
            "runs": self.runs,
            "time_budget_seconds": self.time_budget,
            "synthetic_data": SYNTHETIC_DATA,
            "node_size": self.node_size,
            "candidates": [c.to_dict() for c in self.candidates],
            "recommendation": self.recommendation,
        }


def _algorithms(names: Sequence[str] | None) -> list[tuple[str, str]]:
    pairs = [("learner", name) for name in sorted(LEARNERS)]
    pairs += [("sanitizer", name) for name in sorted(SANITIZERS)]
    if names is not None:
        unknown = set(names) - {n for _, n in pairs} - set(VECTOR_LEARNERS)
        if unknown:
            raise ValueError(f"unknown learners or sanitizers {sorted(unknown)}")
        pairs = [p for p in pairs if p[1] in names]
    return pairs


def _probe(
    kind: str, name: str, problem: SyntheticProblem, epsilon: float, delta: float, alpha: float, beta: float
) -> Candidate:
    """Build the algorithm and fit it once on a small sample: does it apply, and its theorem's n."""
    try:
        algorithm = make_learner(name) if kind == "learner" else make_sanitizer(name)
        _, result = _fit_error(kind, algorithm, problem, PROBE_SIZE, 1, epsilon, delta, alpha, beta)
    except (ValueError, PrivacyParameterError, LearningInputError) as exc:
        return Candidate(kind, name, False, reason=str(exc).split("\n")[0][:200])
    log10 = result.parameters.get("theorem_sample_size_log10") if result.theorem_sample_size is None else None
    return Candidate(
        kind,
        name,
        True,
        theorem_sample_size=result.theorem_sample_size,
        status="pending",
        theorem_log10=float(log10) if log10 else None,
    )


def _recommend(candidates: Sequence[Candidate]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    texts = []
    for kind in ("learner", "sanitizer"):
        found = [c for c in candidates if c.kind == kind and c.practical_size is not None]
        if not found:
            out[kind] = None
            continue

        def cost(c: Candidate) -> tuple[int, float]:
            return c.practical_size or 0, next(m.seconds for m in c.measurements if m.n == c.practical_size)

        best = min(found, key=cost)
        out[kind] = best.name
        texts.append(f"{kind} {best.name}: about {best.practical_size} examples in practice")
    out["text"] = "; ".join(texts) if texts else "nothing reached the target error within the budget"
    return out


def plan(
    hclass: HypothesisClass | str,
    *,
    epsilon: float,
    alpha: float,
    beta: float = 0.1,
    delta: float = 1e-6,
    seed: int = 0,
    runs: int = 10,
    time_budget: float = 60.0,
    names: Sequence[str] | None = None,
    grid: Sequence[int] = GRID,
    progress: Progress | None = None,
    node_size: int | None = None,
) -> Plan:
    """Theorem and practical sample sizes of every applicable learner and sanitizer (module docstring).

    ``time_budget`` (seconds) is shared by the candidates; ``names`` restricts the candidates;
    ``progress(fraction, message)`` is called as the simulation advances. With ``node_size`` (the
    input cap, or a count node's n), each candidate's worst fit on :func:`runtime_inputs` of that
    size and the publication slot it needs (:func:`slot_advice` of a default's fit and the fit's).
    """
    hc = parse_class_spec(hclass) if isinstance(hclass, str) else hclass
    eps, dlt = check_privacy_parameters(epsilon, delta)
    a = check_accuracy_parameter(alpha, "alpha")
    b = check_accuracy_parameter(beta, "beta")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    if not time_budget > 0:
        raise ValueError(f"the time budget must be > 0 seconds, got {time_budget!r}")
    if node_size is not None and (
        isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 1
    ):
        raise ValueError(f"node_size must be an int >= 1, got {node_size!r}")
    problem = synthetic_problem(hc, seed)
    pairs = _algorithms(names)
    report = progress or (lambda fraction, message: None)
    start = time.monotonic()
    candidates: list[Candidate] = [
        Candidate("learner", name, False, reason="a vector learner: it takes feature vectors, not 1-D points")
        for name in sorted(VECTOR_LEARNERS)
        if names is None or name in names
    ]
    probed = [_probe(kind, name, problem, eps, dlt, a, b) for kind, name in pairs]
    active = [c for c in probed if c.applies]
    for i, cand in enumerate(active):
        remaining = time_budget - (time.monotonic() - start)
        deadline = time.monotonic() + max(0.0, remaining / (len(active) - i))
        algorithm = make_learner(cand.name) if cand.kind == "learner" else make_sanitizer(cand.name)
        measurements: list[Measurement] = []
        status, size = "not reached", None
        for j, n in enumerate(grid):
            report((i + j / len(grid)) / len(active), f"{cand.name} at n = {n}")
            m = _measure(
                cand.kind,
                algorithm,
                problem,
                n,
                runs=runs,
                seed=seed + 1000 * j,
                epsilon=eps,
                delta=dlt,
                alpha=a,
                beta=b,
                deadline=deadline,
            )
            if m is None:
                status = "out of time"
                break
            measurements.append(m)
            if m.runs == runs and m.successes >= runs - math.floor(b * runs):
                status, size = "measured", n
                break
        fit_seconds = slot = None
        if node_size is not None:
            report((i + 1) / len(active), f"{cand.name}: run time on {node_size} examples")
            fit_seconds = worst_fit_seconds(
                _fit_on(cand.kind, algorithm, hc, eps, dlt, a, b), runtime_inputs(hc, node_size, seed)
            )
            slot = slot_advice(2 * fit_seconds)
        candidates.append(
            Candidate(
                cand.kind,
                cand.name,
                True,
                theorem_sample_size=cand.theorem_sample_size,
                practical_size=size,
                status=status,
                measurements=tuple(measurements),
                theorem_log10=cand.theorem_log10,
                node_fit_seconds=fit_seconds,
                publish_delay_seconds=slot,
            )
        )
    candidates.extend(c for c in probed if not c.applies)
    report(1.0, "done")
    order = {name: i for i, (_, name) in enumerate(pairs)}  # registry order; vector learners after
    candidates.sort(key=lambda c: (c.kind != "learner", order.get(c.name, len(order)), c.name))
    return Plan(
        hc.spec,
        eps,
        dlt,
        a,
        b,
        seed,
        runs,
        float(time_budget),
        tuple(candidates),
        _recommend(candidates),
        node_size,
    )


def _fit_on(
    kind: str,
    algorithm: Any,
    hclass: HypothesisClass,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
) -> Callable[[np.ndarray, np.ndarray], Any]:
    """``fit(xs, ys)`` of a learner or a sanitizer (which reads the points only) at these parameters."""
    rng = seeded(0)
    if kind == "learner":
        return lambda xs, ys: algorithm.fit(
            hclass, xs, ys, epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, rng=rng
        )
    return lambda xs, ys: algorithm.fit(hclass, xs, None, epsilon=epsilon, delta=delta, rng=rng)


# -- the publication slot ----------------------------------------------------------------------------

#: A slot is this multiple of the measured worst run time, plus a margin (and the timer's period).
SLOT_SAFETY = 3.0
SLOT_MARGIN_SECONDS = 0.25


def runtime_inputs(
    space: HypothesisClass | np.ndarray, n: int, seed: int = 0
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Public inputs of ``n`` examples on which a learner's run time is measured: ``(name, xs, ys)``.

    ``space`` is a class (points of its domain) or the ``(d, 2)`` bounds of feature vectors.
    "realizable": the planner's synthetic problem (a target member of the class; vectors: labelled
    by the halfspace ``x_d >= x_1``); "noise": the same points with fair coin labels (for some
    learners by far the slowest input: global stability takes about 100x longer on noise);
    "constant": n copies of one point labelled 0 (what a default release's learner reads).

    >>> from privstream.learning.hypothesis_classes import parse_class_spec
    >>> [(name, len(xs)) for name, xs, _ in runtime_inputs(parse_class_spec("thresholds:64"), 5)]
    [('realizable', 5), ('noise', 5), ('constant', 5)]
    >>> runtime_inputs(np.array([[0.0, 1.0], [0.0, 2.0]]), 3)[0][1].shape
    (3, 2)
    """
    rng = np.random.default_rng(seed)
    if isinstance(space, HypothesisClass):
        xs, ys = synthetic_problem(space, seed).sample(n, seed)
        constant = np.zeros(n, dtype=np.int64)
    else:
        bounds = np.asarray(space, dtype=np.float64)
        xs = bounds[:, 0] + rng.random((n, len(bounds))) * (bounds[:, 1] - bounds[:, 0])
        ys = (xs[:, -1] >= xs[:, 0]).astype(np.uint8) if n else np.zeros(0, np.uint8)
        constant = np.repeat(bounds[:, 0][None, :], n, axis=0)
    noise = rng.integers(0, 2, n).astype(np.uint8)
    return [("realizable", xs, ys), ("noise", xs, noise), ("constant", constant, np.zeros(n, np.uint8))]


def slot_advice(fit_seconds: float, timer_seconds: float = 0.0) -> float:
    """``publish_delay_seconds`` for a slot whose fits take ``fit_seconds`` at worst: a margin, the
    period of the timer that closes time windows, and ``SLOT_SAFETY`` times the fits (room for a
    loaded machine), rounded up to a tenth of a second.

    >>> slot_advice(0.1), slot_advice(2.0, timer_seconds=1.0)
    (0.6, 7.3)
    """
    return math.ceil(round((SLOT_MARGIN_SECONDS + timer_seconds + SLOT_SAFETY * fit_seconds) * 10, 6)) / 10


def worst_fit_seconds(
    fit: Callable[[np.ndarray, np.ndarray], Any], inputs: Sequence[tuple[str, Any, Any]]
) -> float:
    """The longest time ``fit(xs, ys)`` takes on the inputs (:func:`runtime_inputs`); a fit that
    raises counts the time it took."""
    worst = 0.0
    for _, xs, ys in inputs:
        start = time.perf_counter()
        with contextlib.suppress(Exception):  # a failing fit still takes time (its default covers it)
            fit(xs, ys)
        worst = max(worst, time.perf_counter() - start)
    return worst


# -- the service's check -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowCheck:
    """The simulation at one size: ``useful`` is None when the budget did not allow a verdict."""

    useful: bool | None
    success_rate: float | None
    runs: int
    message: str


def window_check(
    learner: Any,
    hclass: HypothesisClass,
    *,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
    window_size: int,
    runs: int = 5,
    time_budget: float = 5.0,
    seed: int = 0,
) -> WindowCheck:
    """Does ``learner`` (a :class:`~privstream.learning.private_learners.PrivateLearner` or a registered
    name) reach error α with probability 1 - β on windows of ``window_size`` examples of the class?

    Realizable synthetic data as in :func:`plan`; ``runs`` seeded fits within ``time_budget`` seconds.
    """
    algorithm = make_learner(learner) if isinstance(learner, str) else learner
    problem = synthetic_problem(hclass, seed)
    m = _measure(
        "learner",
        algorithm,
        problem,
        int(window_size),
        runs=runs,
        seed=seed,
        epsilon=epsilon,
        delta=delta,
        alpha=alpha,
        beta=beta,
        deadline=time.monotonic() + time_budget,
    )
    name = getattr(algorithm, "name", str(learner))
    if m is None or (m.runs < runs and m.successes + (runs - m.runs) >= runs - math.floor(beta * runs)):
        return WindowCheck(
            None,
            None,
            0 if m is None else m.runs,
            f"{name} on {hclass.spec}: no verdict within {time_budget:g} s",
        )
    rate = m.successes / m.runs
    useful = m.runs == runs and m.successes >= runs - math.floor(beta * runs)
    verdict = "reaches" if useful else "does not reach"
    hint = f"privstream plan {hclass.spec} --epsilon {epsilon:g} --alpha {alpha:g}"
    return WindowCheck(
        useful,
        rate,
        m.runs,
        f"{name} on {hclass.spec} with windows of {window_size} examples {verdict} error "
        f"{alpha:g} w.p. {1 - beta:g} on realizable synthetic data (success "
        f"{m.successes}/{m.runs} at eps={epsilon:g}); `{hint}` says which size would",
    )


_CHECKS: dict[tuple[Any, ...], WindowCheck] = {}


def window_too_small(
    learner: Any,
    hclass: HypothesisClass,
    *,
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float,
    window_size: int | None,
    time_budget: float = 3.0,
) -> str | None:
    """A warning when the window is too small for the learner to be useful, else None.

    For the service at start (:func:`window_check`, once per configuration: the verdicts are cached by
    the learner's ``repr``, which names its parameters). Time windows (``window_size`` None) and file
    classes are not checked, nor is anything that fails to run here.
    """
    if window_size is None or isinstance(hclass, FiniteClass):
        return None
    key = (
        repr(learner),
        hclass.spec,
        float(epsilon),
        float(delta),
        float(alpha),
        float(beta),
        int(window_size),
    )
    if key not in _CHECKS:
        try:
            _CHECKS[key] = window_check(
                learner,
                hclass,
                epsilon=epsilon,
                delta=delta,
                alpha=alpha,
                beta=beta,
                window_size=int(window_size),
                time_budget=time_budget,
            )
        except (ValueError, PrivacyParameterError):
            return None
    check = _CHECKS[key]
    return None if check.useful is not False else check.message
