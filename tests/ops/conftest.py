"""The ops tier: real Prometheus and promtool, a real headless browser, a live deployment.

Every module here marks its tests ``ops`` (``pytestmark``; CI runs the tier). A test whose program is missing
skips with a message naming it (``programs.require``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import broker  # noqa: F401  (a pytest fixture)

from .deployment import LiveDeployment


@pytest.fixture(scope="session")
def deployment(broker, tmp_path_factory) -> Iterator[LiveDeployment]:  # noqa: F811
    live = LiveDeployment(broker.bootstrap, tmp_path_factory.mktemp("ops-deployment"))
    try:
        yield live
    finally:
        live.stop()
