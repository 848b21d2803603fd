"""A CSV with categorical and missing values through a live tabular stream, run exactly as the
tabular streams page (docs/guide/tabular-streams.md) shows it: the broker and the worker by hand,
``privstream produce --file customers.csv``, the refused rows counted by reason, two private
releases that state their columns, and a subscriber predicting from rows.

Only the ports change: the page's 9092, 6066 and 9466 become free ones.
"""

from __future__ import annotations

import csv
import json
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from privstream_client import Release
from privstream_client.tabular import RowError

from privstream.stream_app.embedded.demo import fetch_json
from privstream.stream_app.settings import Settings

from ..docs.examples import DOCS
from ..docs.test_live_pages import Terminals
from .conftest import wait_until

pytestmark = pytest.mark.live

PAGE = DOCS / "guide" / "tabular-streams.md"


def test_a_csv_with_categories_and_missing_values_flows_through_the_live_stream(tmp_path: Path) -> None:
    terminals = Terminals(tmp_path)
    ports = terminals.ports
    try:
        terminals.run_page(PAGE)
        assert len(terminals.running) == 2, "the page no longer starts a broker and a worker"

        # What the encoder says of the file is what the worker did with it, reason by reason.
        stream = Settings(config_file=tmp_path / "privstream.toml", _env_file=None).stream("customers")
        encoder = stream.encoder if stream is not None else None
        assert encoder is not None
        verdicts: Counter[str] = Counter()
        for cells in csv.DictReader((tmp_path / "customers.csv").open()):
            try:
                encoder.encode(encoder.parse_text(cells))
                verdicts["learned"] += 1
            except RowError as exc:
                verdicts[exc.reason] += 1
        assert verdicts["unknown_category"] > 0 and verdicts["missing_value"] > 0
        counted = [
            f'privstream_examples_invalid_total{{reason="{reason}"}} {verdicts[reason]}.0'
            for reason in ("unknown_category", "missing_value")
        ]

        def all_counted() -> bool:  # the worker may still be reading the file's last rows
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['9466']}/metrics") as response:
                metrics = response.read().decode()
            status = fetch_json(f"http://127.0.0.1:{ports['9466']}/status")
            learned = status is not None and status["streams"]["customers"]["examples"] == verdicts["learned"]
            return learned and all(line in metrics for line in counted)

        wait_until(all_counted, 60, what="every row learned or dead-lettered with its reason")

        lines = (tmp_path / "releases.jsonl").read_text().splitlines()
        releases = [Release.from_json(line) for line in lines]
        assert len(releases) == 2
        for release in releases:
            assert release.certificate.parameters["columns"] == encoder.to_dicts()
            assert release.certificate.sample_size == 400
            row = {"age": 67, "plan": "pro", "city": "lyon"}
            assert release.predict(row) == release.predict(encoder.encode(row))
        assert {json.loads(line)["stream_id"] for line in lines} == {"customers"}
    finally:
        terminals.stop()
