"""Synthetic streams for the demo, the ``produce`` command and the tests.

A random target hypothesis of the class labels uniformly random points of its domain; with
``label_noise > 0`` each label is flipped independently, which makes the stream (almost
surely) non-realizable. Not a privacy mechanism: nothing here is released.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from privstream.learning.hypotheses import Hypothesis
from privstream.learning.hypothesis_classes import HypothesisClass, parse_class_spec


def random_target(hclass: HypothesisClass, rng: np.random.Generator) -> Hypothesis:
    """A member of ``hclass`` chosen uniformly at random."""
    return hclass.hypothesis(_uniform(rng, 0, hclass.size))


def _uniform(rng: np.random.Generator, low: int, high: int) -> int:
    """Uniform integer in ``[low, high)`` for Python ints of any size."""
    span = high - low
    if span <= 0:
        return low
    if span <= 2**63:
        return low + int(rng.integers(0, span, dtype=np.uint64)) if span > 1 else low
    bits = span.bit_length()
    while True:  # rejection sampling on random bits keeps it exactly uniform
        value = int.from_bytes(rng.bytes((bits + 7) // 8), "little") & ((1 << bits) - 1)
        if value < span:
            return low + value


@dataclass(frozen=True)
class SyntheticBatch:
    target: Hypothesis
    xs: np.ndarray
    ys: np.ndarray

    def messages(self, stream_id: str) -> Iterator[dict[str, Any]]:
        """The examples as ``Example`` JSON objects."""
        for x, y in zip(self.xs.tolist(), self.ys.tolist(), strict=True):
            yield {"stream_id": stream_id, "x": int(x), "y": int(y)}


def synthetic_examples(
    class_spec: str,
    n: int,
    label_noise: float = 0.0,
    seed: int | None = None,
    target: Hypothesis | None = None,
) -> SyntheticBatch:
    """``n`` examples labelled by ``target`` (default: a random member of ``class_spec``)."""
    if not 0.0 <= label_noise <= 1.0:
        raise ValueError(f"label noise must be a probability in [0, 1], got {label_noise}")
    if n < 0:
        raise ValueError(f"the number of examples must be >= 0, got {n}")
    hclass = parse_class_spec(class_spec)
    rng = np.random.default_rng(seed)
    target = target if target is not None else random_target(hclass, rng)
    domain = hclass.domain_size
    if domain <= 2**63:
        xs = rng.integers(0, domain, size=n, dtype=np.uint64)
        xs = xs.astype(np.int64) if domain <= 2**62 else xs.astype(object)
    else:
        xs = np.array([_uniform(rng, 0, domain) for _ in range(n)], dtype=object)
    ys = np.asarray(target.predict(xs), dtype=np.uint8)
    if label_noise > 0:
        flips = rng.random(n) < label_noise
        ys = ys ^ flips.astype(np.uint8)
    return SyntheticBatch(target, xs, ys)


def malformed_messages(count: int, stream_id: str) -> list[bytes]:
    """``count`` invalid messages cycling through every rejection reason (for demos and tests)."""
    kinds = [
        b"{not json",
        json.dumps({"stream_id": stream_id, "y": 1}).encode(),  # missing x
        json.dumps({"stream_id": stream_id, "x": "seven", "y": 1}).encode(),  # wrong type
        json.dumps({"stream_id": stream_id, "x": 1, "y": 2}).encode(),  # bad label
        json.dumps({"stream_id": stream_id, "x": -1, "y": 1}).encode(),  # outside the domain
        json.dumps({"stream_id": "no-such-stream", "x": 1, "y": 1}).encode(),  # unknown stream
    ]
    return [kinds[i % len(kinds)] for i in range(count)]


def hostile_messages(
    count: int, stream_id: str, domain_size: int, seed: int = 0, oversized: int = 0
) -> list[bytes]:
    """``count`` invalid messages of every hostile kind, in turn: random bytes, ``NaN`` and
    ``Infinity`` literals, a 400-digit number, 2,000-deep nesting, wrong types, a bad label, a point
    outside ``{0, ..., domain_size - 1}``, a unicode stream id, a missing field; ``oversized`` of
    them (spread out) are 1.1 MB (a text for ``x``: more than a dead letter holds). For the flood
    benchmark and the load tests.

    >>> [m[:30] for m in hostile_messages(3, "s", 10)][1:]
    [b'{"stream_id": "s", "x": NaN, "', b'{"stream_id": "s", "x": Infini']
    """
    rng = np.random.default_rng(seed)
    sid = json.dumps(stream_id).encode()
    kinds = [
        lambda i: bytes(rng.integers(0, 256, int(rng.integers(1, 60)), dtype=np.uint8)),
        lambda i: b'{"stream_id": %s, "x": NaN, "y": 1}' % sid,
        lambda i: b'{"stream_id": %s, "x": Infinity, "y": 1}' % sid,
        lambda i: b'{"stream_id": %s, "x": 1%s, "y": 1}' % (sid, b"0" * 400),
        lambda i: b"[" * 2000 + b"]" * 2000,
        lambda i: b'{"stream_id": %s, "x": "%d", "y": 1}' % (sid, i),
        lambda i: b'{"stream_id": %s, "x": %d, "y": 7}' % (sid, i),
        lambda i: b'{"stream_id": %s, "x": %d, "y": 1}' % (sid, domain_size + i),
        lambda i: '{"stream_id": "\u00e9t\u00e9-\U0001f600", "x": 1, "y": 1}'.encode(),
        lambda i: b'{"x": 1, "y": 1}',
    ]
    messages = [kinds[i % len(kinds)](i) for i in range(count)]
    big = b'{"stream_id": %s, "x": "%s", "y": 1}' % (sid, b"p" * 1_100_000)
    for k in range(oversized):
        messages[(k + 1) * count // (oversized + 1)] = big
    return messages


#: The synthetic spec of a stream of feature vectors: ``halfspaces:D`` (D features).
VECTOR_SPEC_PREFIX = "halfspaces:"


def vector_dimension(spec: str) -> int | None:
    """``D`` of a ``halfspaces:D`` spec, ``None`` for any other (a hypothesis class's) spec.

    >>> vector_dimension("halfspaces:9"), vector_dimension("thresholds:8")
    (9, None)
    """
    if not spec.startswith(VECTOR_SPEC_PREFIX):
        return None
    rest = spec[len(VECTOR_SPEC_PREFIX) :]
    if not rest.isdigit() or not 1 <= int(rest) <= 10_000:
        raise ValueError(f"expected halfspaces:D with 1 <= D <= 10000 features, got {spec!r}")
    return int(rest)


def random_normal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A random unit normal of a halfspace on ``d`` features mapped to ``[-1, 1]`` (a constant 1
    last), whose hyperplane passes near the centre of the box.

    >>> n = random_normal(3, np.random.default_rng(0))
    >>> n.shape, round(float(np.linalg.norm(n)), 6)
    ((4,), 1.0)
    """
    normal = rng.standard_normal(d + 1)
    normal[-1] = 0.2 * rng.standard_normal()  # the hyperplane passes near the centre
    return np.asarray(normal / np.linalg.norm(normal))


def random_target_of(d: int, classes: int, rng: np.random.Generator) -> np.ndarray:
    """The target of a synthetic stream of ``classes`` labels on ``d`` features: one
    :func:`random_normal` for 2 (the halfspace), else ``classes`` rows ``w_k = (c_k, -‖c_k‖²/2)``
    for random prototypes ``c_k`` in ``[-0.6, 0.6]^d`` of the mapped box, scaled so that
    ``Σ_k ‖w_k‖² = 1``. The row scoring a point highest is its nearest prototype's: a linear K-class
    target whose classes all have a share of the box (each holds its prototype's cell), and the gap
    between the best and second-best score is the multi-class Perceptron's margin.

    >>> rng = np.random.default_rng(0)
    >>> W = random_target_of(3, 4, rng)
    >>> random_target_of(3, 2, rng).shape, W.shape, round(float((W**2).sum()), 6)
    ((4,), (4, 4), 1.0)
    """
    if classes == 2:
        return random_normal(d, rng)
    prototypes = rng.uniform(-0.6, 0.6, (classes, d))
    rows = np.hstack([prototypes, -0.5 * (prototypes**2).sum(axis=1, keepdims=True)])
    return np.asarray(rows / np.linalg.norm(rows))


def _labels(Z: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """The labels ``normal`` gives the mapped points ``Z``: the halfspace's side, or the highest row."""
    if normal.ndim == 1:
        return np.asarray(Z @ normal >= 0).astype(np.uint8)
    return np.asarray(np.argmax(Z @ normal.T, axis=1)).astype(np.uint8)


def _gap(Z: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """How far each mapped point is from the target's boundary: the distance to the hyperplane, or the
    gap between the best and second-best class's score (the multi-class margin)."""
    if normal.ndim == 1:
        return np.asarray(np.abs(Z @ normal))
    top = np.sort(Z @ normal.T, axis=1)
    return np.asarray(top[:, -1] - top[:, -2])


@dataclass(frozen=True)
class SyntheticVectors:
    """Feature vectors labelled by a random target on the features mapped to ``[-1, 1]`` by ``bounds``
    (with a constant 1 last: the online learners' map): a halfspace ``⟨normal, z⟩ >= 0``, or with K
    classes the row of ``normal`` (K × (d + 1)) scoring ``z`` highest."""

    bounds: np.ndarray
    normal: np.ndarray
    X: np.ndarray
    ys: np.ndarray

    def messages(self, stream_id: str) -> Iterator[dict[str, Any]]:
        """The examples as ``Example`` JSON objects (``x`` a list of numbers)."""
        for x, y in zip(self.X.tolist(), self.ys.tolist(), strict=True):
            yield {"stream_id": stream_id, "x": x, "y": int(y)}


def synthetic_vectors(
    d: int,
    n: int,
    bounds: Any = None,
    label_noise: float = 0.0,
    seed: int | None = None,
    margin: float | None = None,
    normal: np.ndarray | None = None,
    classes: int = 2,
) -> SyntheticVectors:
    """``n`` feature vectors uniform in the box ``bounds`` (default ``[0, 1]^d``), labelled by a random
    halfspace through a point near the box's centre, or with ``classes`` K above 2 by a random linear
    K-class target (:func:`random_target_of`). With ``margin`` only points at least that far from the
    target's boundary in the mapped space are kept (rejection sampling): the stream is separable with
    that margin, and the Perceptron makes at most ``(d + 1)/margin²`` mistakes on it (the multi-class
    Perceptron ``2(d + 1)/margin²``). Label noise
    replaces a label by another class, uniformly. ``normal``: that target instead of a random one
    (fresh examples of a stream's target).

    >>> s = synthetic_vectors(2, 500, seed=1, margin=0.2)
    >>> s.X.shape, sorted(set(s.ys.tolist())), bool(s.X.min() >= 0 and s.X.max() <= 1)
    ((500, 2), [0, 1], True)
    >>> sorted(set(synthetic_vectors(2, 500, seed=1, classes=3).ys.tolist()))
    [0, 1, 2]
    """
    from privstream.learning.online import FeatureMap

    if not 0.0 <= label_noise <= 1.0:
        raise ValueError(f"label noise must be a probability in [0, 1], got {label_noise}")
    if n < 0:
        raise ValueError(f"the number of examples must be >= 0, got {n}")
    fmap = FeatureMap(bounds if bounds is not None else [[0.0, 1.0]] * d)
    if fmap.dimension != d:
        raise ValueError(f"bounds for {fmap.dimension} features, not {d}")
    if margin is not None and not 0 < margin < 0.5:
        raise ValueError(f"a synthetic stream's margin must be in (0, 0.5), got {margin}")
    rng = np.random.default_rng(seed)
    if normal is None:
        normal = random_target_of(d, classes, rng)
    if normal.shape != ((d + 1,) if classes == 2 else (classes, d + 1)):
        raise ValueError(f"a target of shape {normal.shape} for {classes} classes on {d} features")
    lo, span = fmap.bounds[:, 0], fmap.bounds[:, 1] - fmap.bounds[:, 0]
    parts, have = [], 0
    while have < n:
        X = lo + span * rng.random((max(2 * (n - have), 16), d))
        if margin is not None:
            X = X[_gap(fmap.transform(X), normal) >= margin]
        parts.append(X)
        have += len(X)
    X = np.concatenate(parts)[:n] if parts else np.zeros((0, d))
    ys = _labels(fmap.transform(X), normal) if n else np.zeros(0, np.uint8)
    if label_noise > 0:
        noisy = rng.random(n) < label_noise
        if classes == 2:
            ys ^= noisy.astype(np.uint8)
        else:  # another class, uniformly among the K - 1 others
            shift = rng.integers(1, classes, size=n)
            ys = np.where(noisy, (ys + shift) % classes, ys).astype(np.uint8)
    return SyntheticVectors(fmap.bounds, normal, X, ys)
