"""promtool on the shipped files: the configuration, every rule file, the alerts' unit tests, and
the dashboard's expressions (as recording rules, so promtool parses each one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.deploy_files import ALERTS, ALERTS_TEST, PROMETHEUS, RULES, dashboard_exprs, plain_promql

from .programs import require
from .prometheus import live_config

pytestmark = pytest.mark.ops


def promtool(*args: str, cwd: Path = PROMETHEUS.parent) -> str:
    result = subprocess.run(
        [require("promtool"), *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_promtool_checks_the_shipped_configuration_and_its_rule_files(tmp_path):
    """The shipped file as it is (its syntax: the token file exists only in a deployment), then in
    full with the token file present, as the live test runs it (rule files and token read)."""
    assert "SUCCESS" in promtool("check", "config", "--syntax-only", str(PROMETHEUS))
    token_file = tmp_path / "operator_token"
    token_file.write_text("a-token")
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(live_config("127.0.0.1:9466", token_file)))
    out = promtool("check", "config", str(config))
    assert "SUCCESS" in out and str(RULES) in out and str(ALERTS) in out


@pytest.mark.parametrize("rules", [RULES, ALERTS], ids=lambda p: p.name)
def test_promtool_checks_every_rule_file(rules):
    assert "SUCCESS" in promtool("check", "rules", str(rules))


def test_promtool_runs_the_unit_tests_of_every_alert_and_recording_rule():
    """Each alert fires on the series that should fire it and stays silent on healthy ones
    (tests/deploy/test_files.py checks that no alert lacks such tests)."""
    assert "SUCCESS" in promtool("test", "rules", ALERTS_TEST.name)


def test_promtool_parses_every_dashboard_expression(tmp_path):
    exprs = dashboard_exprs()
    rules = [{"record": f"dashboard:expr_{i}", "expr": plain_promql(e)} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))  # JSON is YAML
    assert f"SUCCESS: {len(exprs)} rules found" in promtool("check", "rules", str(path))
