"""Settings: sources and their priority, validation errors, and faust's env isolation."""

import json

import pytest
from pydantic import ValidationError

from privstream.stream_app.cli import main
from privstream.stream_app.settings import Settings

STREAMS = [{"name": "clicks", "hypothesis_class": "thresholds:1024"}]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for key in list(os.environ):
        if key.startswith("PRIVSTREAM_"):
            monkeypatch.delenv(key)


def test_defaults():
    s = Settings()
    assert s.kafka_bootstrap is None
    assert (s.public_host, s.operator_host) == ("127.0.0.1", "127.0.0.1")
    assert s.public_port != s.operator_port and s.operator_token is None
    assert s.topic("examples.dlq") == "examples.dlq"


def test_environment_with_json_streams(monkeypatch):
    monkeypatch.setenv("PRIVSTREAM_KAFKA_BOOTSTRAP", "kafka://broker:9092, other:9093")
    monkeypatch.setenv("PRIVSTREAM_STREAMS", json.dumps(STREAMS))
    monkeypatch.setenv("PRIVSTREAM_TOPIC_PREFIX", "t1.")
    s = Settings()
    assert s.kafka_bootstrap == "broker:9092,other:9093"
    assert s.streams[0].name == "clicks"
    assert s.topic("examples") == "t1.examples"


def test_priority_kwargs_over_env_over_file(tmp_path, monkeypatch):
    config = tmp_path / "privstream.toml"
    config.write_text('app_id = "from-file"\npublic_port = 7000\ntopic_partitions = 8\n')
    monkeypatch.setenv("PRIVSTREAM_CONFIG_FILE", str(config))
    monkeypatch.setenv("PRIVSTREAM_PUBLIC_PORT", "7001")
    s = Settings(topic_partitions=2)
    assert (s.app_id, s.public_port, s.topic_partitions) == ("from-file", 7001, 2)


