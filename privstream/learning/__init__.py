"""Pure algorithms: hypothesis classes, dimensions, the SOA, DP mechanisms and learners.

This layer imports nothing else of the project and does no I/O."""
