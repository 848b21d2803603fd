"""The generic private learner ``"generic"``: the exponential mechanism over a finite class [S Thm 3.3].

* :mod:`.learner`: :class:`~.learner.GenericLearner`, its exact sampler and theorem sample size;
* :mod:`.error_levels`: the class split by empirical error into exactly counted levels, so the
  mechanism never enumerates the class (the proper learner's last stage uses it too);
* :mod:`.interval_sampler`: the mechanism over ``intervals:N`` in O(n log n), by exact rejection
  from weights computed in :mod:`.extended_floats` (floats with an unbounded exponent and a
  proved error), never counting the O(k²) blocks;
* :mod:`.audit_specs`: its privacy-audit spec (worst-case pair, broken variants).
"""