def test_json_config_file(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"streams": STREAMS}))
    assert Settings(config_file=config).streams[0].hypothesis_class == "thresholds:1024"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"public_port": 0}, "public_port"),
        ({"operator_port": 70000}, "operator_port"),
        ({"operator_host": "0.0.0.0"}, "set operator_token"),
        ({"public_port": 7000, "operator_port": 7000}, "must differ"),
        ({"web_port": 7000}, "web_port was renamed public_port"),
        ({"kafka_bootstrap": "no-port"}, "host:port"),
        ({"streams": [{"name": "a", "hypothesis_class": "thresholds:0"}]}, "hypothesis_class"),
        ({"streams": [{"name": "a", "hypothesis_class": "nonsense:5"}]}, "hypothesis_class"),
        ({"streams": STREAMS * 2}, "unique"),
        ({"streams": [{"name": "a", "hypothesis_class": "thresholds:8", "typo": 1}]}, "typo"),
        ({"kafka_security_protocol": "SASL_SSL"}, "kafka_sasl_mechanism"),
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_invalid_settings_are_clear_errors(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        Settings(**kwargs)


def test_bad_config_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("this is = = not toml")
    with pytest.raises(ValueError, match="not valid"):
        Settings(config_file=bad)
    with pytest.raises(FileNotFoundError):
        Settings(config_file=tmp_path / "missing.toml")


def test_old_web_port_variable_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PRIVSTREAM_WEB_PORT", "7000")
    with pytest.raises(ValidationError, match="web_port was renamed public_port"):
        Settings()


def test_to_env_round_trips(monkeypatch):
    s = Settings(
        app_id="x1",
        kafka_bootstrap="h:1",
        streams=STREAMS,
        topic_prefix="p.",
        operator_host="0.0.0.0",
        operator_token="s3cret-of-16-chars",
    )
    for key, value in s.to_env().items():
        monkeypatch.setenv(key, value)
    assert Settings() == s


def test_faust_unprefixed_environment_cannot_override(monkeypatch):
    """faust reads WEB_PORT and friends from the environment; ours must win."""
    from privstream.stream_app.faust_app import build_app

    monkeypatch.setenv("WEB_PORT", "7777")
    monkeypatch.setenv("BROKER_URL", "kafka://elsewhere:1")
    app = build_app(Settings(kafka_bootstrap="127.0.0.1:19092"))
    assert app.conf.web_enabled is False  # privstream's own two listeners serve the pages
    assert str(app.conf.broker[0]) == "kafka://127.0.0.1:19092"
    assert app.conf.processing_guarantee.value == "at_least_once"


def test_cli_reports_bad_settings_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PRIVSTREAM_PUBLIC_PORT", "not-a-port")
    assert main(["produce", "--stream", "s", "--file", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privstream produce: error: invalid settings: public_port")
    assert "\n" not in err


VECTORS = {"name": "v", "features": 2, "feature_bounds": [[0, 1], [0, 1]]}


def test_a_vector_stream_needs_no_release_and_has_the_auto_learner_by_default():
    stream = Settings(streams=[VECTORS], _env_file=None).streams[0]
    assert stream.release is None and stream.online_learner == "auto" and stream.online_params == {}
    assert stream.feature_labels == ["x1", "x2"]
    named = Settings(streams=[{**VECTORS, "feature_names": ["age", "income"]}], _env_file=None).streams[0]
    assert named.feature_labels == ["age", "income"]


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        ({**VECTORS, "online_learner": "svm"}, "unknown online learner"),
        (
            {**VECTORS, "online_params": {"margin": 0}},
            "parameter 'margin' of online learner 'auto' must be a number > 0",
        ),
        ({**VECTORS, "online_params": {"learning_rate": 1}}, "learning_rate"),
        ({**VECTORS, "feature_names": ["a"]}, "2 distinct names"),
        ({**VECTORS, "feature_names": ["a", "a"]}, "2 distinct names"),
        (
            {"name": "v", "hypothesis_class": "thresholds:8", "online_params": {"margin": 0.1}},
            "feature vectors",
        ),
        ({"name": "v", "hypothesis_class": "thresholds:8", "online_learner": "logistic"}, "feature vectors"),
        (
            {
                "name": "v",
                "features": 2,
                "feature_bounds": [[0, 1]],
                "release": {"learner": "bayes-consistent", "epsilon": 1, "epsilon_budget": 5},
            },
            "bounds",
        ),
        (
            {
                "name": "v",
                "features": 1,
                "feature_bounds": [[0, 1]],
                "release": {"learner": "generic", "epsilon": 1, "epsilon_budget": 5},
            },
            "vector learner",
        ),
        (
            {
                "name": "v",
                "hypothesis_class": "thresholds:8",
                "release": {"learner": "bayes-consistent", "epsilon": 1, "epsilon_budget": 5},
            },
            "needs feature",
        ),
        (
            {"name": "v", "hypothesis_class": "thresholds:8", "features": 1, "feature_bounds": [[0, 1]]},
            "either",
        ),
        ({"name": "v"}, "either"),
    ],
)
def test_vector_stream_configuration_errors(stream, message):
    with pytest.raises(ValidationError, match=message):
        Settings(streams=[stream])


def test_vector_stream_configuration():
    s = Settings(
        streams=[
            {
                "name": "v",
                "features": 2,
                "feature_bounds": [[0, 1], [-1, 1]],
                "release": {"learner": "bayes-consistent", "epsilon": 1, "epsilon_budget": 5},
            }
        ]
    )
    assert s.streams[0].kind == "vector" and s.streams[0].hypothesis_class is None


@pytest.mark.parametrize(
    "release",
    [
        {
            "learner": "global-stability",
            "epsilon": 1,
            "delta": 1e-6,
            "epsilon_budget": 5,
            "delta_budget": 1e-5,
        },
        {"learner": "generic", "sanitizer": "mwem", "epsilon": 1, "epsilon_budget": 5},
        {"learner": "generic", "sanitizer": "hierarchical", "epsilon": 1, "epsilon_budget": 5},
    ],
)
def test_time_windows_take_every_learner_and_sanitizer(release):
    """The algorithms derive their parameters from expected_size where n is private."""
    window = {"kind": "time", "seconds": 60}
    settings = Settings(
        streams=[
            {
                "name": "s",
                "hypothesis_class": "thresholds:8",
                "release": {**release, "window": window, "expected_size": 500},
            }
        ]
    )
    assert settings.streams[0].release.window.kind == "time"


def test_user_level_count_windows_are_refused_naming_the_privacy_unit():
    release = {
        "learner": "generic",
        "epsilon": 1,
        "epsilon_budget": 5,
        "expected_size": 50,
        "privacy_unit": "user",
        "user_contribution_bound": 3,
    }
    with pytest.raises(ValidationError, match="privacy_unit 'user' needs time windows"):
        Settings(streams=[{"name": "s", "hypothesis_class": "thresholds:8", "release": release}])
    timed = {**release, "window": {"kind": "time", "seconds": 60}}
    timed_stream = {"name": "s", "hypothesis_class": "thresholds:8", "release": timed}
    assert Settings(streams=[timed_stream], user_epsilon_budget=5).streams


# --------------------------------------------------------------------------- the store


def test_without_a_store_url_the_sqlite_files_are_where_they_were(tmp_path):
    s = Settings(data_dir=tmp_path)
    assert s.store_backend == "sqlite"
    assert s.resolved_ledger_path == tmp_path / "ledger.sqlite3"
    assert s.resolved_state_path == tmp_path / "state.sqlite3"
    s = Settings(ledger_path=tmp_path / "l.db", state_path=tmp_path / "s.db")
    assert (s.resolved_ledger_path, s.resolved_state_path) == (tmp_path / "l.db", tmp_path / "s.db")


def test_a_sqlite_store_url_names_the_directory_of_both_files(tmp_path):
    s = Settings(store_url=f"sqlite:///{tmp_path}")  # four slashes: an absolute path
    assert s.store_backend == "sqlite"
    assert s.resolved_ledger_path == tmp_path / "ledger.sqlite3"
    assert s.resolved_state_path == tmp_path / "state.sqlite3"
    assert Settings(store_url="sqlite:///shared").resolved_ledger_path.as_posix() == "shared/ledger.sqlite3"
    # ledger_path still names the ledger file itself.
    assert Settings(store_url="sqlite:///shared", ledger_path=tmp_path / "l.db").resolved_ledger_path == (
        tmp_path / "l.db"
    )


def test_a_postgresql_store_url_with_password_and_tls_settings(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "PRIVSTREAM_STORE_URL", "postgresql://app@db.internal:5432/privstream?sslmode=verify-full"
    )
    monkeypatch.setenv("PRIVSTREAM_STORE_PASSWORD", "s3cret")
    monkeypatch.setenv("PRIVSTREAM_STORE_SSLROOTCERT", str(tmp_path / "ca.pem"))
    s = Settings()
    assert s.store_backend == "postgresql"
    assert s.store_password_value() == "s3cret"
    assert "s3cret" not in repr(s) and "s3cret" not in str(s.model_dump())
    for key, value in s.to_env().items():  # child processes get the secret itself
        monkeypatch.setenv(key, value)
    assert Settings() == s and Settings().store_password_value() == "s3cret"

    from privstream.stream_app.store.factory import postgres_config

    config = postgres_config(s)
    assert config.display == "postgresql://app@db.internal:5432/privstream"
    assert (config.password, config.sslrootcert) == ("s3cret", str(tmp_path / "ca.pem"))


def test_the_password_may_come_from_a_file(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("from-a-kubernetes-secret\n")
    s = Settings(store_url="postgresql://app@db/privstream", store_password_file=secret)
    assert s.store_password_value() == "from-a-kubernetes-secret"
    missing = Settings(store_url="postgresql://app@db/privstream", store_password_file=tmp_path / "nope")
    with pytest.raises(ValueError, match="store_password_file"):
        missing.store_password_value()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"store_url": "mysql://app@db/privstream"}, "unknown store_url scheme 'mysql:'"),
        ({"store_url": "/var/lib/ledger"}, "unknown store_url scheme"),
        ({"store_url": "sqlite://relative"}, "three slashes"),
        ({"store_url": "postgresql://app:hunter2@db/privstream"}, "not in store_url"),
        ({"store_url": "postgresql://app@db/p", "ledger_path": "x.sqlite3"}, "ledger_path and state_path"),
        (
            {"store_url": "postgresql://app@db/p", "store_password": "a", "store_password_file": "f"},
            "not both",
        ),
        ({"store_url": "postgresql://app@db/p", "store_sslmode": "maybe"}, "store_sslmode"),
    ],
)
def test_invalid_store_settings_are_clear_errors(kwargs, message):
    from privstream.stream_app.settings import describe_validation_error

    with pytest.raises(ValidationError, match=message) as invalid:
        Settings(**kwargs)
    assert "hunter2" not in describe_validation_error(invalid.value)  # what the CLI prints


