"""``privstream produce`` for streams of feature vectors: CSV with named feature columns, JSON lines
with ``x`` a list, and ``--synthetic --class halfspaces:D``; the records it would send are valid
examples of the configured stream, learned by its online learner."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.agents.pipeline import RawRecord
from privstream.stream_app.cli import build_parser, main
from privstream.stream_app.cli.produce import produce_records
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings

BOUNDS = [[0.0, 100.0], [0.0, 1.0], [-1.0, 1.0]]
STREAM = {"name": "v", "features": 3, "feature_bounds": BOUNDS, "feature_names": ["age", "ratio", "delta"]}


def settings(tmp_path, streams=(STREAM,)) -> Settings:
    return Settings(kafka_bootstrap="127.0.0.1:9", data_dir=tmp_path, streams=list(streams), _env_file=None)


def records(tmp_path, *argv: str, streams=(STREAM,)) -> list[tuple[str, dict]]:
    args = build_parser().parse_args(["produce", "--stream", "v", *argv])
    return list(produce_records(args, settings(tmp_path, streams)))


def learned_by_the_service(tmp_path, sent: list[tuple[str, dict]]) -> dict:
    service = build_service(settings(tmp_path / "service"))
    try:
        raw = [
            RawRecord("examples", 0, i, k.encode(), json.dumps(m).encode()) for i, (k, m) in enumerate(sent)
        ]
        out = service.pipeline.process(raw)
        assert out.dead_letters == []
        return service.status()["streams"]["v"]
    finally:
        service.store.close()


def test_a_csv_with_named_feature_columns_is_read_by_name(tmp_path):
    path = tmp_path / "ex.csv"
    # Columns in another order than the stream's features, and a -1/+1 label.
    path.write_text("delta,y,age,ratio\n0.5,1,30,0.25\n-0.5,-1,70,0.75\n")
    sent = records(tmp_path, "--file", str(path))
    assert sent == [
        ("v", {"stream_id": "v", "x": [30.0, 0.25, 0.5], "y": 1}),
        ("v", {"stream_id": "v", "x": [70.0, 0.75, -0.5], "y": 0}),
    ]
    assert learned_by_the_service(tmp_path, sent)["examples"] == 2


def test_a_csv_must_carry_the_streams_features(tmp_path, capsys):
    path = tmp_path / "ex.csv"
    path.write_text("age,ratio,dleta,y\n30,0.25,0.5,1\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"streams": [STREAM], "kafka_bootstrap": "127.0.0.1:9"}))
    code = main(["produce", "--config", str(config), "--stream", "v", "--file", str(path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "missing ['delta']" in err and "not features of the stream ['dleta']" in err


def test_json_lines_with_a_feature_list(tmp_path):
    path = tmp_path / "ex.jsonl"
    path.write_text('{"x": [10, 0.5, 0], "y": 1}\n{"x": [90, 0.1, -1], "y": 0}\n')
    sent = records(tmp_path, "--file", str(path))
    assert [m["x"] for _, m in sent] == [[10.0, 0.5, 0.0], [90.0, 0.1, -1.0]]
    assert learned_by_the_service(tmp_path, sent)["examples"] == 2


def test_a_vector_file_for_a_stream_the_settings_do_not_name(tmp_path):
    path = tmp_path / "ex.csv"
    path.write_text("f1,f2,y\n1,2,1\n3,4,0\n")
    sent = records(tmp_path, "--file", str(path), streams=())
    assert [m["x"] for _, m in sent] == [[1.0, 2.0], [3.0, 4.0]]
    jsonl = tmp_path / "ex.jsonl"
    jsonl.write_text('{"x": [1.5], "y": true}\n')
    assert records(tmp_path, "--file", str(jsonl), streams=())[0][1]["x"] == [1.5]
    points = tmp_path / "points.csv"
    points.write_text("x,y\n3,1\n")
    assert records(tmp_path, "--file", str(points), streams=())[0][1]["x"] == 3  # integer points as before


def test_synthetic_halfspaces_with_a_margin_are_separable_and_within_the_bounds(tmp_path):
    sent = records(
        tmp_path, "--synthetic", "3000", "--class", "halfspaces:3", "--margin", "0.2", "--seed", "4"
    )
    X = np.array([m["x"] for _, m in sent])
    assert X.shape == (3000, 3)
    lo, hi = np.array(BOUNDS).T
    assert np.less_equal(lo, X).all() and np.less_equal(X, hi).all()
    status = learned_by_the_service(tmp_path, sent)
    # The Perceptron's bound (R/γ)² for the stream's margin (the service's own γ is the default 0.1).
    assert status["examples"] == 3000 and status["mistakes"] <= 4 / 0.2**2
    assert status["realizable"] is True


def test_synthetic_takes_the_streams_dimension_and_refuses_the_wrong_kind(tmp_path):
    sent = records(tmp_path, "--synthetic", "10")  # no --class: the configured stream says halfspaces:3
    assert len(sent[0][1]["x"]) == 3
    with pytest.raises(ValueError, match="has 3 features"):
        records(tmp_path, "--synthetic", "10", "--class", "halfspaces:2")
    with pytest.raises(ValueError, match="takes feature vectors"):
        records(tmp_path, "--synthetic", "10", "--class", "thresholds:8")
    with pytest.raises(ValueError, match="halfspaces:D with"):
        records(tmp_path, "--synthetic", "10", "--class", "halfspaces:x", streams=())


def test_online_runs_a_vector_streams_learner_over_a_file(tmp_path, capsys):
    from tests.learning.online.streams import noisy_stream

    X, y, bounds = noisy_stream(2, 600, seed=9, noise=0.3)
    path = tmp_path / "ex.csv"
    path.write_text("a,b,y\n" + "".join(f"{p},{q},{label}\n" for (p, q), label in zip(X, y, strict=True)))
    argv = [
        "online",
        "halfspaces:2",
        "--examples",
        str(path),
        "--bounds",
        json.dumps(bounds),
        "--margin",
        "0.5",
    ]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["examples"] == 600 and out["margin_bound"] == 12 < out["mistakes"] and out["realizable"] is False
    )
    assert list(out["weights"]) == ["a", "b"]
    assert main(argv) == 0
    assert "no: " in capsys.readouterr().out  # no halfspace has margin 0.5 on the noisy stream
    assert main(["online", "halfspaces:2", "--examples", str(path)]) == 2  # the bounds are required
