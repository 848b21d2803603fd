"""Differentially-private learners (replace-one neighbours) behind one interface.

* :class:`LearnerResult`, :class:`PrivateLearner`, :func:`make_learner` (registry ``LEARNERS``,
  in :mod:`.base`); the vector learners' interface and registry are in :mod:`.vector_base`.
* One folder per learner, with its helpers and its audit spec: :mod:`.generic`, :mod:`.proper`,
  :mod:`.global_stability`.
* Re-exported here: ``"generic"``, :class:`GenericLearner`, the exponential mechanism over the
  class [S Thm 3.3], exact and without enumerating the class (:func:`error_levels`; intervals
  in O(n log n) by :mod:`.generic.interval_sampler`), with its theorem sample size
  :func:`generic_sample_size`.
"""

from privstream.learning.private_learners.base import LEARNERS, LearnerResult, PrivateLearner, make_learner
from privstream.learning.private_learners.generic.error_levels import ErrorLevels, error_levels
from privstream.learning.private_learners.generic.learner import (
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
