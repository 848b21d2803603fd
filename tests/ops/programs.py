"""The system programs of the ops tier, and the Debian packages that ship them.

scripts/test.sh installs the packages when it runs as root with apt-get; elsewhere a test that
needs a missing program skips, and its message names the program and the package.
"""

from __future__ import annotations

import shutil

import pytest

#: program -> Debian package
PACKAGES = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "chromium": "chromium",
}


def require(program: str) -> str:
    """The program's path; skips the test (naming the program and its package) when it is missing."""
    path = shutil.which(program)
    if path is None:
        pytest.skip(
            f"{program} not found on PATH: the ops tier needs Debian's {PACKAGES[program]} package "
            f"(scripts/test.sh installs it when run as root with apt-get)"
        )
    return path
