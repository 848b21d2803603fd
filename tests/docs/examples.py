"""The examples of the README and the documentation site, read from their Markdown, and how each is run.

Convention (every page follows it; ``tests/docs/test_examples.py`` enforces it):

* a ```` ```bash ```` block runs as a script (``set -euo pipefail``, ``privstream`` on ``PATH``) and
  must exit 0; a ```` ```console ```` block runs each ``$ `` command and compares what it printed
  (stdout and stderr, as a terminal shows them) with the lines below it by shape: numbers match
  any number, ``...`` matches any text (alone on a line: any number of lines), and a line that
  is a JSON object matches a JSON object with the same keys;
* a ```` ```python ```` block is a whole script: it runs with the virtualenv's Python and must exit
  0 (asynchronous code runs under ``asyncio.run``, as a script must);
* the blocks of one page run in order in one temporary directory, so a page can build on its
  earlier blocks; ``<!-- docs-example: file NAME -->`` before a block writes the block to ``NAME``
  there instead of running it;
* ``<!-- docs-example: needs-broker -->`` before a block that needs a broker or a running worker:
  the live tier (``tests/docs/test_live_pages.py``) runs the page's blocks in order as a user
  would, in their terminals: ``privstream broker`` and ``privstream worker`` in the background,
  the page's ports (9092, 6066, 9466) replaced by free ones. A page that starts no broker of its
  own runs after the quick start of ``docs/getting-started/first-worker.md``, in its directory;
* ``<!-- docs-example: skip REASON -->`` before a block that no test can run as shown (a cluster,
  Docker, a benchmark of many minutes): the reason is said in the marker;
* every ```` ```toml ```` block, every ```` ```json ```` block marked
  ``<!-- docs-example: settings -->`` and every ``PRIVSTREAM_*=`` assignment in a shell block are
  validated against ``Settings``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*docs-example:\s*(?P<kind>[\w-]+)(?:\s+(?P<arg>.*?))?\s*-->\s*$")
MARKERS = frozenset({"needs-broker", "skip", "settings", "file"})
COMMAND_SECONDS = 300


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its marker and its text."""

    path: Path
    line: int
    lang: str
    text: str
    marker: str | None = None
    argument: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang in ("bash", "sh", "shell", "console")


def markdown_files() -> list[Path]:
    """The README and every page of the documentation site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order, with the marker line just before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, lang, start = fence["indent"], fence["lang"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(previous)
        out.append(
            Block(
                path,
                start + 1,
                lang,
                "\n".join(body) + "\n",
                marker["kind"] if marker else None,
                marker["arg"] if marker else None,
            )
        )
        i += 1
    return out


def markers_in(path: Path) -> list[tuple[int, str]]:
    """Every ``docs-example`` marker of a file, with its line number (to catch misspelt ones)."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("<!--") and "docs-example" in line:
            match = _MARKER.match(line)
            found.append((number, match["kind"] if match else line.strip()))
    return found


# -- console blocks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsoleStep:
    command: str
    expected: list[str]


def console_steps(text: str) -> list[ConsoleStep]:
    """``$ command`` lines (a trailing backslash continues one) and the output shown below each."""
    steps: list[ConsoleStep] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if steps:
                steps[-1].expected.append(lines[i])
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + "\n" + lines[i]
        steps.append(ConsoleStep(command, []))
        i += 1
    return [ConsoleStep(s.command, _trim(s.expected)) for s in steps]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


_NUMBER = r"[-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?"


def line_pattern(expected: str) -> re.Pattern[str]:
    """A line of shown output as a pattern: numbers match any number, ``...`` any text, and runs of
    spaces any run of spaces (columns move with the numbers' widths)."""
    parts = re.split(rf"(\.\.\.|{_NUMBER}|\s+)", expected.strip())
    regex = ""
    for part in parts:
        if not part:
            continue
        if part == "...":
            regex += ".*?"
        elif re.fullmatch(_NUMBER, part):
            regex += _NUMBER
        elif part.isspace():
            regex += r"\s+"
        else:
            regex += re.escape(part)
    return re.compile(rf"^\s*{regex}\s*$")


def _json_object(line: str) -> dict[str, object] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def same_keys(expected: object, actual: object) -> bool:
    """Objects with the same keys, recursively; anything else matches anything but an object."""
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and set(expected) == set(actual)
            and all(same_keys(expected[k], actual[k]) for k in expected)
        )
    return not isinstance(actual, dict)


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the printed lines have the shape shown (``...`` alone: any lines, none included).
    A command shown without output may print anything; otherwise every printed line is shown."""
    return _matches(expected, actual) if expected else True


def _matches(expected: list[str], actual: list[str]) -> bool:
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(_matches(rest, actual[k:]) for k in range(len(actual) + 1))
    if not actual:
        return False
    shown = _json_object(head.strip())
    if shown is not None:
        ok = same_keys(shown, _json_object(actual[0].strip()))
    else:
        ok = line_pattern(head).match(actual[0]) is not None
    return ok and _matches(rest, actual[1:])


# -- settings in shell blocks ---------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"""(?:^|\s)(PRIVSTREAM_[A-Z0-9_]+)=("[^"]*"|'[^']*'|[^\s'"]*)""")


def environment_assignments(block: Block) -> dict[str, str]:
    """``PRIVSTREAM_*=value`` assignments of a shell block (``export`` lines, or before a command;
    in a console block, in its commands only, not in the output shown, and not in a command shown
    failing on purpose: its output is an error).

    A value computed by the shell (``$VAR``, ``$(...)``) stands for a secret: a placeholder is
    validated in its place.
    """
    found: dict[str, str] = {}
    code = (
        "\n".join(
            step.command
            for step in console_steps(block.text)
            if not any("error:" in line for line in step.expected)
        )
        if block.lang == "console"
        else block.text
    )
    for name, raw in _ASSIGNMENT.findall(code):  # a quoted value may span lines
        value = shlex.split(raw)[0] if raw else ""
        found[name] = "placeholder-secret" if "$" in value else value
    return found


# -- running -------------------------------------------------------------------------------------------


def clean_environment() -> dict[str, str]:
    """This environment without any ``PRIVSTREAM_*`` variable, the venv's commands first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVSTREAM_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
    )


def run_python(
    script: str, cwd: Path, env: dict[str, str], timeout: float = COMMAND_SECONDS
) -> subprocess.CompletedProcess[str]:
    """A Python block as a user runs it: saved as a file and run as a script by the venv's Python."""
    path = cwd / "example.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


_LOCAL_BOOTSTRAP = re.compile(
    r"""bootstrap[\w-]*["']?\s*[=:]?\s*["']?(?:[\w.-]+:\d+,)*(?:127\.0\.0\.1|localhost):(\d+)""",
    re.IGNORECASE,
)
_BROKER_PORT = re.compile(r"privstream broker --port (\d+)")


def broker_ports(all_blocks: list[Block]) -> set[str]:
    """The ports the documented ``privstream broker --port P`` commands use."""
    return {p for b in all_blocks if b.is_shell for p in _BROKER_PORT.findall(b.text)}


def local_bootstrap_ports(block: Block) -> list[str]:
    """The ports of the local Kafka servers a block names (``kafka_bootstrap``, ``bootstrap=``,
    ``--bootstrap``, ``PRIVSTREAM_KAFKA_BOOTSTRAP``), which a documented broker must use.

    >>> local_bootstrap_ports(Block(ROOT, 1, "bash", "x --bootstrap 127.0.0.1:9092 --keys-url http://127.0.0.1:6066/k"))
    ['9092']
    """
    return _LOCAL_BOOTSTRAP.findall(block.text)
