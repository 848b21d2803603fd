"""The private quality estimate of each hypothesis release in the service: its accounting (the
lifetime bound, the configuration the ledger keeps) and its path (scored on the next window,
charged there, published with that window's release)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from privstream.stream_app.service import lifetime_bound
from privstream.stream_app.settings import ReleaseConfig, StreamConfig
from privstream.stream_app.store.privacy_config import differences, only_lowers, privacy_configuration


def release(**overrides: object) -> ReleaseConfig:
    return ReleaseConfig(**{"epsilon": 0.5, "epsilon_budget": 2.0, "top_level": 1, **overrides})


def test_each_level_can_score_a_window_once_so_the_lifetime_cost_counts_top_level_plus_one():
    config = release(quality_epsilon=0.2)
    assert config.quality_epsilons == [0.2, 0.2]
    assert config.lifetime_cost == pytest.approx((0.5 + 0.5 + 0.2 + 0.2, 0.0))
    assert release().lifetime_cost == pytest.approx((1.0, 0.0))  # off by default: nothing added


def test_the_default_learner_share_leaves_room_for_the_estimates():
    config = ReleaseConfig(epsilon_budget=1.2, top_level=1, quality_epsilon=0.1)
    assert config.learner_epsilons == pytest.approx([0.5, 0.5])
    assert config.lifetime_cost[0] == pytest.approx(1.2)


def test_estimates_past_the_budget_are_refused_naming_them():
    with pytest.raises(ValidationError, match=r"quality estimates \[0.6, 0.6\].*epsilon_budget 2"):
        release(quality_epsilon=0.6)


def test_the_user_level_is_refused_in_one_line():
    with pytest.raises(ValidationError, match="quality_epsilon applies only to privacy_unit 'example'"):
        ReleaseConfig(
            epsilon=0.5,
            epsilon_budget=2.0,
            privacy_unit="user",
            user_contribution_bound=2,
            expected_size=10,
            window={"kind": "time", "seconds": 60},
            quality_epsilon=0.1,
        )


def test_the_certificate_lifetime_bound_states_the_estimates():
    bound = lifetime_bound(release(quality_epsilon=0.2))
    assert bound.epsilon == pytest.approx(1.4) and bound.quality_epsilon == 0.2
    assert "2 x 0.2" in bound.rule and "next window" in bound.rule
    assert lifetime_bound(release()).quality_epsilon is None


def test_the_ledger_keeps_the_estimates_epsilon_and_lets_it_be_lowered_only():
    stream = StreamConfig(name="s", hypothesis_class="thresholds:64", release=release(quality_epsilon=0.2))
    config = privacy_configuration(stream)
    assert config["quality_epsilon"] == 0.2
    plain = privacy_configuration(StreamConfig(name="s", hypothesis_class="thresholds:64", release=release()))
    assert "quality_epsilon" not in plain  # a ledger kept before the option compares equal
    assert only_lowers(config, {**config, "quality_epsilon": 0.1})
    assert not only_lowers(config, {**config, "quality_epsilon": 0.3})
    assert differences(plain, config) == {"quality_epsilon": (None, 0.2)}
    assert not only_lowers(plain, config)  # turning estimates on needs an acceptance
