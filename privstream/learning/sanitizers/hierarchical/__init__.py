"""The hierarchical sanitizer and what only it uses.

* ``privtree.py``: the private partition of the domain (PrivTree, Zhang, Xiao & Xie, SIGMOD 2016);
* ``consistent_tree.py``: noisy counts on a b-ary tree over the partition's leaves, made consistent
  (children sum to parents, counts non-negative);
* ``sanitizer.py``: :class:`HierarchicalSanitizer`, the two together as a synthetic distribution;
* ``audit_specs.py``: its audit specs (exact output laws for the partition, Monte Carlo for the rest).
"""

from privstream.learning.sanitizers.hierarchical.sanitizer import HierarchicalSanitizer, privacy_split

__all__ = ["HierarchicalSanitizer", "privacy_split"]