@pytest.mark.parametrize(
    "private",
    [
        {"window": {"kind": "time", "seconds": 60}},
        {"privacy_unit": "user", "user_contribution_bound": 2, "window": {"kind": "time", "seconds": 60}},
    ],
)
def test_expected_size_is_required_exactly_where_n_is_private(private):
    release = {"learner": "generic", "epsilon": 1, "epsilon_budget": 5, **private}
    with pytest.raises(ValidationError, match="expected_size is required"):
        Settings(streams=[{"name": "s", "hypothesis_class": "thresholds:8", "release": release}])
    s = Settings(
        streams=[
            {"name": "s", "hypothesis_class": "thresholds:8", "release": {**release, "expected_size": 800}}
        ],
        user_epsilon_budget=5,
    )
    assert s.streams[0].release.expected_size == 800 and s.streams[0].release.n_private
    public = {"learner": "generic", "epsilon": 1, "epsilon_budget": 5, "expected_size": 800}
    with pytest.raises(ValidationError, match="count windows at the example level publish n"):
        Settings(streams=[{"name": "s", "hypothesis_class": "thresholds:8", "release": public}])


def user_stream(name: str, epsilon_budget: float, **release: object) -> dict:
    return {
        "name": name,
        "hypothesis_class": "thresholds:8",
        "release": {
            "learner": "generic",
            "epsilon": 1,
            "epsilon_budget": epsilon_budget,
            "privacy_unit": "user",
            "user_contribution_bound": 2,
            "expected_size": 100,
            "window": {"kind": "time", "seconds": 60},
            **release,
        },
    }


