"""Sanitized releases: a synthetic distribution answering every query of a class, with its certificate.

Published on the ``sanitized`` topic (or printed by ``privstream sanitize``). ``distribution`` is
the canonical compact form of :class:`privstream.learning.sanitizers.SyntheticDistribution`
(``{"domain", "labelled", "edges", "weights"}``: interior block boundaries on the class's public
domain and one weight per block, or a ``[w0, w1]`` pair per block when ``labelled``). The answer
to query h is ``Pr[h(x) = 1]`` (or ``Pr[h(x) = y]`` when labelled) under that distribution.
``certificate.proper`` is always False here: the release is a distribution, not a hypothesis.
"""

from __future__ import annotations

from pydantic import Field

from privstream.schemas.numbers import JsonSafeDict, PublicMessage
from privstream.schemas.releases import RELEASE_SCHEMA_VERSION, Certificate


class SanitizedRelease(PublicMessage):
    """A private synthetic distribution for a stream's class (private query release, GGKM21 Def 2.3)."""

    schema_version: int = RELEASE_SCHEMA_VERSION
    stream_id: str
    hypothesis_class: str = Field(description="the class spec string, e.g. 'thresholds:65536'")
    distribution: JsonSafeDict = Field(
        description="canonical form: {domain, labelled, edges (interior block boundaries), weights}; "
        "domain and edges beyond 2^53 are decimal strings (privstream.schemas.numbers)"
    )
    labelled: bool = Field(description="answers are Pr[h(x) = y] over (x, y) instead of Pr[h(x) = 1]")
    certificate: Certificate
