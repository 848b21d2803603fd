"""Service settings: environment (``PRIVSTREAM_*``), an optional TOML/JSON file, and defaults.

Priority, highest first: keyword arguments (the CLI), environment variables, the config file
(``PRIVSTREAM_CONFIG_FILE`` or ``config_file=``), defaults. Nested values such as ``streams``
are JSON in the environment::

    PRIVSTREAM_KAFKA_BOOTSTRAP=127.0.0.1:9092
    PRIVSTREAM_STREAMS='[{"name": "clicks", "hypothesis_class": "thresholds:65536"}]'

>>> s = Settings(streams=[{"name": "a", "hypothesis_class": "thresholds:16"}], _env_file=None)
>>> s.topic("examples")
'examples'
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from privstream.stream_app.release_config import ReleaseConfig, WindowConfig
from privstream.stream_app.settings_rules import (
    check_listeners,
    check_user_budget,
    checked_store_url,
    is_loopback,
    kafka_servers,
)
from privstream.stream_app.settings_sources import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    ConfigFileSource,
    NamedEnvSettingsSource,
    describe_validation_error,
    json_error_message,
    load_config_file,
)
from privstream.stream_app.stream_config import StreamConfig

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "FAUST_ENV_PREFIX",
    "TOPIC_NAMES",
    "ReleaseConfig",
    "Settings",
    "StreamConfig",
    "WindowConfig",
    "describe_validation_error",
    "is_loopback",
    "json_error_message",
    "load_config_file",
]

log = logging.getLogger(__name__)

#: faust reads its own settings from the environment under this prefix only (an expert escape
#: hatch, e.g. PRIVSTREAM_FAUST_STREAM_BUFFER_MAXSIZE); unprefixed WEB_PORT and friends are ignored.
FAUST_ENV_PREFIX = f"{ENV_PREFIX}FAUST_"

SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

#: The logical topics of the service; their Kafka names are ``topic_prefix + name``.
TOPIC_NAMES = ("examples", "examples.dlq", "predictions", "hypotheses", "sanitized", "keys")


class Settings(BaseSettings):
    """Everything the service reads from its environment; validated on construction."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
    )

    config_file: Path | None = Field(default=None, description="TOML or JSON file with these settings")

    # --- identity and Kafka -------------------------------------------------------------------
    app_id: str = Field(default="privstream", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    kafka_bootstrap: str | None = Field(
        default=None,
        description="host:port[,host:port...] of Apache Kafka; unset: start the embedded broker",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    topic_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    topic_partitions: int = Field(default=4, ge=1, le=10_000)
    topic_replication_factor: int = Field(default=1, ge=1)
    kafka_session_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_heartbeat_interval_seconds: float = Field(default=3.0, gt=0)
    kafka_fetch_max_wait_ms: int = Field(
        default=50,
        ge=0,
        le=60_000,
        description="how long the ingest consumer's fetch may wait at the broker for new data; the "
        "embedded broker waits all of it (Kafka's default 500 ms put ~0.6 s into p50 latency)",
    )
    examples_log_replaced: Literal["auto", "rebase", "refuse"] = Field(
        default="auto",
        description="what a worker does with a partition of the examples topic whose offsets went back "
        "(its log ends below what the state store holds, or holds another record where one was read: "
        "the broker restarted without its data, or the topic was re-created): 'rebase' reads the new "
        "log as new examples after the old ones (logged and counted), 'refuse' stops the worker "
        "with one line; 'auto': rebase on the embedded broker (memory only), refuse on Kafka",
    )

    # --- web: two listeners, one per trust zone -----------------------------------------------
    public_host: str = Field(default="127.0.0.1", description="public listener: releases, budgets, pages")
    public_port: int = Field(default=6066, ge=1, le=65535)
    operator_host: str = Field(
        default="127.0.0.1", description="operator listener: /metrics, /status, probes (raw figures)"
    )
    operator_port: int = Field(default=9466, ge=1, le=65535)
    operator_token: SecretStr | None = Field(
        default=None,
        description="bearer token the operator listener demands (all but /healthz and /readyz); "
        "required when operator_host is not a loopback address",
    )
    stall_seconds: float = Field(
        default=60.0, gt=0, description="/healthz fails when received examples wait this long"
    )
    public_max_connections: int = Field(
        default=256, ge=1, le=100_000, description="open connections the public listener holds at most"
    )
    operator_max_connections: int = Field(
        default=64, ge=1, le=100_000, description="open connections the operator listener holds at most"
    )
    public_max_connections_per_client: int = Field(
        default=16,
        ge=1,
        le=100_000,
        description="open connections one client (IPv4 address, IPv6 /64) holds at most on the public "
        "listener; one more is answered 429",
    )
    operator_max_connections_per_client: int = Field(
        default=16, ge=1, le=100_000, description="the same for the operator listener"
    )
    listener_header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a new connection's first request head must arrive within this, or it is dropped",
    )
    listener_idle_timeout_seconds: float = Field(
        default=30.0, gt=0, description="a connection with no request in progress is closed after this"
    )
    public_cache_seconds: float = Field(
        default=1.0, ge=0, description="how long the public pages reuse a ledger read"
    )

    # --- signed releases (stream_app/signing.py) ------------------------------------------------
    signing_key: SecretStr | None = Field(
        default=None, description="the worker's Ed25519 private key (PEM) that signs every release"
    )
    signing_key_file: Path | None = Field(
        default=None,
        description="file holding the signing key (PEM; a mounted secret); neither set: "
        "data_dir/signing_key.pem, created only with a new ledger (which records the deployment's key)",
    )
    published_keys_file: Path | None = Field(
        default=None,
        description="a key set of further public keys the public listener serves on /keys and the "
        "worker trusts on the public log (keys from before the ledger recorded them); none signs",
    )
    trusted_keys_file: Path | None = Field(
        default=None,
        description="subscribers: the public keys (key set or PEM) releases must be signed with; "
        "unset: fetched from keys_url",
    )
    keys_url: str | None = Field(
        default=None,
        description="subscribers: where to fetch the key set when trusted_keys_file is unset; "
        "default: /keys of the public listener at public_host:public_port",
    )

    # --- the individual privacy filter (user level) --------------------------------------------
    user_epsilon_budget: float | None = Field(
        default=None,
        gt=0,
        description="each user's lifetime ε across all user-level streams of the deployment (one "
        "ledger); required when a stream has privacy_unit 'user'",
    )
    user_delta_budget: float = Field(default=0.0, ge=0, lt=1, description="each user's lifetime δ")

    # --- state and logging ----------------------------------------------------------------------
    data_dir: Path = Field(default=Path("var"), description="local state: faust data, ledger")
    store_url: str | None = Field(
        default=None,
        description="where the privacy ledger and the window state live, shared by all workers: "
        "sqlite:///DIR (files DIR/ledger.sqlite3 and DIR/state.sqlite3; one host) or "
        "postgresql://USER@HOST:PORT/DB?sslmode=verify-full (several hosts); unset: SQLite at "
        "ledger_path and state_path",
    )
    store_password: SecretStr | None = Field(default=None, description="PostgreSQL password (a secret)")
    store_password_file: Path | None = Field(
        default=None, description="file holding the PostgreSQL password (a mounted Kubernetes Secret)"
    )
    store_sslmode: SslMode | None = Field(
        default=None, description="PostgreSQL TLS mode (overrides the URL's sslmode)"
    )
    store_sslrootcert: Path | None = Field(
        default=None, description="CA certificate(s) that sign the PostgreSQL server's certificate"
    )
    store_pool_size: int = Field(default=4, ge=1, le=200, description="PostgreSQL connections per store")
    store_retry_seconds: float = Field(
        default=30.0, ge=0, description="how long a PostgreSQL operation retries a lost connection"
    )
    ledger_path: Path | None = Field(
        default=None, description="the privacy ledger (SQLite); default data_dir/ledger.sqlite3"
    )
    ledger_create_if_missing: bool = Field(
        default=False,
        description="create the ledger (the file, or its tables in the PostgreSQL database) if it "
        "does not exist (first start only: a missing ledger is otherwise an error, never a "
        "silently reset budget)",
    )
    state_path: Path | None = Field(
        default=None, description="window buffers and SOA snapshots (SQLite); default data_dir/state.sqlite3"
    )
    slot_cache_file: Path | None = Field(
        default=None,
        description="where measured publication slots are remembered (per workload and machine, never "
        "data); default $XDG_CACHE_HOME/privstream/slot-measurements.json (~/.cache/...), shared by "
        "the machine's workers, or data_dir/slot-measurements.json where that cannot be written",
    )
    learner_niceness: int = Field(
        default=10,
        ge=0,
        le=19,
        description="how much lower the learner processes' CPU priority is than the worker's (nice): "
        "where every core is busy, release fits take the CPU ingest leaves rather than slowing the "
        "stream down (0: the same priority)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text lines for people, or one JSON object per line for log "
        "pipelines (the container and Kubernetes files set json)",
    )

    # --- streams --------------------------------------------------------------------------------
    streams: list[StreamConfig] = Field(default_factory=list)

    @field_validator("kafka_bootstrap")
    @classmethod
    def _bootstrap(cls, value: str | None) -> str | None:
        return kafka_servers(value)

    @field_validator("streams")
    @classmethod
    def _unique_streams(cls, streams: list[StreamConfig]) -> list[StreamConfig]:
        names = [s.name for s in streams]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"stream names must be unique; repeated: {', '.join(duplicates)}")
        return streams

    @field_validator("store_url")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        return checked_store_url(value)

    @model_validator(mode="after")
    def _store_consistent(self) -> Settings:
        if self.store_backend == "postgresql" and (self.ledger_path or self.state_path):
            raise ValueError(
                "ledger_path and state_path name SQLite files; with a postgresql store_url the "
                "ledger and the state are in that database (unset them)"
            )
        if self.store_password is not None and self.store_password_file is not None:
            raise ValueError("set store_password or store_password_file, not both")
        if self.signing_key is not None and self.signing_key_file is not None:
            raise ValueError("set signing_key or signing_key_file, not both")
        return self

    @model_validator(mode="after")
    def _one_user_budget(self) -> Settings:
        check_user_budget(self.streams, self.user_epsilon_budget, self.user_delta_budget)
        return self

    @model_validator(mode="after")
    def _sasl_complete(self) -> Settings:
        if self.kafka_security_protocol.startswith("SASL_") and not (
            self.kafka_sasl_mechanism and self.kafka_sasl_username and self.kafka_sasl_password
        ):
            raise ValueError(
                f"kafka_security_protocol={self.kafka_security_protocol} needs kafka_sasl_mechanism, "
                "kafka_sasl_username and kafka_sasl_password"
            )
        return self

    @model_validator(mode="after")
    def _operator_listener_guarded(self) -> Settings:
        check_listeners(
            self.operator_token, self.operator_host, self.operator_port, self.public_host, self.public_port
        )
        return self

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        renamed = {"web_host": "public_host", "web_port": "public_port"}
        given = set(data) if isinstance(data, dict) else set()
        given |= {k[len(ENV_PREFIX) :].lower() for k in os.environ if k.startswith(ENV_PREFIX)}
        for old, new in renamed.items():
            if old in given:
                raise ValueError(
                    f"{old} was renamed {new} (the public listener); operator pages (/metrics, /status, "
                    "/healthz, /readyz) are on operator_host/operator_port"
                )
        return data

    def topic(self, name: str) -> str:
        """The Kafka topic name of a logical topic (see :data:`TOPIC_NAMES`)."""
        if name not in TOPIC_NAMES:
            raise KeyError(f"unknown topic {name!r}; known: {', '.join(TOPIC_NAMES)}")
        return f"{self.topic_prefix}{name}"

    @property
    def store_backend(self) -> Literal["sqlite", "postgresql"]:
        """Which storage backend holds the ledger and the state (from :attr:`store_url`)."""
        return "sqlite" if self.store_url is None or self.store_url.startswith("sqlite:") else "postgresql"

    @property
    def _sqlite_dir(self) -> Path:
        if self.store_url is None:
            return self.data_dir
        return Path(self.store_url.removeprefix("sqlite:///"))

    @property
    def resolved_ledger_path(self) -> Path:
        """The SQLite ledger file (with a SQLite store)."""
        return self.ledger_path or self._sqlite_dir / "ledger.sqlite3"

    @property
    def resolved_state_path(self) -> Path:
        """The SQLite state file (with a SQLite store)."""
        return self.state_path or self._sqlite_dir / "state.sqlite3"

    @property
    def resolved_keys_url(self) -> str:
        """Where subscribers fetch the release signing keys: ``keys_url``, else the public listener's
        ``/keys`` (on 127.0.0.1 when it binds every address)."""
        if self.keys_url:
            return self.keys_url
        host = "127.0.0.1" if self.public_host in ("0.0.0.0", "::", "") else self.public_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.public_port}/keys"

    def store_password_value(self) -> str | None:
        """The PostgreSQL password: from ``store_password``, else read from ``store_password_file``."""
        if self.store_password is not None:
            return self.store_password.get_secret_value()
        if self.store_password_file is not None:
            try:
                return self.store_password_file.read_text().rstrip("\r\n")
            except OSError as exc:
                raise ValueError(
                    f"cannot read store_password_file {self.store_password_file}: {exc}"
                ) from None
        return None

    def stream(self, name: str) -> StreamConfig | None:
        return next((s for s in self.streams if s.name == name), None)

    def to_env(self) -> dict[str, str]:
        """These settings as ``PRIVSTREAM_*`` environment variables (for child processes).

        Round-trips: ``Settings()`` in an environment made of ``to_env()`` equals ``self``.
        """
        env = {}
        for name, value in self.model_dump(mode="json", exclude={"config_file"}).items():
            if value is None:
                continue
            secret = getattr(self, name)
            if isinstance(secret, SecretStr):
                value = secret.get_secret_value()
            env[f"{ENV_PREFIX}{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return env

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            NamedEnvSettingsSource(settings_cls),
            ConfigFileSource(settings_cls, init_settings),
        )
