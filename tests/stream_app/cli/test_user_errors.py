"""Ordinary mistakes on the command line: one clear line on stderr, exit status 2, never a traceback
or a Python limit; and what used to crash on ordinary input now works."""

from __future__ import annotations

import json
import logging
import re
import socket

import numpy as np
import pytest

from privstream.learning.audit import audit_spec, run_audit
from privstream.learning.domain import MAX_DOMAIN_SIZE
from privstream.stream_app import startup
from privstream.stream_app.cli import build_parser, main
from privstream.stream_app.settings import ENV_PREFIX, ReleaseConfig, Settings


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str, command: str) -> str:
    """The error line, after checking the shape every user error has."""
    assert code == 2, err
    assert "Traceback" not in err and "limit (4300 digits)" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"privstream {command}: error: "), err
    return lines[0]


@pytest.fixture
def examples(tmp_path):
    path = tmp_path / "ex.csv"
    path.write_text("x,y\n1,0\n40000,1\n50000,1\n3,0\n")
    return path


# -- numbers too large to print ----------------------------------------------------------------------


def test_learn_in_text_mode_prints_an_astronomical_theorem_size_as_a_power_of_ten(capsys, examples) -> None:
    """global-stability on thresholds:65536 needs about 10^157852 examples: an integer Python refuses
    to print in decimal; the text output writes it as plan does."""
    code, out, err = run(
        capsys, "learn", "thresholds:65536", "--examples", str(examples), "--learner", "global-stability",
        "--epsilon", "1", "--delta", "1e-6", "--seed", "1",
    )  # fmt: skip
    assert code == 0, err
    accuracy = next(line for line in out.splitlines() if line.startswith("accuracy:"))
    assert re.search(r"theorem needs n = 10\^1578\d\d\.\d\d, have n = 4: guarantee does not hold", accuracy)


# -- one domain limit, everywhere ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["sanitize", "thresholds:2^64", "--data", "{data}", "--epsilon", "1"],
        ["dims", "thresholds:2^100"],
        ["plan", "intervals:2^63", "--epsilon", "1", "--alpha", "0.1", "--no-progress"],
        ["learn", "points:9223372036854775808", "--examples", "{data}", "--epsilon", "1"],
        ["online", "thresholds:2^" + "9" * 5000, "--examples", "{data}"],
    ],
)
def test_a_domain_beyond_the_limit_is_refused_in_one_line_by_every_command(capsys, examples, argv) -> None:
    argv = [a.replace("{data}", str(examples)) for a in argv]
    line = one_line_error(*run(capsys, *argv)[::2], argv[0])
    assert "too large: a class has at most 2^62 points" in line


@pytest.mark.parametrize("sanitizer", ["hierarchical", "mwem"])
@pytest.mark.parametrize("kind", ["thresholds", "intervals", "points"])
def test_sanitize_and_evaluate_at_the_domain_limit_with_points_at_its_top(
    capsys, tmp_path, kind, sanitizer
) -> None:
    """thresholds:2^64 used to end in an OverflowError traceback inside the hierarchical sanitizer;
    the largest domain now works end to end, the top point included."""
    rng = np.random.default_rng(5)
    xs = [*rng.integers(0, MAX_DOMAIN_SIZE, 300).tolist(), MAX_DOMAIN_SIZE - 1, MAX_DOMAIN_SIZE - 2, 0]
    data = tmp_path / "d.csv"
    data.write_text("x\n" + "\n".join(map(str, xs)) + "\n")
    spec = f"{kind}:2^62"
    code, out, err = run(
        capsys, "sanitize", spec, "--data", str(data), "--epsilon", "1", "--sanitizer", sanitizer, "--json",
        "--seed", "22",
    )  # fmt: skip
    assert code == 0, err
    release = tmp_path / "r.json"
    release.write_text(out)
    code, out, err = run(capsys, "evaluate", "--release", str(release), "--data", str(data), "--json")
    assert code == 0, err
    assert 0 <= json.loads(out)["max_error"] <= 1


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (str(MAX_DOMAIN_SIZE), "is outside every class's domain"),
        ("9" * 5000, "(5000 digits) is outside every class's domain"),
    ],
)
def test_a_point_beyond_every_domain_in_a_file_is_one_line(capsys, tmp_path, x, message) -> None:
    path = tmp_path / "big.csv"
    path.write_text(f"x,y\n1,0\n{x},1\n")
    line = one_line_error(*run(capsys, "online", "thresholds:16", "--examples", str(path))[::2], "online")
    assert f"{path}: line 3: x = " in line and message in line


