"""Differentially-private learners (replace-one neighbours) behind one interface.

* :class:`LearnerResult`, :class:`PrivateLearner`, :func:`make_learner` (registry by name).
* ``"generic"``: :class:`GenericLearner`, the exponential mechanism over the class [S Thm 3.3],
  exact and without enumerating the class (:func:`error_levels`; intervals by
  :mod:`~privstream.learning.private_learners.interval_sampler`, O(n log n)), with its theorem
  sample size :func:`generic_sample_size`.
"""

from privstream.learning.private_learners.base import LEARNERS, LearnerResult, PrivateLearner, make_learner
from privstream.learning.private_learners.blocks import ErrorLevels, error_levels
from privstream.learning.private_learners.generic import (
    MECHANISM,
    GenericLearner,
    generic_sample_size,
    level_probabilities,
    output_law,
    sample_hypothesis,
)

__all__ = [
    "LEARNERS",
    "MECHANISM",
    "ErrorLevels",
    "GenericLearner",
    "LearnerResult",
    "PrivateLearner",
    "error_levels",
    "generic_sample_size",
    "level_probabilities",
    "make_learner",
    "output_law",
    "sample_hypothesis",
]
