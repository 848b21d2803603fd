"""The release path checks each learner's guarantee against its charge before publishing.

A mutant learner that spends more ε than the release is charged (or states its guarantee under
another neighbouring relation) is never published: neither its fit's release nor its default (the
same algorithm on the public stand-in); the operators get an ERROR and a count. Honest learners'
certificates state the guarantee and its derivation as data.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from privstream.learning.private_learners import make_learner
from privstream.schemas import HypothesisRelease
from privstream.schemas.releases import RELEASE_SCHEMA_VERSION
from tests.agents.test_releases import (
    Published,
    RecordingMetrics,
    examples,
    feed,
    make_agent,
    observe,
    policy,
    timed,
)
from tests.agents.test_twins import steps, time_stream
from tests.agents.twins import T0, FakeClock, assert_twins, example, move_clock, twins


class Overspends:
    """The generic learner run at ``factor`` times the ε it is given (and saying so, honestly),
    on every input or, with ``poison``, only on inputs holding that point (real data, never the
    stand-in)."""

    def __init__(self, factor: float = 2.0, poison: int | None = None):
        self.inner = make_learner("generic")
        self.name = self.inner.name
        self.factor, self.poison = factor, poison

    def fit(self, hclass, xs, ys, *, epsilon, **kwargs):
        if self.poison is None or self.poison in list(xs):
            epsilon *= self.factor
        return self.inner.fit(hclass, xs, ys, epsilon=epsilon, **kwargs)


class ClaimsReplaceOne:
    """The generic learner whose result says replace-one whatever it was asked for."""

    def __init__(self):
        self.inner = make_learner("generic")
        self.name = self.inner.name

    def fit(self, hclass, xs, ys, **kwargs):
        return dataclasses.replace(
            self.inner.fit(hclass, xs, ys, **kwargs), neighbouring_relation="replace-one"
        )


def withheld_errors(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "withheld" in r.getMessage()
    ]


async def test_a_learner_that_spends_more_than_charged_is_never_published(caplog):
    """Count windows (no deadline): each window's fit spends 2ε; nothing goes out, each is an alert."""
    publish, metrics = Published(), RecordingMetrics()
    agent = make_agent({"s": policy(learner=Overspends())}, publish=publish, metrics=metrics)
    with caplog.at_level(logging.ERROR):
        await feed(agent, examples(200))
    assert publish.messages == []
    assert metrics.events["guarantee_refused"] == 2 and metrics.events["released"] == 0
    errors = withheld_errors(caplog)
    assert len(errors) == 2 and "spent epsilon 2 where 1 was charged" in errors[0]
    assert not [e for e in agent.ledger.entries("s") if e.published]


@pytest.mark.parametrize("poison", [None, 777], ids=["always", "only-on-the-data"])
async def test_with_a_deadline_neither_the_default_nor_the_fit_of_an_overspending_learner_goes_out(
    poison, caplog
):
    """Time windows with a publication slot: the default is computed first. A learner spending 2ε
    always is refused at its default; one spending 2ε only on the real data (its default, on the
    empty stand-in, is within the charge) is refused at its fit, and the default is withheld too."""
    publish, metrics = Published(), RecordingMetrics()
    clock = FakeClock(T0, simulated=True)
    p = policy(
        learner=Overspends(poison=poison),
        window_kind="time",
        window_seconds=60.0,
        expected_size=50,
        publish_delay_seconds=30.0,
    )
    agent = make_agent({"s": p}, publish=publish, metrics=metrics, clock=clock, simulated=True)
    batch = timed(examples(10), T0)
    first, partition, offset = batch[0]
    batch[0] = (first.model_copy(update={"x": 777}), partition, offset)  # the poison is in the data
    with caplog.at_level(logging.ERROR):
        observe(agent, batch)
        await move_clock(clock, T0 + 61)
        await agent.tick()
        await move_clock(clock, T0 + 89.9)
        await move_clock(clock, T0 + 120)
        await agent.drain()
    assert publish.messages == [], "an overspending learner's release (or its default) was published"
    assert metrics.events["guarantee_refused"] == 1
    which = "default" if poison is None else "fit"
    assert [e for e in withheld_errors(caplog) if f"the {which}: " in e]