# -- names: every one that would do, and the closest --------------------------------------------------


def test_an_unknown_learner_lists_all_seven_and_suggests_the_closest(capsys, examples) -> None:
    argv = ["learn", "thresholds:16", "--examples", str(examples), "--learner", "gneric", "--epsilon", "1"]
    line = one_line_error(*run(capsys, *argv)[::2], "learn")
    assert "unknown learner 'gneric' (did you mean 'generic'?)" in line
    known = line.split("known: ")[1].split(", ")
    assert known == [
        "bayes-consistent", "generic", "global-stability", "halfspaces", "kernel", "proper", "semi-supervised"
    ]  # fmt: skip


def test_an_unknown_learner_or_sanitizer_in_the_settings_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match=r"unknown learner 'gneric' \(did you mean 'generic'\?\)"):
        ReleaseConfig(learner="gneric", epsilon_budget=1.0)
    with pytest.raises(ValueError, match=r"unknown sanitizer 'mvem' \(did you mean 'mwem'\?\)"):
        ReleaseConfig(sanitizer="mvem", epsilon_budget=1.0)


def test_an_unknown_audit_suggests_the_closest(capsys) -> None:
    line = one_line_error(*run(capsys, "audit", "laplase")[::2], "audit")
    assert "unknown audit 'laplase' (did you mean 'laplace'?)" in line


# -- the audit's runs ---------------------------------------------------------------------------------


def test_audit_runs_beyond_the_cap_are_refused_in_one_line(capsys) -> None:
    line = one_line_error(*run(capsys, "audit", "laplace", "--runs", "1000000000")[::2], "audit")
    assert "--runs must be between 4 and 1,000,000" in line and "1,000,000,000" in line


def test_the_audit_reports_its_progress_and_the_same_result_with_or_without_it() -> None:
    seen: list[float] = []
    spec = audit_spec("laplace")
    quiet = run_audit(spec, samples=400, seed=3)
    watched = run_audit(spec, samples=400, seed=3, progress=seen.append)
    assert watched == quiet
    assert seen == sorted(seen) and seen[0] == 0 and 0.9 < seen[-1] < 1 and len(seen) >= 100


# -- settings from the environment --------------------------------------------------------------------


def test_a_malformed_streams_variable_names_the_variable_and_the_position(capsys, monkeypatch) -> None:
    monkeypatch.setenv("PRIVSTREAM_STREAMS", '[{"name": "clicks", "hypothesis_class": "thresholds:65536",}]')
    line = one_line_error(*run(capsys, "worker")[::2], "worker")
    assert "PRIVSTREAM_STREAMS is not valid JSON" in line
    assert 'at character 60, after \'is_class": "thresholds:65536",\'' in line


def test_an_invalid_value_from_the_environment_names_the_variable_and_the_setting(
    capsys, monkeypatch
) -> None:
    stream = {
        "name": "c",
        "hypothesis_class": "thresholds:16",
        "release": {"epsilon_budget": 1, "top_level": 30},
    }
    monkeypatch.setenv("PRIVSTREAM_STREAMS", json.dumps([stream]))
    line = one_line_error(*run(capsys, "worker")[::2], "worker")
    assert (
        "streams[0].release.top_level (from PRIVSTREAM_STREAMS): Input should be less than or equal to 20"
        in line
    )


def test_the_startup_module_spells_the_variables_as_the_settings_read_them() -> None:
    assert startup.ENV_PREFIX == ENV_PREFIX


# -- a first own worker ---------------------------------------------------------------------------------


