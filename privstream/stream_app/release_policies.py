"""The release agent's policies, from the settings: each releasing stream's products (the learner and
the sanitizer built with their parameters), costs and lifetime bound, anchored where the ledger
registered the stream. The rule: a policy is a function of the configuration (and the ledger's
public registration time) only, never of data.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from privstream.agents.ledger_port import PrivacyCost
from privstream.agents.online import OnlineStream
from privstream.agents.releases import Product, ReleasePolicy
from privstream.learning.errors import InvariantError
from privstream.learning.hypothesis_classes import HypothesisClass
from privstream.learning.planning import window_too_small
from privstream.learning.private_learners import PrivateLearner, make_learner
from privstream.learning.private_learners.one_vs_rest import OneVsRestLearner
from privstream.learning.private_learners.vector_base import VectorLearner, make_vector_learner
from privstream.learning.sanitizers import make_sanitizer
from privstream.schemas import LifetimeBound
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig

log = logging.getLogger(__name__)


def release_policy(stream: StreamConfig, hclass: HypothesisClass | None) -> ReleasePolicy:
    """The release agent's policy for a stream, with its learner built from the settings."""
    config = stream.release
    if config is None:
        raise InvariantError(f"invariant broken: stream {stream.name} has a release configuration")
    params = dict(config.learner_params)
    learner: PrivateLearner | VectorLearner
    if stream.kind == "vector":
        learner = make_vector_learner(config.learner, **params)
        if stream.classes != 2:  # K halfspaces, one per class against the rest, at ε/K each
            learner = OneVsRestLearner(stream.classes, learner)
        alpha, beta = 0.25, 0.25  # the vector learners take their accuracy targets as parameters
    else:
        alpha, beta = float(params.pop("alpha", 0.25)), float(params.pop("beta", 0.25))
        learner = make_learner(config.learner, **params)
    products = [
        Product(
            "hypotheses",
            learner,
            config.learner_epsilons[0],
            config.delta,
            vector=stream.kind == "vector",
            level_epsilon=tuple(config.learner_epsilons),
            level_delta=tuple(config.learner_deltas),
        )
    ]
    if config.sanitizer is not None:
        products.append(
            Product(
                "sanitized",
                make_sanitizer(config.sanitizer, **config.sanitizer_params),
                config.sanitizer_epsilons[0],
                config.sanitizer_deltas[0],
                labelled=config.sanitizer_labelled,
                level_epsilon=tuple(config.sanitizer_epsilons),
                level_delta=tuple(config.sanitizer_deltas),
            )
        )
    return ReleasePolicy(
        stream_id=stream.name,
        hypothesis_class=hclass,
        feature_bounds=np.array(stream.feature_bounds, dtype=np.float64) if stream.feature_bounds else None,
        products=tuple(products),
        alpha=alpha,
        beta=beta,
        window_kind=config.window.kind,
        window_size=config.window.size,
        window_seconds=config.window.seconds,
        allowed_lateness_seconds=config.window.allowed_lateness_seconds,
        publish_delay_seconds=config.window.publish_delay_seconds,
        privacy_unit=config.privacy_unit,
        user_contribution_bound=config.user_contribution_bound,
        expected_size=config.expected_size,
        top_level=config.top_level,
        max_node_examples=config.max_node_examples,
        quality_epsilon=config.quality_epsilon,
        partitioned=stream.partitioned,
        columns=tuple(stream.encoder.to_dicts()) if stream.encoder is not None else (),
        lifetime=lifetime_bound(config),  # the user level's is set with the deployment's user budget
    )


