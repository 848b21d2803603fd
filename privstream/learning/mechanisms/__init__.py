"""Differentially-private mechanisms with exact samplers and privacy maps.

One family per module; every mechanism validates its parameters (:class:`PrivacyParameterError`),
returns its :class:`~privstream.learning.accounting.PrivacyGuarantee` from ``guarantee()``, and draws
only from an injectable :class:`~privstream.learning.randomness.RandomSource` (default: OS CSPRNG).
"""

from privstream.learning.errors import PrivacyParameterError
from privstream.learning.mechanisms._common import Mechanism
from privstream.learning.mechanisms.exponential import Block, ExponentialMechanism, PermuteAndFlip
from privstream.learning.mechanisms.gaussian import DiscreteGaussianMechanism, GaussianMechanism
from privstream.learning.mechanisms.histogram import StableHistogram
from privstream.learning.mechanisms.laplace import DiscreteLaplaceMechanism, LaplaceMechanism
from privstream.learning.mechanisms.quantile import PrivateBounds, PrivateQuantile, private_bounds
from privstream.learning.mechanisms.sparse_vector import AboveThreshold

__all__ = [
    "AboveThreshold",
    "Block",
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Mechanism",
    "PermuteAndFlip",
    "PrivacyParameterError",
    "PrivateBounds",
    "PrivateQuantile",
    "StableHistogram",
    "private_bounds",
]
