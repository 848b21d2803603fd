"""The vector learner ``"halfspaces"``: the exponential mechanism over halfspaces fitted privately.

* :mod:`.learner`: :class:`~.learner.HalfspaceLearner`, its schedule and theorem sample size;
* :mod:`.model`: the released :class:`~.model.HalfspaceModel`;
* :mod:`.net`: the public net of halfspaces and the O(n)-per-normal scoring of its members;
* :mod:`.direction`: the normals fitted privately (features, direction, cone);
* :mod:`.audit_specs`: its privacy-audit specs (exact laws on a tight pair, broken variants).
"""
