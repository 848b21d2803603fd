"""A stream of feature vectors in the service: its online learner, ``/status`` and ``/metrics``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.agents.pipeline import RawRecord
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings
from tests.learning.online.streams import separable_stream

BOUNDS = [[0.0, 10.0], [-5.0, 5.0]]


@pytest.fixture
def service(tmp_path):
    settings = Settings(
        kafka_bootstrap="127.0.0.1:9",
        data_dir=tmp_path,
        streams=[
            {
                "name": "v",
                "features": 2,
                "feature_bounds": BOUNDS,
                "feature_names": ["age", "score"],
                "online_params": {"margin": 0.1},
            }
        ],
        _env_file=None,
    )
    service = build_service(settings)
    yield service
    service.store.close()


def test_status_and_metrics_show_the_vector_streams_online_learner(service):
    X, y, _ = separable_stream(2, 0.1, 500, seed=1, bounds=BOUNDS)
    records = [
        RawRecord(
            "examples", 0, i, b"v", json.dumps({"stream_id": "v", "x": x.tolist(), "y": int(label)}).encode()
        )
        for i, (x, label) in enumerate(zip(X, y, strict=True))
    ]
    out = service.pipeline.process(records)
    assert len(out.predictions) == 1
    status = service.status()["streams"]["v"]
    # the default learner: the block vote, with the exact Perceptron's margin test
    assert status["examples"] == 500 and status["mistakes"] > 0 and status["mistake_bound"] is None
    assert status["realizable"] is True
    online = status["online"]
    assert online["learner"] == "block-vote"
    assert online["parameters"] == {"margin": 0.1}
    assert [e["learner"] for e in online["vote"]][:2] == ["prior", "averaged-perceptron"]
    assert max(e["weight"] for e in online["vote"]) == 1.0
    assert 0 < online["margin_mistakes"] <= online["margin_bound"] == 300
    rule = online["rule"]
    assert list(rule["weights"]) == ["age", "score"]
    w = np.array(list(rule["weights"].values()))
    assert np.mean((X @ w + rule["offset"] >= 0) == y) > 0.95  # the rule, as shown, predicts the stream
    text = service.metrics.exposition().decode()
    assert 'privstream_examples_learned_total{stream="v"} 500.0' in text
    assert f'privstream_online_mistakes_total{{stream="v"}} {status["mistakes"]}.0' in text
    assert 'privstream_online_margin_bound{stream="v"} 300.0' in text
