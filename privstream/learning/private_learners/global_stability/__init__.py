"""The global-stability private learner ``"global-stability"`` of Bun, Livni and Moran (FOCS 2020).

* :mod:`.algorithm_g`: Algorithm G, the globally-stable learner for Littlestone classes (§2);
* :mod:`.learner`: Algorithm M over G (stable histogram, then the exponential mechanism) and
  :class:`~.learner.GlobalStabilityLearner` (§3.3);
* :mod:`.audit_specs`: its privacy-audit spec (membership-inference canary, broken histograms).
"""