def test_user_level_streams_need_one_deployment_wide_user_budget():
    """Two user-level streams with budgets 1 and 3 and no deployment-wide budget were accepted: a
    user's spend reached 3 while stream a's certificates stated a lifetime budget of 1."""
    streams = [user_stream("a", 1), user_stream("b", 3)]
    with pytest.raises(ValidationError, match=r"user_epsilon_budget is required: stream\(s\) a, b"):
        Settings(streams=streams)
    assert Settings(streams=streams, user_epsilon_budget=2).user_epsilon_budget == 2
    # Example-level streams alone need no user budget.
    assert Settings(streams=STREAMS).user_epsilon_budget is None


def test_a_user_budget_no_release_fits_in_is_refused():
    with pytest.raises(ValidationError, match="no user could ever be in one"):
        Settings(streams=[user_stream("a", 4, epsilon=2)], user_epsilon_budget=1)
    with pytest.raises(ValidationError, match="user_delta_budget 0"):
        Settings(streams=[user_stream("a", 4, delta=1e-6, delta_budget=1e-5)], user_epsilon_budget=4)
    ok = Settings(
        streams=[user_stream("a", 4, delta=1e-6, delta_budget=1e-5)],
        user_epsilon_budget=4,
        user_delta_budget=1e-5,
    )
    assert ok.user_delta_budget == 1e-5


def test_hierarchical_sanitizer_needs_a_1d_integer_class(tmp_path):
    release = {"learner": "generic", "sanitizer": "hierarchical", "epsilon": 1, "epsilon_budget": 5}
    s = Settings(streams=[{"name": "s", "hypothesis_class": "intervals:2^32", "release": release}])
    assert s.streams[0].release.sanitizer == "hierarchical"
    matrix = tmp_path / "class.csv"
    matrix.write_text("1,0,1\n0,1,1\n")
    with pytest.raises(ValidationError, match="hierarchical sanitizer answers thresholds"):
        Settings(streams=[{"name": "s", "hypothesis_class": str(matrix), "release": release}])
    mwem = {**release, "sanitizer": "mwem"}
    assert Settings(streams=[{"name": "s", "hypothesis_class": str(matrix), "release": mwem}]).streams
