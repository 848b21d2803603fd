"""The single source of randomness for every privacy mechanism, and the exact samplers built on it.

Why this module exists (production draws must be secure; naive float samplers are attackable):

* Production draws come from the operating system's CSPRNG (``secrets``); tests and audits inject a
  seeded source. Every mechanism takes a :class:`RandomSource` and nothing else draws randomness.
* A release reserved in the privacy ledger draws from :func:`derived`: a deterministic,
  cryptographically secure stream (HMAC-SHA256 in counter mode) keyed by the reservation's secret
  32-byte seed, so a retry after a crash reproduces the release bit for bit instead of drawing
  fresh noise. Its output is indistinguishable from uniform bits to anyone who
  does not know the seed (HMAC-SHA256 as a pseudorandom function, NIST SP 800-108 counter mode),
  so the privacy guarantee holds against computationally bounded adversaries as long as the seed
  stays secret (the ledger never publishes it).
* No floating point touches a sampling decision. Textbook float Laplace / inverse-CDF / softmax
  sampling leaks through rounding (Mironov 2012; Casacuberta et al. 2022). The samplers here consume
  uniform *bits* only and use exact integer / ``Fraction`` arithmetic:

  - :meth:`RandomSource.uniform_int` -- rejection sampling on bits, exact for any Python int bound;
  - :meth:`RandomSource.bernoulli` -- Bernoulli(p) for rational p;
  - :meth:`RandomSource.bernoulli_exp` -- Bernoulli(exp(-gamma)) for rational gamma >= 0
    (Canonne-Kamath-Steinke 2020, "The Discrete Gaussian for DP", Algorithm 1);
  - :meth:`RandomSource.discrete_laplace` -- Pr[x] ∝ exp(-|x|/scale) on Z (CKS20 Algorithm 2);
  - :meth:`RandomSource.discrete_gaussian` -- Pr[x] ∝ exp(-x²/(2σ²)) on Z (CKS20 Algorithm 3);
  - :meth:`RandomSource.bernoulli_below` -- Bernoulli(p) for a *real* p given by certified
    rational bounds at any precision (a lazily revealed uniform compared exactly).

:func:`exp_neg_bounds` gives certified dyadic bounds on exp(-gamma) (directed-rounding integer
arithmetic); the exponential mechanism and the stable histogram use it to decide comparisons exactly.

Not covered: timing side channels. Rejection samplers take data-independent but random time, and
Python big-int arithmetic is not constant-time; an attacker who can time individual releases
precisely is outside this threat model (as for OpenDP, which says the same of its samplers).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

from privstream.learning.errors import PrivacyParameterError

__all__ = [
    "DerivedRandomSource",
    "RandomSource",
    "SecureRandomSource",
    "SeededRandomSource",
    "derived",
    "exp_neg_bounds",
    "resolve",
    "secure",
    "seeded",
]

# Bits revealed per refinement step of a lazily generated uniform.
_CHUNK_BITS = 64


class RandomSource(ABC):
    """Uniform random bits plus exact samplers derived from them.

    Subclasses implement only :meth:`getrandbits`; every sampler below is exact given ideal bits.
    """

    @abstractmethod
    def getrandbits(self, k: int) -> int:
        """Return a uniform integer in [0, 2**k) (k >= 0)."""

    # -- exact uniform and Bernoulli primitives ------------------------------------------------

    def uniform_int(self, n: int) -> int:
        """Exact uniform integer in [0, n) for any Python int n >= 1 (rejection on bits)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise PrivacyParameterError(f"uniform_int needs an int n >= 1, got {n!r}")
        return self._below(n)

    def _below(self, n: int) -> int:
        # unchecked uniform_int for the samplers' hot loops (n >= 1 by construction)
        k = (n - 1).bit_length()
        while True:  # acceptance probability > 1/2 per round
            x = self.getrandbits(k)
            if x < n:
                return x

    def bernoulli(self, p: Fraction) -> bool:
        """Exact Bernoulli(p) for rational p in [0, 1]."""
        p = Fraction(p)
        if not 0 <= p <= 1:
            raise PrivacyParameterError(f"probability must be in [0, 1], got {p}")
        return self._below(p.denominator) < p.numerator

    def bernoulli_exp(self, gamma: Fraction) -> bool:
        """Exact Bernoulli(exp(-gamma)) for rational gamma >= 0 (CKS20 Algorithm 1).

        exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma)); each factor is an independent
        coin, and the loop stops at the first failure, so the expected cost is O(1).
        """
        gamma = Fraction(gamma)
        if gamma < 0:
            raise PrivacyParameterError(f"bernoulli_exp needs gamma >= 0, got {gamma}")
        return self._bernoulli_exp_ratio(gamma.numerator, gamma.denominator)

    def _bernoulli_exp_ratio(self, num: int, den: int) -> bool:
        # Bernoulli(exp(-num/den)) for num >= 0, den >= 1, without Fraction normalisation
        while num > den:
            if not self._bernoulli_exp_unit(1, 1):
                return False
            num -= den
        return self._bernoulli_exp_unit(num, den)

    def _bernoulli_exp_unit(self, num: int, den: int) -> bool:
        # For gamma = num/den in [0, 1]: K = first k with Bernoulli(gamma/k) = 0; Pr[K odd] = e^-gamma.
        k = 1
        while self._below(den * k) < num:
            k += 1
        return k % 2 == 1

    def bernoulli_below(self, bounds: Callable[[int], tuple[Fraction, Fraction]]) -> bool:
        """Exact Bernoulli(p) for a real p in [0, 1] known through certified bounds.

        ``bounds(extra_bits)`` must return rationals lo <= p <= hi whose gap shrinks to 0 as
        ``extra_bits`` grows. A uniform U in [0, 1) is revealed 64 bits at a time and the result
        is [U < p], decided only once the revealed interval of U lies wholly on one side of
        [lo, hi]; hence Pr[True] = p exactly, and the expected number of rounds is ~1.
        """
        k = _CHUNK_BITS
        u = self.getrandbits(k)
        extra = 0
        while True:
            lo, hi = bounds(extra)
            # U ∈ [u/2^k, (u+1)/2^k)
            if (u + 1) <= lo * (1 << k):
                return True
            if u >= hi * (1 << k):
                return False
            u = (u << _CHUNK_BITS) | self.getrandbits(_CHUNK_BITS)
            k += _CHUNK_BITS
            extra += _CHUNK_BITS

    # -- exact integer noise -------------------------------------------------------------------

    def discrete_laplace(self, scale: Fraction) -> int:
        """Sample Pr[x] ∝ exp(-|x|/scale) on the integers, exactly (CKS20 Algorithm 2).

        ``scale`` is a positive rational t/s. X = U + t·V with U ∝ exp(-u/t) on {0..t-1} and
        V ~ Geometric(1 - e^-1) is geometric with ratio e^{-1/t}; floor(X/s) has ratio e^{-s/t};
        a random sign with the (+0/-0) duplicate rejected gives the two-sided law.
        """
        scale = _positive_fraction(scale, "discrete Laplace scale")
        t, s = scale.numerator, scale.denominator
        while True:
            u = self._below(t)
            if not self._bernoulli_exp_unit(u, t):  # u/t < 1
                continue
            v = 0
            while self._bernoulli_exp_unit(1, 1):
                v += 1
            y = (u + t * v) // s
            negative = self.getrandbits(1) == 1
            if negative and y == 0:
                continue
            return -y if negative else y

    def discrete_gaussian(self, sigma2: Fraction) -> int:
        """Sample Pr[x] ∝ exp(-x²/(2·sigma2)) on the integers, exactly (CKS20 Algorithm 3).

        Rejection from a discrete Laplace of integer scale t = floor(σ)+1, accepting Y with
        probability exp(-(|Y| - σ²/t)² / (2σ²)); expected rounds < 2 (CKS20 Thm 6).
        """
        sigma2 = _positive_fraction(sigma2, "discrete Gaussian variance")
        a, b = sigma2.numerator, sigma2.denominator
        t = math.isqrt(a // b) + 1
        scale = Fraction(t)
        # (|y| - σ²/t)² / (2σ²) = (|y|·b·t - a)² / (2·a·b·t²) with σ² = a/b
        bt = b * t
        den = 2 * a * bt * t
        while True:
            y = self.discrete_laplace(scale)
            d = abs(y) * bt - a
            if self._bernoulli_exp_ratio(d * d, den):
                return y

    def permutation(self, n: int) -> list[int]:
        """Uniform random permutation of range(n) (Fisher-Yates with exact uniform draws)."""
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self._below(i + 1)
            order[i], order[j] = order[j], order[i]
        return order


class SecureRandomSource(RandomSource):
    """Production source: bits from the OS CSPRNG via :mod:`secrets` (``os.urandom``)."""

    def getrandbits(self, k: int) -> int:
        return secrets.randbits(k) if k > 0 else 0

    def __repr__(self) -> str:
        return "SecureRandomSource()"


class SeededRandomSource(RandomSource):
    """Reproducible source for tests and audits (Mersenne Twister; NOT for production releases)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def getrandbits(self, k: int) -> int:
        return self._rng.getrandbits(k) if k > 0 else 0

    def __repr__(self) -> str:
        return f"SeededRandomSource({self.seed!r})"


class DerivedRandomSource(RandomSource):
    """A deterministic, cryptographically secure stream of bits from a secret seed.

    Block ``i`` (32 bytes) of the stream is ``HMAC-SHA256(seed, b"privstream.derived.v1" ||
    i as 8 big-endian bytes)``; the blocks are read as one big-endian bit string, and
    :meth:`getrandbits` takes the next ``k`` bits of it (the first bit is the most significant of
    the result). A source pickles as its seed and position, so a child process continues the
    same stream (and a copy made before any draw replays it from the start).

    >>> a, b = derived(bytes(32)), derived(bytes(32))
    >>> [a.getrandbits(12) for _ in range(3)] == [b.getrandbits(12) for _ in range(3)]
    True
    >>> derived(bytes(32)).uniform_int(10**6) == derived(bytes(32)).uniform_int(10**6)
    True
    """

    __slots__ = ("_bits", "_block", "_buffer", "_seed")
    _LABEL = b"privstream.derived.v1"

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes | bytearray) or len(seed) < 16:
            raise ValueError("a derived source needs a secret seed of at least 16 bytes")
        self._seed = bytes(seed)
        self._block = 0  # index of the next block to compute
        self._buffer = 0  # bits computed but not yet returned (the low ``_bits`` bits)
        self._bits = 0

    def _next_block(self) -> int:
        message = self._LABEL + self._block.to_bytes(8, "big")
        self._block += 1
        return int.from_bytes(hmac.new(self._seed, message, hashlib.sha256).digest(), "big")

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("k must be >= 0")
        while self._bits < k:
            self._buffer = (self._buffer << 256) | self._next_block()
            self._bits += 256
        self._bits -= k
        value = self._buffer >> self._bits
        self._buffer &= (1 << self._bits) - 1
        return value

    @property
    def position(self) -> int:
        """How many bits were drawn so far."""
        return self._block * 256 - self._bits

    def __reduce__(self) -> tuple[object, ...]:
        return _restore_derived, (self._seed, self.position)

    def __repr__(self) -> str:  # never the seed: it is a secret
        return f"DerivedRandomSource(position={self.position})"


def _restore_derived(seed: bytes, position: int) -> DerivedRandomSource:
    source = DerivedRandomSource(seed)
    source._block = position // 256
    skip = position % 256
    if skip:
        source.getrandbits(skip)
    return source


def derived(seed: bytes) -> RandomSource:
    """The randomness of a reserved release: deterministic given its secret ledger seed, and
    cryptographically secure while the seed stays secret (see :class:`DerivedRandomSource`)."""
    return DerivedRandomSource(seed)


def secure() -> RandomSource:
    """The production default: a cryptographically secure source."""
    return SecureRandomSource()


def seeded(seed: int) -> RandomSource:
    """A deterministic source for tests and audits."""
    return SeededRandomSource(seed)


def resolve(rng: RandomSource | None) -> RandomSource:
    """``rng`` if given, else a fresh secure source (the default of every mechanism)."""
    if rng is None:
        return secure()
    if not isinstance(rng, RandomSource):
        raise TypeError(f"rng must be a RandomSource, got {type(rng).__name__}")
    return rng


def _positive_fraction(x: Fraction | float, what: str) -> Fraction:
    if type(x) is Fraction and x > 0:
        return x
    try:
        f = Fraction(x)
    except (TypeError, ValueError, OverflowError) as exc:
        raise PrivacyParameterError(f"{what} must be a finite positive number, got {x!r}") from exc
    if f <= 0:
        raise PrivacyParameterError(f"{what} must be > 0, got {x!r}")
    return f


# -- certified bounds on exp(-gamma) -----------------------------------------------------------


@lru_cache(maxsize=1 << 16)
def exp_neg_bounds(gamma: Fraction, bits: int) -> tuple[int, int]:
    """Integers (lo, hi) with lo/2**bits <= exp(-gamma) <= hi/2**bits, for rational gamma >= 0.

    Computed with integer arithmetic and directed rounding (floor for lower, ceil for upper
    bounds), so the enclosure is a proof, not an approximation; hi - lo is a few units for
    gamma < bits and (0, 1) beyond, since then exp(-gamma) < 2**-bits.
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise PrivacyParameterError(f"exp_neg_bounds needs gamma >= 0, got {gamma}")
    if bits < 1:
        raise PrivacyParameterError(f"bits must be >= 1, got {bits}")
    one = 1 << bits
    if gamma == 0:
        return one, one
    if gamma >= bits:  # exp(-bits) < 2**-bits
        return 0, 1
    m = gamma.numerator // gamma.denominator
    frac = gamma - m
    guard = m.bit_length() + 8
    p = bits + guard
    lo, hi = _exp_neg_unit_bounds(frac.numerator, frac.denominator, p)
    if m:
        lo1, hi1 = _exp_neg_unit_bounds(1, 1, p)
        lo = (lo * _pow_fixed(lo1, m, p, up=False)) >> p
        hi = -((-hi * _pow_fixed(hi1, m, p, up=True)) >> p)
    lo >>= guard
    hi = -((-hi) >> guard)
    return max(lo, 0), min(max(hi, 1), one)


@lru_cache(maxsize=4096)
def _exp_neg_unit_bounds(a: int, b: int, p: int) -> tuple[int, int]:
    """Fixed-point (2**p) bounds on exp(-a/b) for 0 <= a/b <= 1: alternating Taylor series.

    Terms T_k = f^k/k! are non-increasing for f <= 1, so the truncation error after T_{N-1} is
    at most T_N in absolute value; each T_k is bracketed by floor/ceil recurrences.
    """
    one = 1 << p
    t_lo = t_hi = one
    s_lo = s_hi = one  # partial sums bracketing sum_{k<N} (-1)^k T_k
    k = 1
    while True:
        t_lo = (t_lo * a) // (b * k)
        t_hi = -((-t_hi * a) // (b * k))
        if t_hi <= 1:
            lo, hi = s_lo - t_hi, s_hi + t_hi
            return max(lo, 0), min(hi, one)
        if k % 2:
            s_lo -= t_hi
            s_hi -= t_lo
        else:
            s_lo += t_lo
            s_hi += t_hi
        k += 1


def _pow_fixed(x: int, m: int, p: int, *, up: bool) -> int:
    """(x/2**p)**m in fixed point 2**p, rounded up or down at every step (x <= 2**p)."""
    result = 1 << p
    base = x
    while m:
        if m & 1:
            result = -((-result * base) >> p) if up else (result * base) >> p
        m >>= 1
        if m:
            base = -((-base * base) >> p) if up else (base * base) >> p
    return result