@pytest.fixture
def first_config(tmp_path, monkeypatch):
    """A new user's first config file, in a fresh directory; ports free."""
    monkeypatch.chdir(tmp_path)
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    config = tmp_path / "privstream.toml"
    config.write_text(
        f"public_port = {ports[0]}\noperator_port = {ports[1]}\n\n"
        '[[streams]]\nname = "clicks"\nhypothesis_class = "thresholds:65536"\n\n'
        "[streams.release]\nepsilon_budget = 10.0\n"
    )
    return config


def test_a_first_worker_without_a_ledger_names_the_setting_and_starts_nothing(capsys, first_config) -> None:
    line = one_line_error(*run(capsys, "worker", "--config", str(first_config))[::2], "worker")
    assert "the privacy ledger var/ledger.sqlite3 does not exist" in line
    assert "ledger_create_if_missing = true in the config file" in line
    assert "PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true" in line and "create_if_missing=True" not in line


def test_the_store_s_missing_ledger_error_is_translated_the_same_way(first_config) -> None:
    """PostgreSQL ledgers are found missing by the store itself, after the broker started."""
    from privstream.agents.ledger_port import LedgerMissingError

    settings = Settings(config_file=first_config, store_url="postgresql://app@db.example/privstream")
    error = startup.ledger_startup_error(LedgerMissingError("pass create_if_missing=True"), settings)
    assert "in the database of store_url postgresql://app@db.example/privstream does not exist" in str(error)
    assert "PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true" in str(
        error
    ) and "store_url (PRIVSTREAM_STORE_URL)" in str(error)


def test_a_listener_port_in_use_names_the_setting(capsys, first_config, monkeypatch) -> None:
    monkeypatch.setenv("PRIVSTREAM_LEDGER_CREATE_IF_MISSING", "true")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(
            *run(capsys, "worker", "--config", str(first_config), "--operator-port", str(port))[::2], "worker"
        )
    assert f"the operator listener's address 127.0.0.1:{port} is in use" in line
    assert "set operator_port (PRIVSTREAM_OPERATOR_PORT) (or --operator-port) to a free port" in line


def test_a_data_dir_that_cannot_be_created_names_the_setting(capsys, first_config, monkeypatch) -> None:
    (first_config.parent / "a-file").write_text("")
    monkeypatch.setenv("PRIVSTREAM_DATA_DIR", str(first_config.parent / "a-file" / "var"))
    line = one_line_error(*run(capsys, "worker", "--config", str(first_config))[::2], "worker")
    assert "cannot create the directory" in line and "set data_dir (PRIVSTREAM_DATA_DIR)" in line


# -- the release tree's top level -----------------------------------------------------------------------


def test_levels_is_read_as_top_level_with_a_deprecation_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="privstream.stream_app.settings"):
        config = ReleaseConfig(levels=4, epsilon_budget=5.0)
    assert config.top_level == 4 and len(config.learner_epsilons) == 5  # levels 0..4
    assert "'levels' is deprecated: write top_level = 4" in caplog.text
    with pytest.raises(ValueError, match="give top_level only"):
        ReleaseConfig(levels=4, top_level=4, epsilon_budget=5.0)


def test_the_demo_takes_top_level_and_still_reads_levels(capsys) -> None:
    parser = build_parser()
    assert parser.parse_args(["demo", "--top-level", "3"]).top_level == 3
    assert parser.parse_args(["demo", "--levels", "2"]).top_level == 2
    assert "--levels is deprecated, write --top-level" in capsys.readouterr().err


def test_an_error_without_a_message_is_named_by_its_type(capsys, monkeypatch) -> None:
    from privstream.stream_app.cli import plan

    def lost_connection(args: object) -> int:
        raise ConnectionResetError()  # an OSError whose text is empty

    monkeypatch.setattr(plan, "run_plan", lost_connection)
    line = one_line_error(
        *run(capsys, "plan", "thresholds:1024", "--epsilon", "1", "--alpha", "0.1")[::2], "plan"
    )
    assert line == "privstream plan: error: ConnectionResetError"