async def test_a_guarantee_under_another_relation_is_refused(caplog):
    """n is private (time windows): the learner must hold under add/remove-one; replace-one is refused."""
    publish, metrics = Published(), RecordingMetrics()
    clock = FakeClock(T0)
    p = policy(learner=ClaimsReplaceOne(), window_kind="time", window_seconds=60.0, expected_size=20)
    agent = make_agent({"s": p}, publish=publish, metrics=metrics, clock=clock)
    with caplog.at_level(logging.ERROR):
        observe(agent, timed(examples(10), T0))
        clock.now = T0 + 60
        await agent.tick()
        await agent.drain()
    assert publish.messages == [] and metrics.events["guarantee_refused"] == 1
    assert "holds under replace-one, the release needs add-remove-one" in withheld_errors(caplog)[0]


async def test_the_certificate_states_the_guarantee_and_its_derivation_as_data():
    """User level (k = 2) in capped time windows (n private): the learner runs at ε/4; the
    certificate carries it back to one user through both steps, within the charge."""
    publish = Published()
    clock = FakeClock(T0)
    p = policy(
        privacy_unit="user",
        user_contribution_bound=2,
        window_kind="time",
        window_seconds=60.0,
        expected_size=20,
        max_node_examples=40,
    )
    agent = make_agent({"s": p}, publish=publish, clock=clock)
    observe(agent, timed(examples(100, user=lambda i: f"u{i % 10}"), T0))
    clock.now = T0 + 60
    await agent.tick()
    await agent.drain()
    (release,) = publish.releases()
    g = release.certificate.guarantee
    assert g is not None
    assert [(s.step, s.k) for s in g.derivation] == [("group-privacy", 2), ("cap-replacement", 2)]
    assert g.algorithm_epsilon == pytest.approx(0.25) and g.unit == "user"
    assert g.neighbouring_relation == "add-remove-one"
    assert g.epsilon == pytest.approx(
        release.certificate.epsilon
    ) and g.epsilon <= release.certificate.epsilon * (1 + 1e-9)
    assert release.certificate.parameters["algorithm_epsilon"] == g.algorithm_epsilon


async def test_an_example_level_count_window_states_no_derivation():
    publish = Published()
    agent = make_agent({"s": policy()}, publish=publish)
    await feed(agent, examples(100))
    (release,) = publish.releases()
    g = release.certificate.guarantee
    assert g is not None and g.derivation == [] and g.unit == "example"
    assert (g.epsilon, g.neighbouring_relation) == (1.0, "replace-one")
    version = HypothesisRelease.model_validate_json(publish.messages[0][1]).schema_version
    assert version == RELEASE_SCHEMA_VERSION == 4


async def test_twins_of_an_overspending_learner_both_publish_nothing():
    """The refusal is a function of the configuration for a learner that always overspends:
    neighbouring inputs give the same public outputs (no release at all) and the same ledger."""
    stream = time_stream()
    a, b = await twins(stream, steps(), steps({1: [example(650, at=T0 + 65)]}), learner=Overspends())
    assert_twins(a, b)
    assert not [m for m in a.messages if m["topic"] == "hypotheses"]


async def test_a_subscriber_refuses_a_certificate_whose_guarantee_exceeds_its_charge():
    """The client's certificate check (before any prediction) reads the guarantee: the service's
    releases pass it; the same release with the guarantee raised past the charge does not."""
    import json

    from privstream_client.release import Release, certificate_problem

    publish = Published()
    agent = make_agent({"s": policy()}, publish=publish)
    await feed(agent, examples(100))
    data = json.loads(publish.messages[0][1])
    assert certificate_problem(Release.from_json(data)) is None
    data["certificate"]["guarantee"]["epsilon"] = 2 * data["certificate"]["epsilon"]
    assert "exceeds the charge" in (certificate_problem(Release.from_json(data)) or "")
