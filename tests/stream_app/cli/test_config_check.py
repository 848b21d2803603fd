"""``privstream config check FILE``: a configuration is checked as the worker would check it, with no
side effect; a bad one is refused in one line with exit 2 and nothing created. ``config schema``
is the settings' JSON Schema, and validates what the settings accept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from privstream.learning.planning import slot_advice
from privstream.stream_app.cli import main
from privstream.stream_app.settings import ENV_PREFIX

GOOD = """
kafka_bootstrap = "127.0.0.1:9092"

[[streams]]
name = "clicks"
hypothesis_class = "thresholds:65536"

[streams.release]
learner = "generic"
sanitizer = "hierarchical"
sanitizer_epsilon = 0.5
epsilon_budget = 3.0
top_level = 2
window = { kind = "count", size = 1000 }

[[streams]]
name = "v"
features = 2
feature_bounds = [[0, 1], [0, 1]]

[streams.release]
learner = "halfspaces"
epsilon_budget = 2.0
top_level = 1
window = { kind = "count", size = 2000, publish_delay_seconds = 4 }
"""


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # the default data_dir, var/, would be created here
    return tmp_path


def files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def check(path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str, str]:
    status = main(["config", "check", str(path), *options])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_good_configuration_reports_lifetime_and_slots_and_creates_nothing(scratch, capsys):
    path = scratch / "privstream.toml"
    path.write_text(GOOD)
    status, out, err = check(path, capsys, "--json")
    assert status == 0, err
    assert files(scratch) == {Path("privstream.toml")}  # no var/, ledger, key, state
    report = json.loads(out)
    clicks, vectors = report["streams"]
    # Learner ε: (3 - 3 * 0.5) / 3 per level; plus the sanitizer's 0.5 at each of the 3 levels.
    assert clicks["lifetime"]["learner_epsilon"] == pytest.approx([0.5, 0.5, 0.5])
    assert clicks["lifetime"]["level_epsilon"] == pytest.approx([1.0, 1.0, 1.0])
    assert clicks["lifetime"]["epsilon"] == pytest.approx(3.0)
    assert clicks["slots"] == {"inputs": [1000, 2000, 4000], "source": "derived at start-up", "seconds": None}
    assert vectors["slots"]["source"] == "configured" and vectors["slots"]["seconds"] == [4.0, 4.0]
    assert report["settings"]["streams"][0]["release"]["window"]["size"] == 1000  # the effective settings
    assert any("PRIVSTREAM_LEDGER_CREATE_IF_MISSING=true" in note for note in report["notes"])


def test_the_text_report_names_each_streams_lifetime_epsilon_and_slots(scratch, capsys):
    path = scratch / "privstream.toml"
    path.write_text(GOOD)
    status, out, _ = check(path, capsys, "--no-simulation")
    assert status == 0
    assert "stream clicks (thresholds:65536, online: soa): generic and hierarchical" in out
    assert "lifetime per example: ε 3, δ 0 (budget ε 3, δ 0); ε per level 0..2: 1, 1, 1" in out
    assert "publication slots: 4, 4 s per level 0..1 (configured" in out


@pytest.mark.parametrize(
    ("extra", "runs"),
    [
        ("", "block-vote"),
        ("classes = 10", "multiclass-perceptron"),
        ('online_learner = "perceptron"', "perceptron"),
    ],
)
def test_the_report_names_the_online_learner_that_runs_not_auto(scratch, capsys, extra, runs):
    path = scratch / "privstream.toml"
    bounds = "feature_bounds = [[0, 1], [0, 1], [0, 1], [0, 1]]"
    path.write_text(f'[[streams]]\nname = "v"\nfeatures = 4\n{bounds}\n{extra}\n')
    status, out, err = check(path, capsys, "--no-simulation")
    assert status == 0, err
    assert f"stream v (4 features{', 10 classes' if 'classes' in extra else ''}, online: {runs}): " in out
    assert "online: auto" not in out


def test_measured_slots_are_the_workers_advice_on_public_inputs(scratch, capsys):
    path = scratch / "privstream.toml"
    path.write_text(GOOD)
    status, out, _ = check(path, capsys, "--json", "--measure-slots", "--no-simulation")
    assert status == 0
    slots = json.loads(out)["streams"][0]["slots"]
    assert slots["source"] == "measured" and len(slots["seconds"]) == 3
    assert all(seconds >= slot_advice(0.0) for seconds in slots["seconds"])  # at least the margin
    assert files(scratch) == {Path("privstream.toml")}


BAD = {
    "unknown learner": ('learner = "generic"', 'learner = "generik"', "did you mean 'generic'?"),
    "learner parameter": (
        'learner = "generic"',
        'learner = "generic"\nlearner_params = {bogus = 1}',
        "bogus",
    ),
    "accuracy target": ('learner = "generic"', 'learner = "generic"\nlearner_params = {alpha = 2}', "alpha"),
    "sanitizer parameter": (
        "sanitizer_epsilon = 0.5",
        "sanitizer_epsilon = 0.5\nsanitizer_params = {rounds = -3}",
        "hierarchical",
    ),
    "budget": ("epsilon_budget = 3.0", "epsilon_budget = 3.0\nepsilon = 2.0", "more than the lifetime"),
    "vector learner on a class": ('learner = "generic"', 'learner = "halfspaces"', "needs feature vectors"),
    "deprecated and new": ("top_level = 2", "top_level = 2\nlevels = 2", "top_level"),
}
#: What stops a worker on this machine only: a note, or with --here an error.
HERE = {
    "data_dir a file": (
        'kafka_bootstrap = "127.0.0.1:9092"',
        'data_dir = "privstream.toml"',
        "not a directory",
    ),
    "signing key file": ('kafka_bootstrap = "127.0.0.1:9092"', 'signing_key_file = "key.pem"', "key.pem"),
}


@pytest.mark.parametrize("finding", sorted(BAD) + [f"here: {name}" for name in sorted(HERE)])
def test_a_bad_configuration_is_one_line_exit_2_and_creates_nothing(scratch, capsys, finding):
    here = finding.startswith("here: ")
    old, new, says = HERE[finding.removeprefix("here: ")] if here else BAD[finding]
    assert old in GOOD
    path = scratch / "privstream.toml"
    path.write_text(GOOD.replace(old, new, 1))
    status, out, err = check(path, capsys, *(["--here"] if here else []))
    assert status == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privstream config: error: "), err
    assert says in lines[0]
    assert files(scratch) == {Path("privstream.toml")}


@pytest.mark.parametrize("finding", sorted(HERE))
def test_what_depends_on_this_machine_is_a_note_without_here(scratch, capsys, finding):
    old, new, says = HERE[finding]
    path = scratch / "privstream.toml"
    path.write_text(GOOD.replace(old, new, 1))
    status, out, _ = check(path, capsys, "--json", "--no-simulation")
    assert status == 0
    assert any(note.startswith("on this machine, ") and says in note for note in json.loads(out)["notes"])
    assert files(scratch) == {Path("privstream.toml")}


def test_a_signing_key_that_does_not_parse_is_refused_anywhere(scratch, capsys):
    (scratch / "key.pem").write_text("not a key")
    path = scratch / "privstream.toml"
    path.write_text('signing_key_file = "key.pem"\n' + GOOD)
    status, _, err = check(path, capsys, "--no-simulation")
    assert status == 2 and "key.pem" in err and len(err.strip().splitlines()) == 1


def test_a_missing_file_is_one_line(scratch, capsys):
    status, _, err = check(scratch / "nope.toml", capsys)
    assert (
        status == 2
        and err.strip() == f"privstream config: error: config file {scratch / 'nope.toml'} does not exist"
    )


def test_the_schema_accepts_a_good_file_and_names_what_is_wrong_in_a_bad_one(scratch, capsys):
    import tomllib

    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    good = tomllib.loads(GOOD)
    jsonschema.validate({"$schema": "./privstream.schema.json", **good}, schema)
    bad = tomllib.loads(GOOD.replace('kind = "count"', 'kind = "sliding"', 1))
    with pytest.raises(jsonschema.ValidationError, match="sliding"):
        jsonschema.validate(bad, schema)
    with pytest.raises(jsonschema.ValidationError, match="kafka_bootsrap"):
        jsonschema.validate({"kafka_bootsrap": "x:1"}, schema)


def test_a_json_file_may_name_its_schema(scratch, capsys):
    import tomllib

    path = scratch / "privstream.json"
    path.write_text(json.dumps({"$schema": "./privstream.schema.json", **tomllib.loads(GOOD)}))
    status, _, err = check(path, capsys, "--no-simulation")
    assert status == 0, err


def test_worker_help_lists_its_options_and_points_to_the_configuration(capsys):
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    out = capsys.readouterr().out
    for text in ("--config", "--public-port", "--operator-port", "config check", "configuration"):
        assert text in out
