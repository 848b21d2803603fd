"""The generic private learner ``"generic"``: the exponential mechanism over a finite class [S Thm 3.3].

* :mod:`.learner`: :class:`~.learner.GenericLearner`, its exact sampler and theorem sample size;
* :mod:`.error_levels`: the class split by empirical error into exactly counted levels, so the
  mechanism never enumerates the class (the proper learner's last stage uses it too);
* :mod:`.audit_spec`: its privacy-audit spec (worst-case pair, broken variants).
"""
