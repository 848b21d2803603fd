"""The embedded broker fixture, shared with the integration tests (one broker per session)."""

from tests.integration.conftest import broker  # noqa: F401  (a pytest fixture)
