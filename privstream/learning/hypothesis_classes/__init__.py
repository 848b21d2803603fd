"""Hypothesis classes on ``{0..N-1}`` with 0/1 labels, named by spec strings.

* ``thresholds:N``: ``1[x >= t]``, ``t = 0..N``.
* ``points:N``: ``1[x = i]``, ``i = 0..N-1``, plus the all-zero function.
* ``intervals:N``: ``1[a <= x < b]``, ``0 <= a <= b <= N`` (empty once).
* a ``.npy`` / ``.csv`` file: a finite class, rows = hypotheses (deduplicated).

Structured classes work for any N (no enumeration); each class gives version spaces for the
SOA and serialises hypotheses canonically (:mod:`privstream.learning.hypotheses`).
"""

from privstream.learning.hypothesis_classes.base import HypothesisClass, VersionSpace, floor_log2
from privstream.learning.hypothesis_classes.finite import FiniteClass, load_class_file
from privstream.learning.hypothesis_classes.intervals import Intervals, interval_hypothesis
from privstream.learning.hypothesis_classes.points import Points, point_hypothesis
from privstream.learning.hypothesis_classes.spec import parse_class_spec, parse_size
from privstream.learning.hypothesis_classes.thresholds import Thresholds, threshold_hypothesis

StructuredClass = Thresholds | Points | Intervals

__all__ = [
    "FiniteClass",
    "HypothesisClass",
    "Intervals",
    "Points",
    "StructuredClass",
    "Thresholds",
    "VersionSpace",
    "floor_log2",
    "interval_hypothesis",
    "load_class_file",
    "parse_class_spec",
    "parse_size",
    "point_hypothesis",
    "threshold_hypothesis",
]
