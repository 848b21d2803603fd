"""What the operator status shows of a stream's online learner of feature vectors (its kind, its
mistakes, its margin or experts). The rule: operators only; nothing here reaches a public page.
"""

from __future__ import annotations

from typing import Any

from privstream.learning.online import MulticlassPerceptron, StreamLearner
from privstream.learning.online.base import LinearLearner
from privstream.stream_app.settings import StreamConfig


def vector_status(stream: StreamConfig, learner: StreamLearner) -> dict[str, Any]:
    """``/status`` of a stream of feature vectors: its online learner's counts and current rule."""
    if isinstance(learner, MulticlassPerceptron):
        return _multiclass_status(stream, learner)
    weights, offset = learner.weights()
    return {
        "features": stream.features,
        "examples": learner.examples_seen,
        "mistakes": learner.mistakes,
        "mistake_bound": learner.mistake_bound,
        "realizable": learner.realizable,
        "online": {
            "learner": learner.name,
            "parameters": {p: getattr(learner, p) for p in type(learner)._params},
            "margin_mistakes": learner.margin_mistakes,
            "margin_bound": learner.margin_bound,
            "rule": {
                "weights": dict(zip(stream.feature_labels, weights.tolist(), strict=True)),
                "offset": offset,
                "reads": "predict 1 when sum(weights[f] * x[f]) + offset >= 0 (features clipped to bounds)"
                + ("; the rule of the vote's leader" if hasattr(learner, "vote_weights") else ""),
            },
            **_vote_status(learner),
        },
    }


def _multiclass_status(stream: StreamConfig, learner: MulticlassPerceptron) -> dict[str, Any]:
    """``/status`` of a stream of K classes: the multi-class Perceptron's counts and K scores."""
    return {
        "features": stream.features,
        "classes": learner.classes,
        "examples": learner.examples_seen,
        "mistakes": learner.mistakes,
        "mistake_bound": learner.mistake_bound,
        "realizable": learner.realizable,
        "online": {
            "learner": learner.name,
            "parameters": {"classes": learner.classes, "margin": learner.margin},
            "margin_mistakes": learner.margin_mistakes,
            "margin_bound": learner.margin_bound,
            "rule": {
                "classes": [
                    {"weights": dict(zip(stream.feature_labels, w.tolist(), strict=True)), "offset": b}
                    for w, b in learner.weights()
                ],
                "reads": "predict the class k of the highest sum(weights[f] * x[f]) + offset "
                "(features clipped to bounds; a tie goes to the smallest k)",
            },
        },
    }


def _vote_status(learner: LinearLearner) -> dict[str, Any]:
    """An ensemble's experts: each one's mistakes and weight in the next vote."""
    weights = getattr(learner, "vote_weights", None)
    if weights is None:
        return {}
    experts = getattr(learner, "experts", None)
    if experts is not None:  # experts that are learners themselves
        names, mistakes = [e.name for e in experts], [e.mistakes for e in experts]
    else:  # experts held inside the learner (the block vote)
        names, mistakes = list(learner.expert_names), list(learner.expert_mistakes)  # type: ignore[attr-defined]
    return {
        "vote": [
            {"learner": name, "mistakes": m, "weight": w}
            for name, m, w in zip(names, mistakes, weights, strict=True)
        ]
    }
