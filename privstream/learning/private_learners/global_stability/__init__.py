"""The global-stability private learner ``"global-stability"`` of Bun–Livni–Moran (BLM20; ABLMM22).

* :mod:`.algorithm_g`: Algorithm G, the globally-stable learner for Littlestone classes (ABLMM22 Sec 5.2);
* :mod:`.learner`: Algorithm M over G (stable histogram, then the exponential mechanism) and
  :class:`~.learner.GlobalStabilityLearner` (ABLMM22 Thm 30);
* :mod:`.audit_spec`: its privacy-audit spec (membership-inference canary, broken histograms).
"""
