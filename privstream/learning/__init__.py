"""Pure algorithms: hypothesis classes, dimensions, the SOA, DP mechanisms, learners and sanitizers.

This layer imports nothing else of the project and does no I/O. Shared ground lies flat here
(errors, domain, hypotheses, randomness, accounting, soa, dimensions); every folder is one
concept: ``hypothesis_classes/``, ``mechanisms/``, ``audit/`` (the privacy audit's harness and
registry), ``private_learners/`` (one folder per learner), ``consistent/`` (learners on feature
vectors) and ``sanitizers/``. Each algorithm's audit spec lives next to its code.
"""
