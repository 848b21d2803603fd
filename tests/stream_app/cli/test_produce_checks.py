"""``privstream produce`` checks what it sends against the configuration when it has streams: an
unknown stream, another class or a point outside the domain is one line and exit 2 (nothing sent);
its synthetic target is fixed per stream, so that a second run keeps a realizable stream realizable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privstream.agents.pipeline import RawRecord
from privstream.stream_app.cli import build_parser, main
from privstream.stream_app.cli.produce import produce_records
from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings

CLICKS = {"name": "clicks", "hypothesis_class": "thresholds:65536"}
VECTORS = {"name": "v", "features": 2, "feature_bounds": [[0, 1], [0, 1]]}


def settings(tmp_path, streams=(CLICKS, VECTORS)) -> Settings:
    return Settings(kafka_bootstrap="127.0.0.1:9", data_dir=tmp_path, streams=list(streams), _env_file=None)


def records(tmp_path, *argv: str, streams=(CLICKS, VECTORS)) -> list[tuple[str, dict]]:
    args = build_parser().parse_args(["produce", *argv])
    return list(produce_records(args, settings(tmp_path, streams)))


def run(tmp_path, capsys, *argv: str) -> tuple[int, str]:
    """``privstream produce`` with a config file naming the two streams; the broker at port 9 is never
    reached when the command refuses first."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"streams": [CLICKS, VECTORS], "kafka_bootstrap": "127.0.0.1:9"}))
    code = main(["produce", "--config", str(config), *argv])
    return code, capsys.readouterr().err.strip()


def test_an_unknown_stream_is_refused_in_one_line_with_the_close_name(tmp_path, capsys):
    code, err = run(tmp_path, capsys, "--stream", "clickz", "--synthetic", "10")
    assert code == 2
    assert err == (
        "privstream produce: error: unknown stream 'clickz' (did you mean 'clicks'?); known: clicks, v"
    )


def test_another_class_than_the_streams_is_refused(tmp_path, capsys):
    code, err = run(tmp_path, capsys, "--stream", "clicks", "--synthetic", "10", "--class", "thresholds:1024")
    assert code == 2
    assert err == (
        "privstream produce: error: --class thresholds:1024: the stream clicks is of thresholds:65536"
    )
    # The same class in another spelling is the stream's class.
    sent = records(tmp_path, "--stream", "clicks", "--synthetic", "5", "--class", "thresholds:2^16")
    assert len(sent) == 5


def test_a_file_with_a_point_outside_the_domain_is_refused(tmp_path, capsys):
    path = tmp_path / "ex.csv"
    path.write_text("x,y\n3,1\n65536,0\n")
    code, err = run(tmp_path, capsys, "--stream", "clicks", "--file", str(path))
    assert code == 2
    assert err.endswith("x=65536 is outside the domain {0, ..., 65535} of thresholds:65536")
    assert "\n" not in err


def test_a_wrong_feature_count_is_refused(tmp_path, capsys):
    code, err = run(tmp_path, capsys, "--stream", "v", "--synthetic", "10", "--class", "halfspaces:3")
    assert (code, err) == (2, "privstream produce: error: halfspaces:3: the stream v has 2 features")


def test_without_streams_in_the_settings_any_stream_name_is_taken(tmp_path):
    sent = records(tmp_path, "--stream", "anything", "--synthetic", "3", "--class", "points:8", streams=())
    assert [k for k, _ in sent] == ["anything"] * 3


def status_after(tmp_path, batches: list[list[tuple[str, dict]]], streams=(CLICKS, VECTORS)) -> dict:
    service = build_service(settings(tmp_path / "service", streams))
    try:
        offset = 0
        for sent in batches:
            raw = [
                RawRecord("examples", 0, offset + i, k.encode(), json.dumps(m).encode())
                for i, (k, m) in enumerate(sent)
            ]
            offset += len(raw)
            assert service.pipeline.process(raw).dead_letters == []
        return service.status()["streams"]
    finally:
        service.store.close()


