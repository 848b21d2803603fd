"""A stream of K classes end to end on the embedded broker: ``privstream produce --file`` sends a
CSV of labels 0..K-1 (and refuses one with a label outside them, sending nothing), the worker's
online multi-class Perceptron predicts every example before learning it within its mistake bound,
and each window's one-vs-rest release is charged, signed and predicts K classes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privstream.learning.online import make_stream_learner
from privstream.schemas import VectorPredictionBatch
from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.kafka.clients import ensure_topics
from privstream.stream_app.sdk import subscribe
from privstream.stream_app.settings import ReleaseConfig, Settings, StreamConfig, WindowConfig
from privstream.stream_app.store.sqlite_ledger import SqliteLedger

from .conftest import consume_all, run, start_worker
from .test_live_releases import check_public_topic

pytestmark = pytest.mark.live

K, WINDOW, EPSILON = 3, 1000, 3.0
BOUNDS = [(0.0, 1.0), (0.0, 1.0)]
CORNERS = np.array([[0.15, 0.15], [0.85, 0.15], [0.15, 0.85]])  # class k's centre


def clusters(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in three clusters, one per class, each within 0.2 of its corner (so K linear
    scores separate them with a margin)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    offsets = rng.uniform(-0.2, 0.2, (n, 2))
    return np.round(CORNERS[y] + offsets, 4), y


def produce(settings: Settings, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    env.update(settings.to_env())
    command = [sys.executable, "-m", "privstream", "produce", "--stream", "mc", "--file", str(path)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


async def subscribed(settings: Settings, keys_url: str) -> list:
    subscription = subscribe("mc", settings=settings, level="all", keys_url=keys_url, until_caught_up=True)
    return [release async for release in subscription]


def three_class_stream(tabular: bool) -> StreamConfig:
    """Features ``a`` and ``b`` in [0, 1]: declared as feature vectors, or as a tabular stream's
    numeric columns (the same two features, encoded by the service)."""
    release = ReleaseConfig(
        learner="halfspaces", window=WindowConfig(size=WINDOW), epsilon=EPSILON, epsilon_budget=10.0
    )
    if tabular:
        columns = [{"name": name, "bounds": bounds} for name, bounds in zip("ab", BOUNDS, strict=True)]
        return StreamConfig.model_validate(
            {"name": "mc", "columns": columns, "classes": K, "release": release}
        )
    return StreamConfig(
        name="mc", features=2, feature_names=["a", "b"], feature_bounds=BOUNDS, classes=K, release=release
    )


@pytest.mark.parametrize("tabular", [False, True], ids=["vectors", "tabular"])
def test_a_stream_of_three_classes_learns_online_and_releases_one_vs_rest(unique_settings, tmp_path, tabular):
    stream = three_class_stream(tabular)
    settings = unique_settings.model_copy(update={"streams": [stream], "ledger_create_if_missing": True})
    run(ensure_topics(settings))
    worker = start_worker(settings, tmp_path)
    try:
        # Vectors and a tabular stream's rows alike: a label outside the classes sends nothing.
        bad = tmp_path / "bad.csv"
        bad.write_text("a,b,y\n0.1,0.1,0\n0.9,0.1,3\n")
        refused = produce(settings, bad)
        assert refused.returncode != 0
        assert "line 3: label y = '3' is not a class of the stream (0 to 2)" in refused.stderr

        X, y = clusters(2 * WINDOW, seed=3)
        good = tmp_path / "examples.csv"
        good.write_text("y,b,a\n" + "".join(f"{c},{b},{a}\n" for (a, b), c in zip(X, y, strict=True)))
        sent = produce(settings, good)
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout)["sent"] == 2 * WINDOW

        # Online: every example predicted before it was learned, exactly as the learner alone does
        # it, and the mistakes within the multi-class Perceptron's bound 2(d + 1)/γ².
        predicted = run(
            consume_all(
                settings,
                settings.topic("predictions"),
                2 * WINDOW,
                weight=lambda r: len(json.loads(r.value)["predictions"]),
            )
        )
        batches = [VectorPredictionBatch.model_validate_json(r.value) for r in predicted]
        predictions = [p for b in batches for p in b.predictions]
        reference = make_stream_learner("auto", BOUNDS, K)
        assert predictions == reference.learn_many(X, y).tolist()
        assert set(predictions) == set(range(K))  # the refused file sent nothing before these
        last = batches[-1]
        assert last.mistake_bound == 600  # ⌊2 · 3 / 0.1²⌋
        assert 0 < last.mistakes == reference.mistakes <= last.mistake_bound
        assert last.realizable is True
        status = fetch_json(f"{worker.operator_url}/status")["streams"]["mc"]
        assert status["examples"] == 2 * WINDOW and status["mistakes"] == reference.mistakes

        # Private: one release per window, byte for byte the charged ledger entry, K halfspaces at
        # ε/K each, verified against the worker's keys by the SDK and predicting K classes.
        published = run(consume_all(settings, settings.topic("hypotheses"), 2))
        ledger = SqliteLedger.open(settings.resolved_ledger_path)
        releases = check_public_topic(published, ledger)["mc"]
        assert len(releases) == 2
        for release in releases:
            certificate = release.certificate
            assert certificate.epsilon == EPSILON and certificate.sample_size == WINDOW
            assert certificate.parameters["classes"] == K
            assert certificate.parameters["epsilon_per_class"] == 1.0
            assert certificate.mechanism.startswith("one-vs-rest(")
        assert ledger.spent("mc").epsilon == pytest.approx(EPSILON)  # each example in one window

        verified = asyncio.run(subscribed(settings, f"{worker.public_url}/keys"))
        assert sorted(r.ledger_entry_id for r in verified) == sorted(
            r.certificate.ledger_entry_id for r in releases
        )
        fresh_X, fresh_y = clusters(3000, seed=4)
        for release in verified:
            classes = np.asarray(release.predict(fresh_X))
            assert set(classes.tolist()) == set(range(K))
            assert float(np.mean(classes == fresh_y)) > 0.8  # 1000 rows at ε = 1 per class
            assert release.predict(fresh_X[0].tolist()) == classes[0]
            if tabular:  # the release states its columns and predicts from rows by column name
                assert release.certificate.parameters["columns"] == stream.encoder.to_dicts()
                rows = [{"a": a, "b": b} for a, b in fresh_X[:50].tolist()]
                assert np.asarray(release.predict(rows)).tolist() == classes[:50].tolist()
    finally:
        assert worker.stop() == 0
