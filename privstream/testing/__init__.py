"""The algorithm contract, shipped: check a learner or sanitizer of your own with one call.

Register the algorithm (an entry point of the group ``privstream.algorithms``: see
:mod:`privstream.learning.algorithms`) with an audit spec under the same name, then::

    from privstream.testing import check_algorithm
    check_algorithm("learner", "my-learner")  # AssertionError naming the first check that fails

The checks (:mod:`privstream.testing.checks`) run the algorithm through the offline CLI and the
service's release agent on the same seeded window and compare them, validate the releases
against the JSON Schemas, release a window of zero examples, run the public inputs a publication
slot is timed on, and audit the algorithm's privacy empirically (and exactly, where its spec
gives the output law).
"""

from privstream.testing.checks import CHECKS, check_algorithm
from privstream.testing.releases import Algorithm, registered

__all__ = ["CHECKS", "Algorithm", "check_algorithm", "registered"]
