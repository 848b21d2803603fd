"""A tabular stream's releases state its columns, so that a subscriber predicts from a row as the
service encoded it; ``privstream produce --file`` sends a CSV's rows by column name, as the file
has them (the worker encodes and refuses), and their labels only if they are the stream's classes."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import numpy as np
import pytest
from privstream_client import Release
from privstream_client.tabular import RowError

from privstream import __version__
from privstream.agents.releases import ReleaseAgent
from privstream.learning.randomness import seeded
from privstream.stream_app.cli import main
from privstream.stream_app.cli.produce import produce_records
from privstream.stream_app.release_policies import release_policy
from privstream.stream_app.settings import Settings, StreamConfig
from privstream.stream_app.sources.files import ExampleFileError
from privstream.stream_app.store.sqlite_ledger import SqliteLedger
from privstream.stream_app.store.sqlite_state import SqliteStateStore
from privstream.testing.releases import NullMetrics

COLUMNS = [
    {"name": "age", "bounds": [18, 90], "impute": 40},
    {"name": "plan", "categories": ["free", "pro"], "unknown": "other"},
]
N = 400


def tabular_stream() -> StreamConfig:
    release = {
        "learner": "halfspaces",
        "epsilon": 1.0,
        "epsilon_budget": 10.0,
        "window": {"kind": "count", "size": N},
    }
    return StreamConfig(name="t", columns=COLUMNS, release=release)


def rows(n: int, seed: int = 3) -> tuple[list[dict[str, Any]], list[int]]:
    rng = np.random.default_rng(seed)
    ages = rng.uniform(18, 90, n)
    plans = rng.choice(["free", "pro", "team"], n)
    made = [
        {"age": None if i % 10 == 0 else float(a), "plan": str(p)}
        for i, (a, p) in enumerate(zip(ages, plans, strict=True))
    ]
    return made, [int(a > 50) for a in ages]


def test_a_release_states_the_columns_and_predicts_from_a_row() -> None:
    stream = tabular_stream()
    assert stream.encoder is not None and stream.release is not None
    published: list[tuple[str, bytes]] = []

    async def publish(topic: str, stream_id: str, release: bytes, *, timestamp_ms: int | None = None) -> None:
        published.append((topic, release))

    ledger = SqliteLedger.open(":memory:", budgets={"t": (10.0, 0.0)})
    agent = ReleaseAgent(
        {"t": release_policy(stream, None)},
        SqliteStateStore(":memory:"),
        ledger,
        publish,
        NullMetrics(),
        library_version=__version__,
        rng_factory=lambda window_id: seeded(7),
    )
    made, ys = rows(N)
    xs = stream.encoder.encode_many(made).tolist()

    async def run() -> None:
        agent.observe_batch("t", 0, list(range(N)), xs, ys, [None] * N, [None] * N, [None] * N)
        await agent.drain()

    asyncio.run(run())
    bodies = [body for topic, body in published if topic == "hypotheses"]
    assert len(bodies) == 1
    release = Release.from_json(bodies[0])
    assert release.certificate.parameters["columns"] == stream.encoder.to_dicts()
    assert release.encoder is not None and release.encoder.feature_names == stream.feature_labels
    # one row, many rows, and the vector itself: the same predictions
    assert release.predict(made[1]) == release.predict(xs[1])
    np.testing.assert_array_equal(release.predict(made[:50]), release.predict(np.array(xs[:50])))
    with pytest.raises(RowError):
        release.predict({"age": 30})  # plan has no impute value


def settings_with(tmp_path) -> Settings:
    return Settings(
        kafka_bootstrap="127.0.0.1:9", data_dir=tmp_path, streams=[tabular_stream()], _env_file=None
    )


class Args:
    def __init__(self, file, synthetic=None) -> None:
        self.stream, self.file, self.synthetic = "t", file, synthetic


def test_produce_sends_a_csv_s_rows_by_column_name_as_the_file_has_them(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("id,plan,age,y\ne1,pro,31,1\ne2,,NA,-1\ne3,team,old,-1\n")
    sent = [message for _, message in produce_records(Args(path), settings_with(tmp_path))]
    assert sent == [
        {"stream_id": "t", "x": {"age": 31.0, "plan": "pro"}, "y": 1, "id": "e1"},
        {"stream_id": "t", "x": {"age": None, "plan": None}, "y": 0, "id": "e2"},  # -1/+1 read as 0/1
        {"stream_id": "t", "x": {"age": "old", "plan": "team"}, "y": 0, "id": "e3"},
    ]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps({"x": {"age": 20, "plan": "free"}, "y": 1, "extra": 0}) + "\n")
    assert [m for _, m in produce_records(Args(jsonl), settings_with(tmp_path))] == [
        {"stream_id": "t", "x": {"age": 20, "plan": "free"}, "y": 1}
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("age,y\n31,1\n", "missing ['plan']"),
        ("age,plan,city,y\n31,pro,x,1\n", "not columns of the stream ['city']"),
        ("age,plan,y\n31,pro,yes\n", "line 2: label y = 'yes' is not 0/1, -1/+1 or true/false"),
        ("age,plan,y\n31,pro,1\n40,free,2\n", "line 3: label y = '2' is not 0/1, -1/+1 or true/false"),
        ("age,plan,y\n31,pro,0\n40,free,-1\n", "labels mix the 0/1 and -1/+1 conventions"),
        ("age,plan,y\n", "no rows"),
    ],
)
def test_a_malformed_row_file_is_refused_before_anything_is_sent(tmp_path, text: str, says: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    with pytest.raises(ExampleFileError, match=re.escape(says)):
        list(produce_records(Args(path), settings_with(tmp_path)))


def test_a_tabular_stream_of_k_classes_takes_labels_0_to_k_minus_1_and_refuses_others_sending_nothing(
    tmp_path, capsys
) -> None:
    three = StreamConfig(name="t", columns=COLUMNS, classes=3)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"kafka_bootstrap": "127.0.0.1:9", "streams": [three.model_dump()]}))
    path = tmp_path / "rows.csv"
    path.write_text("age,plan,y\n31,pro,2\n40,free,0\n50,pro,true\n")
    k3 = Settings(kafka_bootstrap="127.0.0.1:9", data_dir=tmp_path, streams=[three], _env_file=None)
    assert [m["y"] for _, m in produce_records(Args(path), k3)] == [2, 0, 1]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps({"x": {"age": 20, "plan": "free"}, "y": 2}) + "\n")
    assert [m["y"] for _, m in produce_records(Args(jsonl), k3)] == [2]
    # K itself, -1 (a label of 0/1 streams only), not an integer: one line naming the file's line,
    # exit 2, and the broker (port 9, never reached) is not asked for anything.
    for label in ("3", "-1", "2.5", "two"):
        path.write_text(f"age,plan,y\n31,pro,1\n40,free,{label}\n")
        assert main(["produce", "--config", str(config), "--stream", "t", "--file", str(path)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"privstream produce: error: {path}: line 3: label y = '{label}' is not a class of the "
            "stream (0 to 2)"
        )
    jsonl.write_text(json.dumps({"x": {"age": 20, "plan": "free"}, "y": 3}) + "\n")
    assert main(["produce", "--config", str(config), "--stream", "t", "--file", str(jsonl)]) == 2
    assert "line 1: label y = 3 is not a class of the stream (0 to 2)" in capsys.readouterr().err


def test_produce_refuses_synthetic_rows_in_one_line(tmp_path, capsys) -> None:
    config = tmp_path / "config.json"
    config.write_text(settings_with(tmp_path).model_dump_json(include={"kafka_bootstrap", "streams"}))
    assert main(["produce", "--config", str(config), "--stream", "t", "--synthetic", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stream t is tabular" in err
