"""The Standard Optimal Algorithm (SOA), extended to non-realizable input.

Rule (Littlestone 1988): predict ``argmax_y Ldim(V restricted to (x, y))``; on a tie predict
``tie`` (default 1, fixed per instance, so the SOA is a deterministic function of its input
sequence); then restrict the version space ``V`` on *every* example. On a realizable sequence
it makes at most ``Ldim(H)`` mistakes.

Extension (BLM20 Def 8, ABLMM22 Def 11): at the first example that no hypothesis of the class agrees
with (together with all earlier ones), the current predictor is frozen and from then on
patched pointwise: ``h(x) := y`` for every later example (later labels override earlier ones).

>>> from privstream.learning.hypothesis_classes import parse_class_spec
>>> soa = SOA(parse_class_spec("thresholds:8"))
>>> [soa.learn_one(x, int(x >= 5)) for x in (4, 6, 5)]
[1, 1, 1]
>>> soa.mistakes, soa.mistake_bound, soa.predictor().predict(4), soa.predictor().predict(5)
(1, 3, 0, 1)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privstream.learning.domain import as_labels, as_points, check_label, check_point
from privstream.learning.errors import InvariantError, LabelError, StateError
from privstream.learning.hypotheses import Hypothesis, hypothesis_from_dict, patched
from privstream.learning.hypothesis_classes import FiniteClass, HypothesisClass

STATE_VERSION = 1


class SOA:
    """The (extended) SOA over a hypothesis class; see the module docstring."""

    def __init__(self, cls: HypothesisClass, tie: int = 1) -> None:
        if tie not in (0, 1) or isinstance(tie, float):
            raise LabelError(f"tie must be 0 or 1, got {tie!r}")
        self.hypothesis_class = cls
        self.tie = int(tie)
        self._n = cls.domain_size
        self._vs = cls.version_space()
        self.mistake_bound: int = self._vs.ldim()
        self.mistakes = 0
        self.examples_seen = 0
        self.realizable = True
        self._frozen: Hypothesis | None = None
        self._patches: dict[int, int] = {}

    # -- one example at a time -------------------------------------------------------------------
    def predict_one(self, x: int) -> int:
        """The current rule's label for x (no state change)."""
        if type(x) is not int or not 0 <= x < self._n:
            x = check_point(x, self._n)
        if self.realizable:
            return self._vs.soa_predict(x, self.tie)
        p = self._patches.get(x)
        return p if p is not None else self._predict_frozen(x)

    def learn_one(self, x: int, y: int) -> int:
        """Predict x with the current rule, count a mistake if wrong, learn ``(x, y)``.

        Returns the prediction made.
        """
        if type(x) is not int or not 0 <= x < self._n:
            x = check_point(x, self._n)
        if type(y) is not int or (y != 0 and y != 1):
            y = check_label(y)
        if self.realizable:
            vs = self._vs
            p = vs.soa_predict(x, self.tie)
            if not vs.update(x, y):
                self.realizable = False
                self._frozen = vs.soa_predictor(self.tie)
                self._patches[x] = y
        else:
            patched = self._patches.get(x)
            p = patched if patched is not None else self._predict_frozen(x)
            self._patches[x] = y
        if p != y:
            self.mistakes += 1
        self.examples_seen += 1
        return p

    def _predict_frozen(self, x: int) -> int:
        """The label of the rule frozen when the stream stopped being realizable."""
        if self._frozen is None:
            raise InvariantError("frozen when realizable turned False")
        return self._frozen.predict(x)

    # -- batches ---------------------------------------------------------------------------------
    def learn_many(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """Same result and final state as :meth:`learn_one` in a loop; returns the predictions (uint8)."""
        x = as_points(xs, self._n)
        y = as_labels(ys, x.shape[0])
        total = x.shape[0]
        preds = np.empty(total, dtype=np.uint8)
        k = 0
        if self.realizable:
            head, k = self._vs.soa_batch(x, y, self.tie)
            preds[:k] = head
            if k < total:
                self.realizable = False
                self._frozen = self._vs.soa_predictor(self.tie)
        if k < total:
            preds[k:] = self._patched_run(x[k:], y[k:])
        self.mistakes += int(np.count_nonzero(preds != y))
        self.examples_seen += total
        return preds

    def _patched_run(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Extended-SOA predictions on a non-realizable tail, vectorised.

        The prediction at i is the label of the latest earlier occurrence of ``x[i]`` (in this
        tail, else among the stored patches), else the frozen predictor's value.
        """
        if self._frozen is None:
            raise InvariantError("invariant broken: self._frozen is not None")
        base = self._frozen.predict(x)
        if self._patches:
            keys = sorted(self._patches)
            pk = np.array(keys, dtype=x.dtype)
            pv = np.array([self._patches[k] for k in keys], dtype=np.uint8)
            idx = np.searchsorted(pk, x)
            hit = idx < len(keys)
            hit[hit] = pk[idx[hit]] == x[hit]
            base[hit] = pv[idx[hit]]
        order = np.argsort(x, kind="stable")  # groups equal points, keeping time order
        xs_sorted, ys_sorted = x[order], y[order]
        same_prev = xs_sorted[1:] == xs_sorted[:-1]
        pred_sorted = base[order]
        pred_sorted[1:][same_prev] = ys_sorted[:-1][same_prev]
        out: np.ndarray = np.empty_like(pred_sorted)
        out[order] = pred_sorted
        last = np.append(~same_prev, True)  # last occurrence of each point
        self._patches.update(zip(xs_sorted[last].tolist(), ys_sorted[last].tolist(), strict=True))
        return out

    # -- the predictor and the state -------------------------------------------------------------
    def predictor(self) -> Hypothesis:
        """The current predictor as a canonical hypothesis (improper in general)."""
        if self.realizable:
            return self._vs.soa_predictor(self.tie)
        if self._frozen is None:
            raise InvariantError("invariant broken: self._frozen is not None")
        return patched(self._frozen, self._patches)

    @property
    def version_space_size(self) -> int:
        """Number of hypotheses consistent with the realizable prefix seen so far."""
        return self._vs.size() if self.realizable else 0

    def state_dict(self) -> dict[str, Any]:
        """JSON-able snapshot (exact ints); :meth:`from_state_dict` restores it."""
        d: dict[str, Any] = {
            "version": STATE_VERSION,
            "class": self.hypothesis_class.spec,
            "tie": self.tie,
            "examples_seen": self.examples_seen,
            "mistakes": self.mistakes,
            "realizable": self.realizable,
            "version_space": self._vs.to_state(),
            "frozen": None if self._frozen is None else self._frozen.to_dict(),
            "patches": [[k, self._patches[k]] for k in sorted(self._patches)],
        }
        if isinstance(self.hypothesis_class, FiniteClass):
            d["fingerprint"] = self.hypothesis_class.fingerprint
        return d

    @classmethod
    def from_state_dict(cls_, hclass: HypothesisClass, d: dict[str, Any]) -> SOA:
        """Rebuild an SOA over ``hclass`` from :meth:`state_dict` output."""
        try:
            if d.get("version") != STATE_VERSION:
                raise StateError(f"unsupported SOA state version {d.get('version')!r}")
            if isinstance(hclass, FiniteClass):
                if d.get("fingerprint") != hclass.fingerprint:
                    raise StateError("SOA state was saved for a different finite class (fingerprint differs)")
            elif d["class"] != hclass.spec:
                raise StateError(f"SOA state is for class {d['class']!r}, not {hclass.spec!r}")
            soa = cls_(hclass, tie=d["tie"])
            soa._vs = hclass.version_space_from_state(d["version_space"])
            soa.examples_seen, soa.mistakes = int(d["examples_seen"]), int(d["mistakes"])
            soa.realizable = bool(d["realizable"])
            if soa.realizable:
                if d["frozen"] is not None or d["patches"]:
                    raise StateError("a realizable SOA state has no frozen predictor or patches")
            else:
                soa._frozen = hypothesis_from_dict(d["frozen"])
                if soa._frozen.domain_size != hclass.domain_size:
                    raise StateError("frozen predictor has the wrong domain")
                soa._patches = {check_point(k, hclass.domain_size): check_label(v) for k, v in d["patches"]}
            return soa
        except (KeyError, TypeError, AttributeError) as exc:
            raise StateError(f"malformed SOA state: {exc!r}") from None


def soa_run(cls: HypothesisClass, xs: np.ndarray, ys: np.ndarray, tie: int = 1) -> tuple[Hypothesis, int]:
    """``(final predictor, mistakes)`` of a fresh SOA over the sequence (the extended SOA)."""
    soa = SOA(cls, tie)
    soa.learn_many(xs, ys)
    return soa.predictor(), soa.mistakes