def lifetime_bound(config: ReleaseConfig, user_budget: PrivacyCost | None = None) -> LifetimeBound:
    """The certificate's lifetime bound: what one example (or user) can lose to all releases.

    Example level: each example lies in exactly one node per level (the nodes of a level are
    disjoint), so parallel composition within a level and sequential composition over the L+1
    levels bound its loss by the sum over the levels of (learner ε + sanitizer ε), for ever.
    User level: a user's examples can lie in every node of a level, so the individual privacy
    filter (Feldman & Zrnic 2021) bounds each user by their deployment-wide budget.
    """
    if config.privacy_unit == "user":
        budget = user_budget or PrivacyCost(config.epsilon_budget, config.delta_budget)
        return LifetimeBound(
            epsilon=budget.epsilon,
            delta=budget.delta,
            epsilon_budget=budget.epsilon,
            delta_budget=budget.delta,
            top_level=config.top_level,
            level_epsilon=[
                e + (config.sanitizer_epsilons[j] if config.sanitizer else 0.0)
                for j, e in enumerate(config.learner_epsilons)
            ],
            rule=(
                "individual privacy filter (Feldman & Zrnic 2021): each user is charged only by the "
                "releases that include them, and excluded once their lifetime budget "
                f"{budget.epsilon:g} (all streams of the deployment) would be passed; each release is "
                "epsilon-DP for a user's presence, so the product of the ratios stays within "
                f"e^{budget.epsilon:g}"
            ),
        )
    epsilon, delta = config.lifetime_cost
    per_level = [
        e + (config.sanitizer_epsilons[j] if config.sanitizer else 0.0)
        for j, e in enumerate(config.learner_epsilons)
    ]
    terms = " + ".join(f"{e:g}" for e in per_level)
    quality = ""
    if config.quality_epsilon is not None:
        levels = config.top_level + 1
        terms += f" + {levels} x {config.quality_epsilon:g}"
        quality = (
            f"; each release is scored on the next window's examples (an epsilon {config.quality_epsilon:g} "
            f"error count), a window for at most the {levels} levels whose nodes end just before it"
        )
    return LifetimeBound(
        epsilon=epsilon,
        delta=delta,
        epsilon_budget=config.epsilon_budget,
        delta_budget=config.delta_budget,
        top_level=config.top_level,
        level_epsilon=per_level,
        quality_epsilon=config.quality_epsilon,
        rule=(
            f"parallel composition over the disjoint nodes of a level (each example is in exactly one "
            f"node per level), sequential composition over the {config.top_level + 1} levels{quality}: "
            f"sum over levels of epsilon_j = {terms} = {epsilon:g} <= epsilon_budget "
            f"{config.epsilon_budget:g} per example, for ever"
        ),
    )


def time_window_tick(policies: dict[str, ReleasePolicy]) -> float:
    """Seconds between two looks at the clock: a tenth of the shortest time window, at most 1 s."""
    return min([1.0, *(p.window_seconds / 10 for p in policies.values() if p.window_seconds)])


def release_policies(
    settings: Settings, streams: dict[str, OnlineStream], registered: dict[str, float] | None
) -> dict[str, ReleasePolicy]:
    """The releasing streams' policies, anchored where the ledger registered each stream (the
    schedule's public start; ``None``: no ledger), with the per-user budget at the user level."""
    policies = {
        s.name: release_policy(s, streams[s.name].hypothesis_class if s.name in streams else None)
        for s in settings.streams
        if s.release
    }
    if registered is None:
        return policies
    user_budget = (
        PrivacyCost(settings.user_epsilon_budget, settings.user_delta_budget)
        if settings.user_epsilon_budget is not None
        else None
    )
    for s in settings.streams:
        if s.release is None:
            continue
        per_user = s.release.privacy_unit == "user"
        policies[s.name] = dataclasses.replace(
            policies[s.name],
            schedule_start=registered[s.name],
            user_budget=user_budget if per_user else None,
            lifetime=lifetime_bound(s.release, user_budget) if per_user else policies[s.name].lifetime,
        )
    return policies


def warn_of_small_windows(policies: dict[str, ReleasePolicy]) -> None:
    """Warn of a count window too small for its learner to be useful (simulated on synthetic data
    of the class, once per configuration)."""
    for p in policies.values():
        if p.hypothesis_class is None or p.window_kind != "count":
            continue
        product = p.products[0]
        why = window_too_small(
            product.algorithm,
            p.hypothesis_class,
            epsilon=product.epsilon,
            delta=product.delta,
            alpha=p.alpha,
            beta=p.beta,
            window_size=p.window_size,
        )
        if why:
            log.warning("stream %s: window too small to be useful: %s", p.stream_id, why)
