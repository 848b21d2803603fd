"""Shared test configuration.

Tests marked ``kafka`` need Apache Kafka (features the embedded broker lacks, DESIGN.md §5);
they run only when ``PRIVSTREAM_KAFKA_BOOTSTRAP`` names one, and are reported as skipped
with that reason otherwise.
"""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PRIVSTREAM_KAFKA_BOOTSTRAP"):
        return
    skip = pytest.mark.skip(reason="needs Apache Kafka: set PRIVSTREAM_KAFKA_BOOTSTRAP=host:port")
    for item in items:
        if "kafka" in item.keywords:
            item.add_marker(skip)
