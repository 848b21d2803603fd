"""Hostile input at the command line's doors: settings nested 200,000 deep and a broker port that is
taken or no port at all are one line and exit 2, never a traceback or a broker somewhere else."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from privstream.stream_app.cli import main
from privstream.stream_app.embedded.broker import LOOPBACK, BrokerError, EmbeddedBroker, kafka_api_versions_ok
from privstream.stream_app.nesting import MAX_SETTINGS_DEPTH
from privstream.stream_app.settings import load_config_file

DEEP = 200_000


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "RecursionError" not in err, err[:2000]
    return lines[0]


BOMBS = {
    "array.toml": "x = " + "[" * DEEP + "]" * DEEP + "\n",
    "table.toml": "x = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n",
    "dotted.toml": ".".join(["a"] * 5_000) + " = 1\n",
    "header.toml": "[" + ".".join(["a"] * 5_000) + "]\nb = 1\n",
    "array.json": '{"streams": ' + "[" * DEEP + "]" * DEEP + "}",
    "object.json": '{"x": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
}
COMMANDS = [["worker", "--config"], ["ledger", "show", "--config"], ["config", "check"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_settings_file_nested_200000_deep_is_one_line_for_every_command(
    capsys, tmp_path: Path, name: str, command: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(BOMBS[name])
    line = one_line_error(capsys, [*command, str(path)])
    assert f"config file {path} is nested more than {MAX_SETTINGS_DEPTH} deep" in line


def test_a_json_variable_nested_deep_names_the_variable(capsys, monkeypatch) -> None:
    monkeypatch.setenv("PRIVSTREAM_STREAMS", "[" * DEEP + "]" * DEEP)
    line = one_line_error(capsys, ["ledger", "show"])
    assert f"PRIVSTREAM_STREAMS is nested more than {MAX_SETTINGS_DEPTH} deep" in line


def test_brackets_in_strings_and_comments_are_text(tmp_path: Path) -> None:
    """The limit counts structure only: strings and comments full of brackets still load."""
    brackets = "[{" * 500
    path = tmp_path / "ok.toml"
    path.write_text(
        f'# {brackets}\na = "{brackets}\\"" # ]]\nb = \'{brackets}\'\n'
        f'c = """\n{brackets}"""""\nd = \'\'\'{brackets}\'\'\'\ne = [[1], {{f = 2}}]\n'
    )
    data = load_config_file(path)
    assert data == {
        "a": brackets + '"',
        "b": brackets,
        "c": brackets + '""',
        "d": brackets,
        "e": [[1], {"f": 2}],
    }
    json_path = tmp_path / "ok.json"
    json_path.write_text(json.dumps({"a": brackets + '\\"', "b": [[1]]}))
    assert load_config_file(json_path) == {"a": brackets + '\\"', "b": [[1]]}


def test_a_file_at_the_limit_loads_and_one_level_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "limit.json"
    inner = MAX_SETTINGS_DEPTH - 1  # the top-level object is one level
    path.write_text('{"a": ' + "[" * inner + "]" * inner + "}")
    value, depth = load_config_file(path)["a"], 0
    while isinstance(value, list):
        value, depth = value[0] if value else None, depth + 1
    assert depth == inner
    path.write_text('{"a": ' + "[" * (inner + 1) + "]" * (inner + 1) + "}")
    with pytest.raises(ValueError, match=f"nested more than {MAX_SETTINGS_DEPTH} deep"):
        load_config_file(path)


# -- privstream broker --port -------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536"])
def test_a_broker_port_out_of_range_is_one_line(capsys, port: str) -> None:
    line = one_line_error(capsys, ["broker", "--port", port])
    assert line == (
        f"privstream broker: error: --port {port} on 127.0.0.1 is not a port (1 to 65535): choose a free "
        "port, or omit --port for one"
    )


def test_a_taken_broker_port_is_refused_and_no_broker_listens_anywhere(capsys) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(capsys, ["broker", "--port", str(port)])
        assert f"--port {port} on 127.0.0.1 is in use" in line
        assert capsys.readouterr().out == ""  # no address printed: nothing listens elsewhere
        # Taken between the check and the broker's own bind: that port or an error, never another.
        broker = EmbeddedBroker(port=port, startup_timeout=10)
        with pytest.raises(BrokerError, match=f"could not listen on 127.0.0.1:{port}"):
            broker.start()
        assert broker.process is None and broker.port == port
        assert not kafka_api_versions_ok(LOOPBACK, port, timeout=0.3)
