"""Wire formats: pydantic models of every message and release, and their JSON Schemas.

``python -m privstream.schemas.export DIR`` writes the JSON Schemas; the committed copies live
in ``privstream/schemas/json/`` and a test keeps them equal to the models.
"""

from pydantic import BaseModel

from privstream.schemas.examples import SCHEMA_VERSION, Example, ExampleBatch, normalise_label
from privstream.schemas.predictions import Prediction, PredictionBatch, VectorPredictionBatch
from privstream.schemas.releases import (
    Certificate,
    ErrorEstimate,
    HypothesisRelease,
    LifetimeBound,
    Publication,
    ReleaseEvaluation,
    ReleaseGuarantee,
    WindowInfo,
)
from privstream.schemas.sanitized import SanitizedRelease

#: Every published or consumed model, by the file name of its JSON Schema.
MODELS: dict[str, type[BaseModel]] = {
    "example": Example,
    "example_batch": ExampleBatch,
    "prediction": Prediction,
    "prediction_batch": PredictionBatch,
    "vector_prediction_batch": VectorPredictionBatch,
    "hypothesis_release": HypothesisRelease,
    "sanitized_release": SanitizedRelease,
}

__all__ = [
    "MODELS",
    "SCHEMA_VERSION",
    "Certificate",
    "ErrorEstimate",
    "Example",
    "ExampleBatch",
    "HypothesisRelease",
    "LifetimeBound",
    "Prediction",
    "PredictionBatch",
    "Publication",
    "ReleaseEvaluation",
    "ReleaseGuarantee",
    "SanitizedRelease",
    "VectorPredictionBatch",
    "WindowInfo",
    "normalise_label",
]
