"""The commands the README and the guides in docs/ show, read out of their shell blocks.

Two checks read them: tests/tooling/test_guides.py (each one parses, each `make` target
exists) and `make test`'s runner (tests/lanes.py: each one was run by some test of the run,
from the argv every `groupscope` invocation records while GROUPSCOPE_ARGV_LOG is set).

A command "was run" when a test ran the same subcommand with at least the options the guide
shows, their values aside: a guide's `--bootstrap kafka-1.example.com:9093` or `--duration
600` is run as the test's own broker and a short duration.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))
# Fenced blocks whose lines are commands; in `console` blocks only the `$ ` lines are.
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
GROUPSCOPE = ("groupscope", ".venv/bin/groupscope")

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, the line of its opening fence, and its lines, each
    with its 1-based line number."""

    page: Path
    language: str
    opening: int
    lines: tuple[tuple[int, str], ...]


def walk(page: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The page split in two: its fenced blocks, and the lines outside them (the prose, where
    links and headings are; a `[x](y)` inside a block is an example, not a link)."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    fence = ""
    language = ""
    opening = 0
    body: list[tuple[int, str]] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if not fence:
            match = FENCE.match(line)
            if match:
                fence, language, opening, body = (match.group(1), match.group(2).lower(),
                                                  number, [])
            else:
                prose.append((number, line))
        elif line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append(Block(page, language, opening, tuple(body)))
            fence = ""
        else:
            body.append((number, line))
    return blocks, prose


@dataclass(frozen=True)
class Command:
    """One command line of a shell block: `program` is `groupscope` or `make`, `argv` what
    follows it (None when the line does not split as the shell would)."""

    page: Path
    line: int
    text: str
    program: str
    argv: tuple[str, ...] | None

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The block's command lines: `$ ` prompts stripped (in `console` blocks only those lines
    are commands, the rest is output), backslash continuations joined."""
    pending: list[str] = []
    start = 0
    for number, raw in block.lines:
        line = raw.strip()
        if not pending:
            if line.startswith("$ "):
                line = line[2:].lstrip()
            elif block.language == "console":
                continue
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].rstrip())
            continue
        pending.append(line)
        yield start, " ".join(pending)
        pending = []
    if pending:
        yield start, " ".join(pending)


def _command(page: Path, number: int, text: str) -> Command | None:
    try:
        words: list[str] | None = shlex.split(text, comments=True)
    except ValueError:  # an unclosed quote: still checked if it names our program
        words = None
    tokens = list(words) if words is not None else text.split()
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens.pop(0)
    if not tokens or tokens[0] not in (*GROUPSCOPE, "make"):
        return None
    program = "make" if tokens[0] == "make" else "groupscope"
    return Command(page, number, text, program, tuple(tokens[1:]) if words is not None else None)


def commands(page: Path) -> Iterator[Command]:
    for block in walk(page)[0]:
        if block.language in SHELL_LANGUAGES:
            for number, text in _logical_lines(block):
                command = _command(page, number, text)
                if command:
                    yield command


def all_commands() -> list[Command]:
    return [command for page in PAGES for command in commands(page)]


# ---- which of them a run exercised -----------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """What a command is, its values aside: the subcommand path (`ctl broker kill`) and the
    option names given (`--bootstrap`, `--json`)."""

    path: tuple[str, ...]
    options: frozenset[str]

    def __str__(self) -> str:
        return " ".join((*self.path, *sorted(self.options)))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _actions(parser: argparse.ArgumentParser) -> set[str]:
    """The words a positional with a fixed set of choices takes (`ctl broker kill|start`)."""
    return {str(choice) for action in parser._actions
            if not action.option_strings and action.choices is not None
            and not isinstance(action, argparse._SubParsersAction)
            for choice in action.choices}


def shape(parser: argparse.ArgumentParser, argv: Iterable[str]) -> Shape:
    """Read as argparse reads it: a word naming a subparser, or one of a positional's fixed
    choices, extends the path (`ctl broker kill`); any other positional is a value (`ctl kill
    bruno`'s replica); an option is named by its word before `=`, and the word after it is its
    value unless the option takes none. The top level's own options (`--help`) are no
    subcommand's."""
    words = list(argv)
    path: list[str] = []
    options: set[str] = set()
    current = parser
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("-") and word != "-" and not _number(word):
            name, equals, _ = word.partition("=")
            if path:
                options.add(name)
            action = current._option_string_actions.get(name)
            if action is not None and action.nargs != 0 and not equals:
                index += 1  # its value
        elif word in (choices := _subcommands(current)):
            current = choices[word]
            path.append(word)
        elif word in _actions(current):
            path.append(word)
    return Shape(tuple(path), frozenset(options))


def _number(word: str) -> bool:
    """`--shift-by -500`: a negative number is a value, not an option."""
    try:
        float(word)
    except ValueError:
        return False
    return True


def covers(run: Shape, shown: Shape) -> bool:
    return run.path == shown.path and shown.options <= run.options


def unexercised(parser: argparse.ArgumentParser, shown: Iterable[Command],
                runs: Iterable[Iterable[str]]) -> list[Command]:
    """The guides' `groupscope` commands no run covers: same subcommand path, at least the
    options shown. A line that names no subcommand (`groupscope --help`) needs none."""
    ran = {shape(parser, argv) for argv in runs}
    missing = []
    for command in shown:
        if command.program != "groupscope" or command.argv is None:
            continue
        wanted = shape(parser, command.argv)
        if wanted.path and not any(covers(run, wanted) for run in ran):
            missing.append(command)
    return missing


def recorded(log: Path) -> list[list[str]]:
    """The argv lines a run recorded (backend.cli.record_argv); a torn last line is skipped."""
    runs: list[list[str]] = []
    if not log.is_file():
        return runs
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            argv = json.loads(line)
        except ValueError:
            continue
        if isinstance(argv, list) and all(isinstance(word, str) for word in argv):
            runs.append(argv)
    return runs
