"""A real Prometheus for the tests: the shipped configuration, a live target, the HTTP API.

The configuration is ``deploy/prometheus/prometheus.yml`` with four changes only: the privstream
job's targets (the live worker's operator listener), the file holding its bearer token, the
intervals (1 s instead of 15 s, so a short load gives rates), and the rule files' absolute paths.
Everything else (the metrics path, the token scheme, the job name the alerts select, the rules
and alerts) is what a deployment runs.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from privstream.stream_app.embedded.broker import die_with_parent, free_port
from tests.deploy.deploy_files import PROMETHEUS
from tests.integration.conftest import wait_until

INTERVAL_SECONDS = 1


def live_config(target: str, token_file: Path) -> dict[str, Any]:
    """The shipped configuration, scraping ``target`` (``host:port``) every second with the bearer
    token in ``token_file``."""
    config = yaml.safe_load(PROMETHEUS.read_text())
    interval = f"{INTERVAL_SECONDS}s"
    config["global"].update(scrape_interval=interval, evaluation_interval=interval, scrape_timeout=interval)
    config["rule_files"] = [str(PROMETHEUS.parent / path) for path in config["rule_files"]]
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == "privstream"]
    job["static_configs"] = [{"targets": [target]}]
    assert job["authorization"]["type"] == "Bearer"  # the operator listener's token, from a file
    job["authorization"]["credentials_file"] = str(token_file)
    return config


class Prometheus:
    """``prometheus`` as a child process on 127.0.0.1 and a free port, with its data in ``workdir``."""

    def __init__(self, binary: str, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def start(self, config: dict[str, Any]) -> Prometheus:
        config_path = self.workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={config_path}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        try:
            wait_until(self._ready, 30, what="Prometheus to be ready")
        except AssertionError:
            self.stop()
            raise AssertionError("Prometheus did not start:\n" + self.log_path.read_text()[-3000:]) from None
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError("Prometheus exited:\n" + self.log_path.read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: Any) -> Any:
        """GET ``/api/v1/<path>``; the ``data`` of a successful answer."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict[str, Any]]:
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending or firing), each with ``labels`` and ``state``."""
        return self.api("alerts")["alerts"]

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def finite_samples(series: list[dict[str, Any]]) -> int:
    """How many samples of a range query's answer are numbers (not NaN or ±Inf)."""
    return sum(1 for s in series for _, value in s["values"] if value not in ("NaN", "+Inf", "-Inf"))
