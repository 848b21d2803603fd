"""The service warns at start when a stream's count window is too small for its learner."""

from __future__ import annotations

import logging

from privstream.stream_app.service import build_service
from privstream.stream_app.settings import Settings


def _stream(name: str, size: int) -> dict:
    return {
        "name": name,
        "hypothesis_class": "thresholds:1024",
        "release": {
            "learner": "global-stability",
            "epsilon": 1,
            "delta": 1e-6,
            "epsilon_budget": 5,
            "delta_budget": 1e-5,
            "window": {"kind": "count", "size": size},
        },
    }


def test_build_warns_about_a_window_too_small_for_its_learner(tmp_path, caplog) -> None:
    settings = Settings(
        kafka_bootstrap="127.0.0.1:9",
        data_dir=tmp_path,
        ledger_create_if_missing=True,
        streams=[_stream("tiny", 10), _stream("fine", 2000)],
    )
    with caplog.at_level(logging.WARNING, logger="privstream.stream_app.release_policies"):
        service = build_service(settings)
    try:
        warnings = [r.getMessage() for r in caplog.records if "window too small" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].startswith("stream tiny:")
        assert "global-stability on thresholds:1024 with windows of 10 examples does not reach" in warnings[0]
    finally:
        assert service.releases is not None
        service.releases.runner.shutdown()  # type: ignore[attr-defined]
        service.store.close()
        if service.ledger is not None:
            service.ledger.close()
