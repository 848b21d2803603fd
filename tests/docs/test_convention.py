"""The example checker itself: it must fail on output of the wrong shape, or the docs could drift."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .examples import (
    Block,
    blocks,
    console_steps,
    environment_assignments,
    line_pattern,
    output_matches,
)


def test_numbers_and_ellipses_are_wildcards_and_the_rest_must_match() -> None:
    shown = ["mistakes:        4 (bound 16)", "accuracy:    theorem needs n = 10^13.61, have n = 2,000: ..."]
    assert output_matches(
        shown, ["mistakes: 11 (bound 16)", "accuracy: theorem needs n = 10^9.00, have n = 5: x"]
    )
    assert not output_matches(
        shown, ["mistakes: 11 (limit 16)", "accuracy: theorem needs n = 1, have n = 2: y"]
    )
    assert not output_matches(shown, shown[:1])  # a missing line
    assert not output_matches(shown[:1], shown)  # an extra line
    assert line_pattern("127.0.0.1:9092").match("127.0.0.1:40123")


def test_an_ellipsis_line_matches_any_lines_and_json_lines_match_by_keys() -> None:
    assert output_matches(["header", "...", "footer"], ["header", "a", "b", "footer"])
    assert output_matches(["header", "...", "footer"], ["header", "footer"])
    assert not output_matches(["header", "...", "footer"], ["header", "a"])
    assert output_matches(['{"sent": 5000, "topic": "examples"}'], ['{"sent": 7, "topic": "x.examples"}'])
    assert not output_matches(['{"sent": 5000, "topic": "examples"}'], ['{"sent": 7}'])
    assert not output_matches(['{"a": {"b": 1}}'], ['{"a": {"c": 1}}'])


def test_console_blocks_split_into_commands_and_their_output() -> None:
    steps = console_steps("$ privstream dims \\\n  points:4\nclass: points:4\n\n$ true\n")
    assert [s.command for s in steps] == ["privstream dims \n  points:4", "true"]
    assert steps[0].expected == ["class: points:4"] and steps[1].expected == []


def test_settings_are_read_from_commands_not_from_output_or_failing_examples(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ PRIVSTREAM_APP_ID=a privstream worker\nPRIVSTREAM_X=1 shown in output\n"
        "$ PRIVSTREAM_PUBLIC_PORT=http privstream worker\nprivstream worker: error: invalid\n```\n"
        '<!-- docs-example: needs-broker -->\n```bash\nexport PRIVSTREAM_STREAMS=\'[\n  {"name": "s"}]\'\n'
        'export PRIVSTREAM_KAFKA_SASL_PASSWORD="$(cat secret)"\n```\n'
    )
    console, shell = blocks(page)
    assert environment_assignments(console) == {"PRIVSTREAM_APP_ID": "a"}
    assert shell.marker == "needs-broker"
    assert environment_assignments(shell) == {
        "PRIVSTREAM_STREAMS": '[\n  {"name": "s"}]',
        "PRIVSTREAM_KAFKA_SASL_PASSWORD": "placeholder-secret",
    }


def test_indented_blocks_and_file_markers_are_read(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("* a step:\n\n  <!-- docs-example: file x.toml -->\n  ```toml\n  a = 1\n  ```\n")
    (block,) = blocks(page)
    assert block == Block(page, 4, "toml", "a = 1\n", "file", "x.toml")


def test_the_api_pages_fence_doctest_examples() -> None:
    path = Path(__file__).resolve().parents[2] / "docs" / "_ext" / "doctests.py"
    spec = importlib.util.spec_from_file_location("doctests_ext", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "Example:\n\n    >>> f([1, 2])\n    [1, 2]\n\nAfter."
    assert module.fence_doctests(text) == (
        "Example:\n\n    ```pycon\n    >>> f([1, 2])\n    [1, 2]\n    ```\n\nAfter."
    )
    assert module.plain_roles("see :class:`~a.b.C` and :meth:`d.e`") == "see `C` and `d.e`"
