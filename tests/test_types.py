"""The package type-checks: ``mypy`` with the project's configuration (``[tool.mypy]`` in
pyproject.toml: strict on ``learning`` and ``agents``) reports no error."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_error():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-color-output"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "No module named mypy" not in result.stderr, (
        "mypy is part of the test extra: pip install -e '.[test]'"
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 0 and not errors, (
        f"mypy reports {len(errors)} error(s):\n{result.stdout}{result.stderr}"
    )
