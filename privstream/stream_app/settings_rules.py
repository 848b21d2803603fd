"""The rules a deployment's settings keep, as functions of the values they read.

:class:`~privstream.stream_app.settings.Settings` calls them from its validators: a Kafka
bootstrap list, a store URL, one user budget for every user-level stream, and listeners that do
not serve raw figures to other hosts without a token. Each raises ``ValueError`` with the fix.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from pydantic import SecretStr

from privstream.learning.errors import InvariantError
from privstream.stream_app.stream_config import StreamConfig

__all__ = [
    "MIN_TOKEN_LENGTH",
    "STORE_SCHEMES",
    "check_listeners",
    "check_user_budget",
    "checked_store_url",
    "is_loopback",
    "kafka_servers",
]

#: URL schemes of ``store_url``: SQLite files on one host, or a PostgreSQL database.
STORE_SCHEMES = ("sqlite", "postgresql", "postgres")

#: The operator token's minimum length (``openssl rand -hex 32`` makes 64 characters).
MIN_TOKEN_LENGTH = 16


def kafka_servers(value: str | None) -> str | None:
    """A bootstrap list ``host:port,...`` (``kafka://`` prefixes dropped), None if blank.

    >>> kafka_servers("kafka://a:9092, b:9093")
    'a:9092,b:9093'
    """
    if value is None or not value.strip():
        return None
    servers = [s.strip().removeprefix("kafka://") for s in value.split(",")]
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port, got {server!r}")
    return ",".join(servers)


def checked_store_url(value: str | None) -> str | None:
    """A ``sqlite:///DIR`` or ``postgresql://`` URL without a password in it, None if blank."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in STORE_SCHEMES:
        raise ValueError(
            f"unknown store_url scheme {scheme + ':' if sep else value!r}: use sqlite:///DIR or "
            "postgresql://USER@HOST:PORT/DB"
        )
    if scheme == "sqlite" and not rest.startswith("/"):
        raise ValueError(f"expected sqlite:///DIR (three slashes before a relative path), got {value!r}")
    if scheme == "sqlite" and rest == "/":
        raise ValueError("sqlite:/// needs a directory: sqlite:///DIR")
    if scheme != "sqlite":
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(value)
        except Exception as exc:
            raise ValueError(f"not a PostgreSQL URL: {exc}") from None
        if "password" in params:
            raise ValueError("put the password in store_password or store_password_file, not in store_url")
    return value


def check_user_budget(
    streams: Sequence[StreamConfig], epsilon_budget: float | None, delta_budget: float
) -> None:
    """A user-level stream needs the deployment's one user budget, and each of its releases fits it."""
    # A person may be in every user-level stream: one budget for the deployment, never one
    # per stream (a user's spend would add up across streams past what each certificate states).
    user_level = [s.name for s in streams if s.release and s.release.privacy_unit == "user"]
    if user_level and epsilon_budget is None:
        raise ValueError(
            f"user_epsilon_budget is required: stream(s) {', '.join(user_level)} have privacy_unit "
            "'user', and a user's lifetime ε is one budget across every user-level stream of the "
            "deployment (set user_epsilon_budget, and user_delta_budget if δ > 0)"
        )
    for stream in streams:
        release = stream.release
        if release is None or release.privacy_unit != "user":
            continue
        none = [0.0] * (release.top_level + 1)  # no sanitizer
        epsilon = max(
            map(sum, zip(release.learner_epsilons, release.sanitizer_epsilons or none, strict=True))
        )
        delta = max(map(sum, zip(release.learner_deltas, release.sanitizer_deltas or none, strict=True)))
        if epsilon_budget is None:  # required above when a stream is user-level
            raise InvariantError("invariant broken: user-level streams have user_epsilon_budget")
        if epsilon > epsilon_budget or delta > delta_budget:
            raise ValueError(
                f"stream {stream.name}: a release costs each user ε={epsilon:g}, δ={delta:g}, more than "
                f"the user budget (user_epsilon_budget {epsilon_budget:g}, user_delta_budget "
                f"{delta_budget:g}): no user could ever be in one"
            )


def check_listeners(
    operator_token: SecretStr | None,
    operator_host: str,
    operator_port: int,
    public_host: str,
    public_port: int,
) -> None:
    """The operator listener is loopback only or guarded by a long token, on its own port."""
    # The operator listener serves raw, non-private figures: loopback only, or a token.
    if operator_token is not None and len(operator_token.get_secret_value()) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"operator_token is shorter than {MIN_TOKEN_LENGTH} characters: anyone could guess it "
            "(make one with: openssl rand -hex 32)"
        )
    if operator_token is None and not is_loopback(operator_host):
        raise ValueError(
            f"operator_host {operator_host!r} is reachable from other hosts and serves raw, "
            "non-private figures (/metrics, /status): set operator_token, or bind 127.0.0.1"
        )
    if (public_host, public_port) == (operator_host, operator_port):
        raise ValueError("public_port and operator_port must differ (two listeners)")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``).

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
