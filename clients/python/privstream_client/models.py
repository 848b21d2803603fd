"""The released predictors, read from their canonical JSON forms, and evaluated.

A release's ``hypothesis`` is one of seven kinds (the release specification):

* on integer points ``{0, ..., N-1}`` (a stream of a finite class, e.g. ``thresholds:65536``):
  ``runs`` (the value at 0 and the sorted change points) and ``bits`` (the truth table, packed
  little-endian, base64);
* on feature vectors inside public bounds (clipped to them): ``halfspace`` (``1[⟨w, u⟩ >= b]``),
  ``grid-labels`` (a label per cube of a ``K^d`` grid), ``stump`` (``1[x_j >= t]``, its negation,
  or a constant) and ``random-features`` (``1[⟨w, φ(u)⟩ >= b]``, Gaussian random Fourier features);
* on feature vectors of a stream of K classes: ``one-vs-rest`` (K halfspaces, one per class against
  the rest; the class ``k`` of the highest score ``⟨w_k, u⟩ - b_k``, a tie to the smallest ``k``).

``u = (x - lo) / (hi - lo)`` maps a clipped feature vector to the unit box. Integers beyond 2^53
arrive as decimal strings. :func:`model_from_dict` reads any of them and refuses a malformed one
(``ReleaseFormatError``); ``predict`` takes one point or many; :func:`describe` says it in words.

>>> h = model_from_dict({"kind": "runs", "domain": 65536, "first": 0, "changes": [14577]})
>>> h.predict(14576), h.predict(14577), h.predict([0, 20000]).tolist()
(0, 1, [0, 1])
>>> describe(h.to_dict())
'predicts 1 for x ≥ 14,577'
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import operator
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, SupportsIndex

import numpy as np

__all__ = [
    "INTEGER_KINDS",
    "VECTOR_KINDS",
    "Model",
    "ReleaseFormatError",
    "describe",
    "json_int",
    "model_from_dict",
]

INT64_MAX = 2**63 - 1
#: The frequencies a random-features model may have at most (the service's limit too).
MAX_FREQUENCIES = 16_384
INTEGER_KINDS = ("runs", "bits")
VECTOR_KINDS = ("halfspace", "grid-labels", "stump", "random-features", "one-vs-rest")
#: The most classes a one-vs-rest model may have (the service's limit too).
MAX_CLASSES = 256


class ReleaseFormatError(ValueError):
    """A release, certificate or hypothesis that does not follow the release specification."""


def json_int(value: object) -> int | None:
    """An integer read from JSON: an int, or its decimal string; None for anything else.

    >>> json_int(5), json_int("9223372036854775808"), json_int("5.0"), json_int(True)
    (5, 9223372036854775808, None, None)
    """
    if type(value) is int:
        return value
    if type(value) is str and value.lstrip("-").isdigit() and value.isascii():
        return int(value)
    return None


class Model(Protocol):
    """A released predictor: ``predict`` of one point (a label) or of many (a ``uint8`` array)."""

    kind: str

    def predict(self, x: Any) -> Any: ...

    def to_dict(self) -> dict[str, Any]: ...


def _point(x: object, n: int) -> int:
    if isinstance(x, bool | float | np.floating | np.bool_) or not isinstance(x, SupportsIndex):
        raise ValueError(f"domain point {x!r} is not an integer")
    value = operator.index(x)
    if not 0 <= value < n:
        shown = value if value.bit_length() <= 256 else f"of {value.bit_length()} bits"
        raise ValueError(f"domain point {shown} is outside the domain [0, {n})")
    return value


def _points(xs: object, n: int) -> np.ndarray:
    """An array of domain points: int64 where ``n - 1`` fits, else exact Python ints (object)."""
    arr = np.asarray(xs)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D array of domain points, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == object:
        out = np.array([_point(x, n) for x in arr], dtype=object)
        return out.astype(np.int64) if n - 1 <= INT64_MAX else out
    if arr.dtype.kind not in "iu":
        raise ValueError(f"domain points must be integers, got an array of dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n:
        raise ValueError(f"domain point {lo if lo < 0 else hi} is outside the domain [0, {n})")
    return arr.astype(object) if hi > INT64_MAX else arr.astype(np.int64, copy=False)


class _IntegerModel:
    """A function ``{0..N-1} -> {0, 1}``: one point gives an int, an array of points an array."""

    kind: str
    domain: int

    def predict(self, x: Any) -> Any:
        if isinstance(x, np.ndarray | list | tuple):
            return self._many(_points(x, self.domain))
        return self._one(_point(x, self.domain))

    def _one(self, x: int) -> int:
        raise NotImplementedError

    def _many(self, xs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def change_points(self) -> tuple[int, list[int]]:
        """``(value at 0, sorted change points)``."""
        raise NotImplementedError


class RunsModel(_IntegerModel):
    """``runs``: the value at 0 and the change points ``c`` (where ``h(c) != h(c - 1)``)."""

    kind = "runs"

    def __init__(self, domain: int, first: int, changes: Sequence[int]) -> None:
        self.domain, self.first, self.changes = domain, first, list(changes)
        big = domain - 1 > INT64_MAX
        self._array = np.array(self.changes, dtype=object if big else np.int64)

    def _one(self, x: int) -> int:
        return (bisect_right(self.changes, x) & 1) ^ self.first

    def _many(self, xs: np.ndarray) -> np.ndarray:
        if not self.changes:
            return np.full(xs.shape[0], self.first, dtype=np.uint8)
        k = np.asarray(np.searchsorted(self._array, xs, side="right"), dtype=np.int64)
        labels: np.ndarray = ((k & 1) ^ self.first).astype(np.uint8)
        return labels

    def change_points(self) -> tuple[int, list[int]]:
        return self.first, list(self.changes)

    def to_dict(self) -> dict[str, Any]:
        domain: int | str = self.domain if self.domain <= 2**53 else str(self.domain)
        changes = [c if c <= 2**53 else str(c) for c in self.changes]
        return {"kind": "runs", "domain": domain, "first": self.first, "changes": changes}


class BitsModel(_IntegerModel):
    """``bits``: the truth table, little-endian packed bits (bit i of byte j is point 8j + i)."""

    kind = "bits"

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.ascontiguousarray(table, dtype=bool)
        self.domain = int(self.table.shape[0])

    def _one(self, x: int) -> int:
        return int(self.table[x])

    def _many(self, xs: np.ndarray) -> np.ndarray:
        labels: np.ndarray = self.table[xs].astype(np.uint8)
        return labels

    def change_points(self) -> tuple[int, list[int]]:
        t = self.table
        return int(t[0]), (np.flatnonzero(t[1:] != t[:-1]) + 1).tolist()

    def to_dict(self) -> dict[str, Any]:
        packed = np.packbits(self.table, bitorder="little").tobytes()
        return {"kind": "bits", "domain": self.domain, "bits": base64.b64encode(packed).decode("ascii")}


def _runs_is_canonical(domain: int, changes: int) -> bool:
    """The one rule that picks the form: ``runs`` iff ``64 * changes <= N``."""
    return 64 * changes <= domain


def _integer_model(d: Mapping[str, Any]) -> _IntegerModel:
    n = json_int(d.get("domain"))
    if n is None or n < 1:
        raise ReleaseFormatError(f"domain must be a positive integer, got {d.get('domain')!r}")
    if d["kind"] == "runs":
        first, raw = d.get("first"), d.get("changes")
        if type(first) is not int or first not in (0, 1):
            raise ReleaseFormatError(f"first must be 0 or 1, got {first!r}")
        changes = [json_int(c) for c in raw] if isinstance(raw, list) else [None]
        if any(c is None for c in changes):
            raise ReleaseFormatError("changes must be a list of integers")
        points = [c for c in changes if c is not None]
        if any(not 0 < c < n for c in points) or any(a >= b for a, b in itertools.pairwise(points)):
            raise ReleaseFormatError(f"change points must be strictly increasing in (0, {n})")
        if not _runs_is_canonical(n, len(points)):
            raise ReleaseFormatError("too many change points for the runs form (the bits form is canonical)")
        return RunsModel(n, first, points)
    if n > 2**40:
        raise ReleaseFormatError(f"a bits table of {n} points is too large")
    try:
        raw_bits = base64.b64decode(str(d.get("bits")), validate=True)
    except (binascii.Error, ValueError):
        raise ReleaseFormatError("bits must be base64") from None
    bits = np.unpackbits(np.frombuffer(raw_bits, dtype=np.uint8), bitorder="little")
    if bits.shape[0] != -(-n // 8) * 8 or bits[n:].any():
        raise ReleaseFormatError(f"bits do not encode a table of length {n}")
    table = bits[:n].astype(bool)
    if _runs_is_canonical(n, int(np.count_nonzero(table[1:] != table[:-1]))):
        raise ReleaseFormatError("few enough change points for the runs form (the runs form is canonical)")
    return BitsModel(table)


def _bounds(value: object) -> np.ndarray:
    try:
        bounds = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ReleaseFormatError("bounds must be numbers") from None
    if (
        bounds.ndim != 2
        or bounds.shape[1] != 2
        or bounds.shape[0] < 1
        or not np.all(np.isfinite(bounds))
        or not np.all(bounds[:, 0] < bounds[:, 1])
    ):
        raise ReleaseFormatError("bounds must be a list of [lo, hi] with finite lo < hi")
    return bounds


def _vector(value: object, size: int, name: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ReleaseFormatError(f"{name} must be numbers") from None
    if arr.shape != (size,) or not np.all(np.isfinite(arr)):
        raise ReleaseFormatError(f"{name} must be {size} finite numbers")
    return arr


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReleaseFormatError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _count(value: object, name: str, high: int | None = None) -> int:
    if type(value) is not int or value < 1 or (high is not None and value > high):
        raise ReleaseFormatError(f"{name} must be an integer in [1, {high or 'inf'}], got {value!r}")
    return value


class _VectorModel:
    """A function of feature vectors: one vector gives an int, an ``(n, d)`` array an array."""

    kind: str
    dimension: int | None = None

    def predict(self, x: Any) -> Any:
        arr = np.asarray(x, dtype=np.float64)
        if arr.ndim == 1:
            return int(self.predict_rows(arr[None, :])[0])
        return self.predict_rows(arr)

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _rows(self, X: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """The rows clipped into the bounds (zero rows are fine)."""
        if X.size == 0:
            return np.zeros((0, bounds.shape[0]))
        if X.ndim != 2 or X.shape[1] != bounds.shape[0]:
            raise ValueError(f"features must have shape (n, {bounds.shape[0]}), got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("features must be finite (no NaN or infinity)")
        clipped: np.ndarray = np.clip(X, bounds[:, 0], bounds[:, 1])
        return clipped


class HalfspaceModel(_VectorModel):
    """``halfspace``: ``1[⟨normal, u⟩ >= offset]``."""

    kind = "halfspace"

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.bounds = _bounds(d.get("bounds"))
        self.normal = _vector(d.get("normal"), self.bounds.shape[0], "normal")
        self.offset = _number(d.get("offset"), "offset")
        self._dict = dict(d)

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        arr = self._rows(X, self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        labels: np.ndarray = ((arr - lo) / (hi - lo) @ self.normal >= self.offset).astype(np.uint8)
        return labels

    def to_dict(self) -> dict[str, Any]:
        return dict(self._dict)


class GridLabelsModel(_VectorModel):
    """``grid-labels``: ``K^d`` equal cubes of the unit box, cell ids row-major (the first feature
    most significant), one label bit per cell packed little-endian."""

    kind = "grid-labels"

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.bounds = _bounds(d.get("bounds"))
        self.k = _count(d.get("cells_per_axis"), "cells_per_axis")
        cells = self.k ** self.bounds.shape[0]
        if cells > 2**36:
            raise ReleaseFormatError(f"a grid of {cells} cells is too large")
        try:
            raw = base64.b64decode(str(d.get("labels")), validate=True)
        except (binascii.Error, ValueError):
            raise ReleaseFormatError("labels must be base64") from None
        if len(raw) != -(-cells // 8):
            raise ReleaseFormatError(f"{len(raw)} label bytes for {cells} cells")
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
        if bits[cells:].any():
            raise ReleaseFormatError("non-canonical label table (padding bits set)")
        self.labels = bits[:cells]
        self._dict = dict(d)

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        arr = self._rows(X, self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        coords = np.clip(np.floor((arr - lo) / (hi - lo) * self.k).astype(np.int64), 0, self.k - 1)
        ids = np.zeros(coords.shape[0], dtype=np.int64)
        for t in range(coords.shape[1]):
            ids = ids * self.k + coords[:, t]
        labels: np.ndarray = self.labels[ids]
        return labels

    def to_dict(self) -> dict[str, Any]:
        return dict(self._dict)


class StumpModel(_VectorModel):
    """``stump``: ``1[x_j >= t]`` (sign 1), ``1[x_j < t]`` (sign -1) on raw features, or a constant."""

    kind = "stump"

    def __init__(self, d: Mapping[str, Any]) -> None:
        self._dict = dict(d)
        self.constant: int | None = None
        if "constant" in d:
            if d["constant"] not in (0, 1) or type(d["constant"]) is not int:
                raise ReleaseFormatError("a constant stump's value is 0 or 1")
            self.constant = d["constant"]
            return
        feature, sign = d.get("feature"), d.get("sign")
        if type(feature) is not int or feature < 0 or sign not in (1, -1) or type(sign) is not int:
            raise ReleaseFormatError("a stump needs a feature >= 0 and a sign 1 or -1")
        self.feature, self.sign = feature, sign
        self.threshold = _number(d.get("threshold"), "threshold")

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        if X.ndim != 2:
            raise ValueError(f"features must have shape (n, d), got {X.shape}")
        if self.constant is not None:
            return np.full(X.shape[0], self.constant, dtype=np.uint8)
        if self.feature >= X.shape[1]:
            raise ValueError(f"the stump reads feature {self.feature}; rows have {X.shape[1]}")
        above = X[:, self.feature] >= self.threshold
        return (above if self.sign == 1 else ~above).astype(np.uint8)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._dict)


class RandomFeaturesModel(_VectorModel):
    """``random-features``: ``1[⟨weights, φ(u)⟩ >= offset]`` with
    ``φ(u) = (cos⟨ω_j, u⟩, sin⟨ω_j, u⟩)_{j=1..D} / √D`` and ``ω = (√2 / bandwidth) g``, ``g`` the
    first ``d·D`` standard normals of NumPy's legacy ``RandomState(seed)`` as a row-major ``(d, D)``
    matrix (a stream NumPy keeps frozen across versions). Each row is summed in its own order
    (``einsum`` without BLAS), as the learner does, so a score never depends on the other rows."""

    kind = "random-features"

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.bounds = _bounds(d.get("bounds"))
        self.frequencies = _count(d.get("frequencies"), "frequencies", MAX_FREQUENCIES)
        self.bandwidth = _number(d.get("bandwidth"), "bandwidth")
        seed = d.get("seed")
        if type(seed) is not int or not 0 <= seed < 2**32 or self.bandwidth <= 0:
            raise ReleaseFormatError("a random-features model needs a seed in [0, 2^32) and a bandwidth > 0")
        self.weights = _vector(d.get("weights"), 2 * self.frequencies, "weights")
        self.offset = _number(d.get("offset"), "offset")
        normals = np.random.RandomState(seed).standard_normal((self.bounds.shape[0], self.frequencies))
        self._omega = normals * (math.sqrt(2.0) / self.bandwidth)
        self._dict = dict(d)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """``⟨weights, φ(u)⟩`` per row of raw features ``X``."""
        arr = self._rows(np.asarray(X, dtype=np.float64), self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        U = (arr - lo) / (hi - lo)
        scale = 1.0 / math.sqrt(self.frequencies)
        out = []
        for first in range(0, U.shape[0], 4096):
            angles = np.einsum("ij,j...->i...", U[first : first + 4096], self._omega, optimize=False)
            phi = np.hstack((np.cos(angles), np.sin(angles))) * scale
            out.append(np.einsum("ij,j...->i...", phi, self.weights, optimize=False))
        return np.concatenate(out) if out else np.zeros(0)

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        return (self.scores(X) >= self.offset).astype(np.uint8)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._dict)


class OneVsRestModel(_VectorModel):
    """``one-vs-rest``: ``K`` halfspaces on one box; the class of the highest ``⟨normal_k, u⟩ -
    offset_k`` (a tie goes to the smallest class).

    >>> h = lambda w, b: {"kind": "halfspace", "bounds": [[0, 1], [0, 1]], "normal": w, "offset": b}
    >>> m = model_from_dict({"kind": "one-vs-rest", "halfspaces": [h([-1, 0], -0.5), h([1, 0], 0.5),
    ...                      h([0, 1], 0.5)], "epsilon": 1.0, "delta": 0.0})
    >>> m.classes, m.predict([0.1, 0.2]), m.predict([[0.9, 0.2], [0.2, 0.9]]).tolist()
    (3, 0, [1, 2])
    """

    kind = "one-vs-rest"

    def __init__(self, d: Mapping[str, Any]) -> None:
        parts = d.get("halfspaces")
        if not isinstance(parts, list) or not 2 <= len(parts) <= MAX_CLASSES:
            raise ReleaseFormatError(f"a one-vs-rest model needs a list of 2 to {MAX_CLASSES} halfspaces")
        halfspaces = []
        for part in parts:
            if not isinstance(part, Mapping) or part.get("kind") != "halfspace":
                raise ReleaseFormatError("each class of a one-vs-rest model is a halfspace")
            halfspaces.append(HalfspaceModel(part))
        self.bounds = halfspaces[0].bounds
        if any(not np.array_equal(h.bounds, self.bounds) for h in halfspaces):
            raise ReleaseFormatError("the halfspaces of a one-vs-rest model share one box")
        self.classes = len(halfspaces)
        self.normals = np.stack([h.normal for h in halfspaces])
        self.offsets = np.array([h.offset for h in halfspaces])
        self._dict = dict(d)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """``⟨normal_k, u⟩ - offset_k`` per row of raw features ``X`` and class ``k``."""
        arr = self._rows(np.asarray(X, dtype=np.float64), self.bounds)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        U = (arr - lo) / (hi - lo)
        out: np.ndarray = np.column_stack(
            [U @ w - b for w, b in zip(self.normals, self.offsets, strict=True)]
        )
        return out

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        classes: np.ndarray = np.argmax(self.scores(X), axis=1).astype(np.uint8)
        return classes

    def to_dict(self) -> dict[str, Any]:
        return dict(self._dict)


_VECTOR: dict[
    str, type[HalfspaceModel | GridLabelsModel | StumpModel | RandomFeaturesModel | OneVsRestModel]
] = {
    "halfspace": HalfspaceModel,
    "grid-labels": GridLabelsModel,
    "stump": StumpModel,
    "random-features": RandomFeaturesModel,
    "one-vs-rest": OneVsRestModel,
}


def model_from_dict(d: object) -> _IntegerModel | _VectorModel:
    """The predictor a release's ``hypothesis`` field describes; ``ReleaseFormatError`` if malformed.

    >>> model_from_dict({"kind": "stump", "feature": 1, "threshold": 0.5, "sign": -1}).predict([0, 0.2])
    1
    >>> model_from_dict({"kind": "runs", "domain": 8, "first": 0, "changes": [9]})
    Traceback (most recent call last):
    ...
    privstream_client.models.ReleaseFormatError: change points must be strictly increasing in (0, 8)
    """
    if not isinstance(d, Mapping):
        raise ReleaseFormatError(f"a hypothesis is a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind in INTEGER_KINDS:
        return _integer_model(d)
    if isinstance(kind, str) and kind in _VECTOR:
        return _VECTOR[kind](d)
    raise ReleaseFormatError(f"unknown hypothesis kind {kind!r}")


def _grouped(n: int) -> str:
    return f"{n:,}"


def describe(d: Mapping[str, Any]) -> str:
    """A released hypothesis in words, for a person.

    >>> describe({"kind": "runs", "domain": 65536, "first": 0, "changes": [14577]})
    'predicts 1 for x ≥ 14,577'
    >>> describe({"kind": "runs", "domain": 2000, "first": 0, "changes": [10, 20]})
    'predicts 1 for 10 ≤ x ≤ 19'
    >>> describe({"kind": "runs", "domain": 100, "first": 1, "changes": []})
    'predicts 1 everywhere (x in [0, 99])'
    >>> describe({"kind": "halfspace", "bounds": [[0, 1], [0, 2]], "normal": [0.6, -0.8], "offset": 0.1})
    'predicts 1 where 0.6·u1 - 0.8·u2 ≥ 0.1 (u: the features scaled to [0, 1] by their bounds)'
    """
    try:
        model = model_from_dict(d)
    except ReleaseFormatError as exc:
        return f"a malformed hypothesis ({exc})"
    if isinstance(model, _IntegerModel):
        first, changes = model.change_points()
        top = model.domain - 1
        ones: list[tuple[int, int]] = []
        bounds = [0, *changes, model.domain]
        for i in range(len(bounds) - 1):
            if (i & 1) ^ first:
                ones.append((bounds[i], bounds[i + 1] - 1))
        if not ones:
            return f"predicts 0 everywhere (x in [0, {_grouped(top)}])"
        if ones == [(0, top)]:
            return f"predicts 1 everywhere (x in [0, {_grouped(top)}])"

        def run(lo: int, hi: int) -> str:
            if lo == hi:
                return f"x = {_grouped(lo)}"
            if hi == top:
                return f"x ≥ {_grouped(lo)}"
            if lo == 0:
                return f"x ≤ {_grouped(hi)}"
            return f"{_grouped(lo)} ≤ x ≤ {_grouped(hi)}"

        shown = ", ".join(run(lo, hi) for lo, hi in ones[:4])
        more = f" and {len(ones) - 4} more runs" if len(ones) > 4 else ""
        return f"predicts 1 for {shown}{more}"
    if isinstance(model, HalfspaceModel):
        terms: list[str] = []
        for i, w in enumerate(model.normal.tolist()):
            sign = "-" if w < 0 else "+"
            terms.append(f"{sign} {abs(w):.3g}·u{i + 1}" if terms else f"{w:.3g}·u{i + 1}")
        return (
            f"predicts 1 where {' '.join(terms)} ≥ {model.offset:.3g} "
            "(u: the features scaled to [0, 1] by their bounds)"
        )
    if isinstance(model, StumpModel):
        if model.constant is not None:
            return f"predicts {model.constant} everywhere"
        op = "≥" if model.sign == 1 else "<"
        return f"predicts 1 where x{model.feature + 1} {op} {model.threshold:.6g}"
    if isinstance(model, OneVsRestModel):
        return (
            f"predicts the class of the highest of {model.classes} halfspace scores, one per class "
            f"against the rest, on {model.bounds.shape[0]} features"
        )
    if isinstance(model, GridLabelsModel):
        ones_count = int(model.labels.sum())
        return (
            f"predicts 1 on {ones_count:,} of {model.labels.size:,} cells of a "
            f"{model.k}-per-axis grid over {model.bounds.shape[0]} features"
        )
    assert isinstance(model, RandomFeaturesModel)
    return (
        f"predicts 1 where a kernel score of {model.frequencies:,} random features "
        f"(bandwidth {model.bandwidth:.3g}) is ≥ {model.offset:.3g}"
    )
