"""The worker's JSON log joins the public releases: every release published on the hypotheses
topic has a log line with its stream, window and ledger entry id, and every "released" line
names a release that was published."""

from __future__ import annotations

import json

import pytest

from privstream.schemas import HypothesisRelease
from tests.integration.conftest import consume_all, run, wait_until

from .deployment import WINDOW, LiveDeployment

pytestmark = [pytest.mark.ops, pytest.mark.live]


def log_lines(deployment: LiveDeployment) -> list[dict]:
    """Every line of the worker's log, each a JSON object (a line that is not fails the test)."""
    lines = []
    for number, line in enumerate(deployment.log_path.read_text().splitlines(), 1):
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"line {number} of the worker's log is not JSON: {line!r}") from None
    return lines


def test_release_log_lines_join_the_published_certificates_by_ledger_entry_id(deployment):
    deployment.running()
    deployment.load(2 * WINDOW, rate=4000.0)

    def released_lines() -> dict[str, dict]:
        lines = [line for line in log_lines(deployment) if line["message"].startswith("released ")]
        return {line["ledger_entry_id"]: line for line in lines} if len(lines) >= 2 else {}

    by_entry = wait_until(released_lines, 60, what="two releases in the worker's log")
    releases = [
        HypothesisRelease.model_validate_json(r.value)
        for r in run(
            consume_all(
                deployment.settings,
                deployment.settings.topic("hypotheses"),
                expected=len(by_entry),
                timeout=60,
            )
        )
    ]
    published = {r.certificate.ledger_entry_id: r for r in releases}
    assert by_entry.keys() <= published.keys(), "a release was logged but not published"
    # The topic may hold releases published since the log was read (its line follows the send).
    by_entry = wait_until(
        lambda: (lines := released_lines()).keys() >= published.keys() and lines,
        30,
        what="a log line for every published release",
    )
    for entry_id, release in published.items():
        line = by_entry.get(entry_id)
        assert line is not None, f"release {entry_id} was published but has no log line"
        assert line["stream_id"] == release.stream_id == deployment.stream
        assert line["window_id"] == release.certificate.window.window_id
        assert line["level"] == "info" and line["logger"] == "privstream.agents.releases.publishing"
