"""The empirical privacy audit of a release path in process, shared by the path audits.

A path audit runs the whole release path on an injected clock (:class:`~tests.agents.twins.TwinRun`)
many times on two neighbouring step lists, records what the public sees of each run (a JSON
transcript), and hands the runs to ``learning.audit.harness.audit`` (an event chosen on one half,
Clopper-Pearson bounds on the other). The honest path must pass with a lower bound on ε at or
below the claimed ε; a broken variant must be caught.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from privstream.learning.accounting import PrivacyGuarantee
from privstream.learning.audit.harness import audit
from privstream.learning.randomness import RandomSource, seeded
from privstream.stream_app.settings import StreamConfig
from tests.agents.twins import Observed, Step, TwinRun

#: What one run shows the public, as a comparable string (the audit's outcome).
Transcript = Callable[[Observed], str]


#: The audited mechanism, built from the audit's source of seeds: one run on a step list.
Mechanism = Callable[[RandomSource], Callable[[Sequence[Step]], str]]


def unchanged(twin: TwinRun) -> AbstractContextManager[Any]:
    """The honest path: nothing broken."""
    return contextlib.nullcontext()


def as_agent(agent_class: type) -> Callable[[TwinRun], AbstractContextManager[Any]]:
    """A variant whose release agent is ``agent_class`` (a subclass of the service's)."""

    def prepare(twin: TwinRun) -> AbstractContextManager[Any]:
        twin.agent.__class__ = agent_class
        return contextlib.nullcontext()

    return prepare


def twin_runs(
    stream: StreamConfig,
    transcript: Transcript,
    prepare: Callable[[TwinRun], AbstractContextManager[Any]] = unchanged,
    **options: Any,
) -> Mechanism:
    """One run of ``stream``'s release path on a step list, seeded from the audit's source: its
    public ``transcript``. ``prepare(twin)`` breaks the path for a broken variant; the run is made
    inside the context manager it returns. ``options`` go to :class:`TwinRun` (e.g. ``budget``)."""

    def build(rng: RandomSource) -> Callable[[Sequence[Step]], str]:
        def run(steps: Sequence[Step]) -> str:
            # the transcripts are the topic's messages: the pages need not be watched
            twin = TwinRun(stream, rng_seed=rng.getrandbits(62), watch_pages=False, **options)
            with prepare(twin):
                return transcript(asyncio.run(twin.run(steps)))

        return run

    return build


def check_path_audit(
    mechanism: Mechanism,
    pair: tuple[Sequence[Step], Sequence[Step]],
    epsilon: float,
    *,
    seed: int,
    samples: int,
    name: str,
    broken: bool,
) -> None:
    """Audit ``mechanism`` on ``pair`` against ``(epsilon, 0)`` at confidence 0.999: a broken variant
    fails the audit; the honest path passes, its lower bound on ε at most ``epsilon``."""
    result = audit(
        mechanism(seeded(seed)),
        pair,
        PrivacyGuarantee(epsilon, 0.0),
        samples=samples,
        confidence=0.999,
        name=name,
    )
    print(
        f"{name}: epsilon lower bound {result.epsilon_lower_bound:.3f} (claimed {epsilon}), "
        f"estimate {result.epsilon_estimate:.3f}"
    )
    assert (not result.passed) is broken, result
    if not broken:
        assert result.epsilon_lower_bound <= epsilon
