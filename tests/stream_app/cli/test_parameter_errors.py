"""An algorithm's parameters in a configuration are checked by name and range when the settings
load: a typo, a value outside its declared range or a switch of the audits' broken variants is one
line naming the setting, exit 2, before any topic, ledger, key or directory exists; ``privstream
config check`` says the same."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import ClassVar

import pytest

from privstream.learning.errors import ParameterError
from privstream.learning.parameters import Range, check_parameters, declared
from privstream.stream_app.cli import main
from privstream.stream_app.settings import ENV_PREFIX

CLASS_STREAM = (
    '[[streams]]\nname = "clicks"\nhypothesis_class = "thresholds:65536"\n\n'
    "[streams.release]\nepsilon_budget = 10.0\n"
)
VECTOR_STREAM = (
    '[[streams]]\nname = "v"\nfeatures = 2\nfeature_bounds = [[0, 1], [0, 1]]\n{online}\n'
    '[streams.release]\nlearner = "halfspaces"\nepsilon_budget = 2.0\n{release}\n'
)

#: name -> (the stream's text, the setting named, what the line says)
CASES = {
    "learner typo": (
        CLASS_STREAM + "learner_params = { alpah = 0.1 }\n",
        "streams[0].release.learner_params",
        "unknown parameter 'alpah' of learner 'generic'; did you mean 'alpha'?",
    ),
    "accuracy target out of range": (
        CLASS_STREAM + "learner_params = { beta = 1.5 }\n",
        "streams[0].release.learner_params",
        "parameter 'beta' of learner 'generic' must be a number in (0, 1), got 1.5",
    ),
    "learner range": (
        CLASS_STREAM + 'learner = "global-stability"\nlearner_params = { stability = 0 }\n',
        "streams[0].release.learner_params",
        "parameter 'stability' of learner 'global-stability' must be a number in (0, 1], got 0",
    ),
    "sanitizer range": (
        CLASS_STREAM + 'sanitizer = "hierarchical"\nsanitizer_params = { fanout = 1 }\n',
        "streams[0].release.sanitizer_params",
        "parameter 'fanout' of sanitizer 'hierarchical' must be an integer >= 2, got 1",
    ),
    "sanitizer typo": (
        CLASS_STREAM + 'sanitizer = "mwem"\nsanitizer_params = { round = 5 }\n',
        "streams[0].release.sanitizer_params",
        "unknown parameter 'round' of sanitizer 'mwem'; did you mean 'rounds'?",
    ),
    "sanitizer parameters without a sanitizer": (
        CLASS_STREAM + "sanitizer_params = { fanout = 4 }\n",
        "streams[0].release.sanitizer_params",
        "sanitizer_params without a sanitizer: set sanitizer, or remove sanitizer_params",
    ),
    "a noise source switched off": (
        CLASS_STREAM + 'sanitizer = "hierarchical"\nsanitizer_params = { noisy_counts = false }\n',
        "streams[0].release.sanitizer_params",
        "parameter 'noisy_counts' of sanitizer 'hierarchical' exists only for the audits' broken variants",
    ),
    "proper learner range": (
        CLASS_STREAM + 'learner = "proper"\nlearner_params = { generic_fraction = 1.5 }\n',
        "streams[0].release.learner_params",
        "parameter 'generic_fraction' of learner 'proper' must be a number in (0, 1), got 1.5",
    ),
    "vector learner typo": (
        VECTOR_STREAM.format(online="", release="learner_params = { resolutoin = 8 }"),
        "streams[0].release.learner_params",
        "unknown parameter 'resolutoin' of learner 'halfspaces'; did you mean 'resolution'?",
    ),
    "online learner typo": (
        VECTOR_STREAM.format(
            online='online_learner = "scaled-passive-aggressive"\nonline_params = { agressiveness = 0.5 }',
            release="",
        ),
        "streams[0].online_params",
        "unknown parameter 'agressiveness' of online learner 'scaled-passive-aggressive'; "
        "did you mean 'aggressiveness'?",
    ),
    "online range": (
        VECTOR_STREAM.format(online="online_params = { margin = 0 }", release=""),
        "streams[0].online_params",
        "parameter 'margin' of online learner 'auto' must be a number > 0, got 0",
    ),
}


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # the default data_dir, var/, would be created here
    monkeypatch.setenv("PRIVSTREAM_LEDGER_CREATE_IF_MISSING", "true")  # a first start would create it
    return tmp_path


def free_ports() -> list[int]:
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ports


@pytest.mark.parametrize("command", ["worker", "config check"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_algorithm_parameter_is_one_line_exit_2_and_creates_nothing(
    fresh, capsys, case, command
) -> None:
    stream, setting, says = CASES[case]
    public, operator = free_ports()
    config = fresh / "privstream.toml"
    config.write_text(
        f'kafka_bootstrap = "127.0.0.1:9"\npublic_port = {public}\noperator_port = {operator}\n\n{stream}'
    )
    argv = ["worker", "--config", str(config)] if command == "worker" else ["config", "check", str(config)]
    status = main(argv)
    _, err = capsys.readouterr()
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"privstream {command.split()[0]}: error: invalid settings: {setting}: "), err
    assert says in lines[0]
    assert {p.name for p in fresh.iterdir()} == {"privstream.toml"}  # no var/, ledger, key or state


def test_the_same_parameters_without_the_mistake_are_accepted(fresh, capsys) -> None:
    """The refusals above are the mistakes, not the parameters: corrected, the settings load."""
    config = fresh / "privstream.toml"
    config.write_text(
        CLASS_STREAM + 'learner_params = { alpha = 0.1, beta = 0.2 }\nsanitizer = "hierarchical"\n'
        "sanitizer_params = { fanout = 4 }\n"
    )
    assert main(["config", "check", str(config)]) == 0, capsys.readouterr().err
    config.write_text(
        VECTOR_STREAM.format(
            online="online_params = { margin = 0.2 }", release="learner_params = { resolution = 8 }"
        )
    )
    assert main(["config", "check", str(config)]) == 0, capsys.readouterr().err


# -- the mechanism, as a third-party algorithm meets it --------------------------------------------


class ThirdParty:
    """An algorithm declares its names by its signature and its ranges by ``parameter_ranges``."""

    parameter_ranges: ClassVar[dict[str, Range]] = {
        "rounds": Range(low=1, integer=True),
        "share": Range(0, 1, low_open=True, optional=True),
    }
    audit_parameters = frozenset({"noisy"})

    def __init__(
        self, rounds: int = 3, share: float | None = None, *, noisy: bool = True, tag: str = ""
    ) -> None:
        self.rounds = rounds


def test_names_come_from_the_signature_and_audit_switches_are_not_among_them() -> None:
    assert declared(ThirdParty) == {
        "rounds": ThirdParty.parameter_ranges["rounds"],
        "share": ThirdParty.parameter_ranges["share"],
        "tag": None,
    }


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"round": 2}, "did you mean 'rounds'?"),
        ({"rounds": True}, "must be an integer >= 1, got True"),  # a bool is not a number
        ({"rounds": 2.0}, "must be an integer >= 1"),
        ({"share": 0}, "must be a number in (0, 1] or null, got 0"),
        ({"share": float("nan")}, "must be a number in (0, 1] or null"),
        ({"noisy": False}, "only for the audits' broken variants"),
        ({"zzzzz": 1}, "(it takes rounds, share, tag)"),
    ],
)
def test_a_refused_parameter_says_why(params, says) -> None:
    with pytest.raises(ParameterError) as info:
        check_parameters("learner", "third", ThirdParty, params)
    assert says in str(info.value)
    assert isinstance(info.value, ValueError)  # the CLI's one-line, exit-2 path


def test_accepted_values_pass_and_an_unranged_parameter_is_left_to_the_factory() -> None:
    check_parameters("learner", "third", ThirdParty, {"rounds": 5, "share": None, "tag": 7})
    check_parameters("learner", "third", ThirdParty, {"share": 1})


def test_a_factory_taking_any_keyword_keeps_its_own_refusals() -> None:
    def factory(**params: object) -> object:
        return params

    check_parameters("sanitizer", "open", factory, {"anything": 1})


def test_a_factory_without_parameters_says_it_takes_none() -> None:
    class Plain:
        def __init__(self) -> None: ...

    with pytest.raises(
        ParameterError, match=r"^unknown parameter 'alpah' of learner 'plain' \(it takes none\)$"
    ):
        check_parameters("learner", "plain", Plain, {"alpah": 0.1})