@pytest.mark.parametrize("stream", ["clicks", "v"])
def test_two_synthetic_runs_label_by_one_target_and_the_stream_stays_realizable(tmp_path, stream):
    first = records(tmp_path, "--stream", stream, "--synthetic", "400")
    second = records(tmp_path, "--stream", stream, "--synthetic", "400")
    assert [m["x"] for _, m in first] != [m["x"] for _, m in second]  # fresh points each run
    assert status_after(tmp_path, [first, second])[stream]["realizable"] is True


def test_a_seed_changes_the_target_and_reproduces_the_run(tmp_path):
    seeded = records(tmp_path, "--stream", "clicks", "--synthetic", "400", "--seed", "3")
    assert seeded == records(tmp_path, "--stream", "clicks", "--synthetic", "400", "--seed", "3")
    default = records(tmp_path, "--stream", "clicks", "--synthetic", "400")
    # Another target: together the two runs are labelled by no single threshold.
    assert status_after(tmp_path, [default, seeded])["clicks"]["realizable"] is False


THREE = {
    "name": "k3",
    "features": 2,
    "feature_names": ["a", "b"],
    "feature_bounds": [[0, 1], [0, 1]],
    "classes": 3,
}


def test_a_file_of_k_labels_goes_to_a_stream_of_k_classes_and_a_label_outside_them_is_refused(
    tmp_path, capsys
):
    rows = tmp_path / "k3.csv"
    rows.write_text("b,a,y\n0.5,0.25,2\n0.75,1,0\n0,0,1\n")
    sent = records(tmp_path, "--stream", "k3", "--file", str(rows), streams=(THREE, VECTORS))
    assert [(m["x"], m["y"]) for _, m in sent] == [([0.25, 0.5], 2), ([1.0, 0.75], 0), ([0.0, 0.0], 1)]
    lines = tmp_path / "k3.jsonl"
    lines.write_text('{"x": [0.5, 0.5], "y": 2}\n{"x": [0.5, 0.5], "y": true}\n')
    sent = records(tmp_path, "--stream", "k3", "--file", str(lines), streams=(THREE, VECTORS))
    assert [m["y"] for _, m in sent] == [2, 1]

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"streams": [THREE, VECTORS], "kafka_bootstrap": "127.0.0.1:9"}))
    for label in ("3", "-1", "2.5", "two"):  # K itself, -1 (0/1 streams only), not an integer
        rows.write_text(f"a,b,y\n0.5,0.5,1\n0.5,0.5,{label}\n")
        code = main(["produce", "--config", str(config), "--stream", "k3", "--file", str(rows)])
        assert code == 2
        assert capsys.readouterr().err.strip() == (
            f"privstream produce: error: {rows}: line 3: label y = '{label}' is not a class of the "
            "stream (0 to 2)"
        )
    # The 0/1 stream still reads 0/1 (and -1/+1) only.
    rows.write_text("x1,x2,y\n0.5,0.5,2\n")
    code = main(["produce", "--config", str(config), "--stream", "v", "--file", str(rows)])
    assert code == 2
    assert "line 2: label y = '2' is not 0/1, -1/+1 or true/false" in capsys.readouterr().err


def test_synthetic_examples_of_a_stream_of_k_classes_carry_all_k_labels_of_one_linear_target(tmp_path):
    # Two runs (fresh points, one target fixed per stream) with a margin: together separable by K
    # linear scores, so the service's multi-class Perceptron stays within 2(d + 1)/γ² = 600 mistakes.
    run = ("--stream", "k3", "--synthetic", "1500", "--margin", "0.1")
    runs = [records(tmp_path, *run, streams=(THREE,)), records(tmp_path, *run, streams=(THREE,))]
    labels = np.array([m["y"] for run in runs for _, m in run])
    assert set(labels.tolist()) == {0, 1, 2} and np.bincount(labels).min() > 150
    status = status_after(tmp_path, runs, streams=(THREE,))["k3"]
    assert status["examples"] == 3000 and status["mistakes"] <= 600 and status["realizable"] is True
    # With label noise a label moves to another class: the stream is no longer separable.
    noisy = records(tmp_path, *run[:2], "--synthetic", "3000", "--label-noise", "0.3", streams=(THREE,))
    assert set(m["y"] for _, m in noisy) == {0, 1, 2}
    assert status_after(tmp_path / "noisy", [noisy], streams=(THREE,))["k3"]["realizable"] is False
