"""The JSON number rule: no number in a public message exceeds 2^53 in magnitude."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from privstream.learning.hypotheses import hypothesis_from_dict, hypothesis_from_runs
from privstream.learning.hypothesis_classes import parse_class_spec
from privstream.learning.private_learners import make_learner
from privstream.learning.randomness import seeded
from privstream.learning.sanitizers import SyntheticDistribution
from privstream.schemas import Certificate, HypothesisRelease, SanitizedRelease, WindowInfo
from privstream.schemas.numbers import MAX_SAFE_INTEGER, json_safe, theorem_size_fields
from privstream.stream_app.sdk import Release, SanitizedView

HUGE = 10**2400  # the order of global stability's theorem sample size


def numbers(obj: Any) -> list[int | float]:
    """Every number in a parsed JSON value (booleans are not numbers)."""
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in numbers(v)]
    return []


def certificate(**overrides: Any) -> Certificate:
    fields: dict[str, Any] = dict(
        mechanism="m",
        epsilon=1.0,
        delta=0.0,
        neighbouring_relation="replace-one",
        privacy="information-theoretic",
        proper=True,
        accuracy_guarantee_holds=False,
        theorem_sample_size=HUGE,
        randomness="seeded",
        library_version="test",
        window=WindowInfo(window_id="w", kind="count", start=0, end=2000),
        sample_size=2000,
        parameters={
            "class_size": 2**63 + 1,
            "domain": 2**63,
            "bound": math.inf,
            "nested": {"n": [2**60, 3]},
            "numpy": np.int64(2**62),
            "small": 12,
            "rate": 0.25,
        },
        dp_outputs={"noisy_count": -(2**55), "transcript": [{"query": {"domain": 2**63}}]},
    )
    fields.update(overrides)
    return Certificate(**fields)


def test_a_release_with_huge_numbers_stays_within_2_53_everywhere() -> None:
    hclass = parse_class_spec("thresholds:2^62")  # the largest domain
    h = hypothesis_from_runs(2**62, 0, [2**61 + 12345])  # a threshold no double can hold
    release = HypothesisRelease(
        stream_id="s", hypothesis_class=hclass.spec, hypothesis=h.to_dict(), certificate=certificate()
    )
    text = release.model_dump_json()
    parsed = json.loads(text)
    assert all(abs(x) <= MAX_SAFE_INTEGER and math.isfinite(x) for x in numbers(parsed))
    cert = parsed["certificate"]
    assert cert["theorem_sample_size"] is None and cert["theorem_sample_size_log10"] == 2400.0
    assert cert["parameters"]["class_size"] == str(2**63 + 1) and cert["parameters"]["bound"] == "inf"
    assert cert["parameters"]["numpy"] == str(2**62) and cert["parameters"]["small"] == 12
    assert cert["dp_outputs"]["noisy_count"] == str(-(2**55))
    # it validates again, and a subscriber reads the exact hypothesis back
    assert HypothesisRelease.model_validate_json(text) == release
    assert hypothesis_from_dict(parsed["hypothesis"]) == h
    assert Release.from_json(text).predict(2**61 + 12345) == 1 and Release.from_json(text).predict(2**61) == 0


def test_a_sanitized_release_on_a_huge_domain_round_trips() -> None:
    dist = SyntheticDistribution(2**61, [0, 2**60 + 3, 2**61], np.array([0.25, 0.75]))
    release = SanitizedRelease(
        stream_id="s",
        hypothesis_class="thresholds:2^61",
        labelled=False,
        distribution=dist.to_dict(),
        certificate=certificate(),
    )
    parsed = json.loads(release.model_dump_json())
    assert all(abs(x) <= MAX_SAFE_INTEGER for x in numbers(parsed))
    assert SanitizedView.from_json(release.model_dump_json()).distribution == dist


def test_a_real_learner_release_with_its_theorem_size() -> None:
    hclass = parse_class_spec("intervals:2^62")
    res = make_learner("generic").fit(
        hclass, np.array([5, 2**61]), np.array([1, 0]), epsilon=1.0, rng=seeded(0)
    )
    release = HypothesisRelease(
        stream_id="s",
        hypothesis_class=hclass.spec,
        hypothesis=res.hypothesis.to_dict(),
        certificate=certificate(
            parameters=res.parameters, dp_outputs=res.dp_outputs, theorem_sample_size=res.theorem_sample_size
        ),
    )
    parsed = json.loads(release.model_dump_json())
    assert all(abs(x) <= MAX_SAFE_INTEGER for x in numbers(parsed))
    assert parsed["certificate"]["parameters"]["class_size"] == str(hclass.size)  # ~2^123
    assert parsed["certificate"]["theorem_sample_size"] == res.theorem_sample_size  # small: exact
    assert hypothesis_from_dict(parsed["hypothesis"]) == res.hypothesis


def test_typed_fields_beyond_the_range_are_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal"):
        certificate(sample_size=2**60)
    with pytest.raises(ValidationError):
        certificate(epsilon=math.inf)
    with pytest.raises(ValidationError, match="less than or equal"):
        certificate(theorem_sample_size=2.0**60, theorem_sample_size_log10=18.06)


def test_theorem_size_fields() -> None:
    assert theorem_size_fields(None) == (None, None)
    assert theorem_size_fields(MAX_SAFE_INTEGER) == (float(MAX_SAFE_INTEGER), 15.955)
    assert theorem_size_fields(MAX_SAFE_INTEGER + 1) == (None, 15.955)
    assert certificate(theorem_sample_size=41_818_685).theorem_sample_size == 41_818_685


def test_json_safe_is_idempotent_and_keeps_types_it_can() -> None:
    value = {"a": [1, 2.5, True, None, "x", (2**70, -math.inf)], "b": np.float64(math.nan)}
    once = json_safe(value)
    assert once == {"a": [1, 2.5, True, None, "x", [str(2**70), "-inf"]], "b": "nan"}
    assert json_safe(once) == once
