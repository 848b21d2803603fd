"""Sanitizers (private query release): a synthetic distribution answering every query of a class.

* :class:`SanitizerResult`, :class:`Sanitizer`, :func:`make_sanitizer` (registry ``SANITIZERS``).
* :class:`SyntheticDistribution`: the public release (weights over domain blocks).
* ``"mwem"``: :class:`MWEMSanitizer` (Hardt–Ligett–McSherry 2012), exact selection and noise,
  total (ε, δ) by basic or zCDP composition, blocks instead of a dense histogram.
* ``"fooling"``: :class:`FoolingSanitizer` (GGKM21 Appendix C, made concrete): MW generator against
  a private learner as discriminator, with subsampling and advanced composition; :func:`fooling_sample_size`.
* ``"hierarchical"``: :class:`HierarchicalSanitizer` for thresholds, intervals and points: a PrivTree
  partition (:mod:`.hierarchical.privtree`, exact decisions) and consistent noisy counts on a tree
  over its leaves (:mod:`.hierarchical.consistent_tree`); sparse, domains up to 2^62, the most
  accurate on the 1-D benchmarks.
"""

from privstream.learning.sanitizers.base import (
    SANITIZERS,
    Sanitizer,
    SanitizerInputError,
    SanitizerResult,
    make_sanitizer,
)
from privstream.learning.sanitizers.distribution import DistributionFormatError, SyntheticDistribution

__all__ = [
    "SANITIZERS",
    "DistributionFormatError",
    "Sanitizer",
    "SanitizerInputError",
    "SanitizerResult",
    "SyntheticDistribution",
    "make_sanitizer",
]
