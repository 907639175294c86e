"""The README and the guides in docs/ checked against the repository they describe.

The README is the front page: at most 150 lines, so the three uses fit on a screen and the
details live in docs/. Moving text between files is how links break and examples go stale,
so this checks, pure and fast (nothing is started, only files are read and argv parsed):

* every relative link and picture of README.md and docs/*.md points at a file that exists,
  and every #anchor into a markdown file names one of its headings;
* every `groupscope ...` line in a shell block is accepted by the real argument parser
  (`backend.cli.build_parser`, which registers every subcommand eagerly), so a renamed or
  removed option fails here and not in a reader's terminal;
* every `make` target named in a shell block is a rule of the Makefile;
* each guide opens, under its title and one sentence, with the command it is about;
* the rule by which `make test` tells a guide's command was run by some test (tests/guides.py,
  checked by tests/lanes.py after every lane passed) holds on examples.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

from backend.cli import build_parser
from tests.guides import (
    PAGES,
    README,
    REPO,
    Block,
    Command,
    all_commands,
    recorded,
    rel,
    shape,
    unexercised,
    walk,
)

README_MAX_LINES = 150
# The guides the README lists, each opening with a ```bash block of the command it is about.
GUIDES = ("workshop", "production", "offsets", "queues", "clusters", "commands")

HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
TRAILING_COMMENT = re.compile(r"\s+#.*$")


def _blocks(page: Path) -> list[Block]:
    return walk(page)[0]


def _prose(page: Path) -> list[tuple[int, str]]:
    return walk(page)[1]


# ---- links ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    """A relative link or picture of a page, `target` as written (a path, maybe #anchor)."""

    page: Path
    line: int
    target: str

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"

    def file(self) -> Path:
        path = unquote(self.target.partition("#")[0])
        return (self.page.parent / path).resolve() if path else self.page

    @property
    def anchor(self) -> str:
        return unquote(self.target.partition("#")[2])


def _links(page: Path) -> Iterator[Link]:
    for number, text in _prose(page):
        line = CODE_SPAN.sub(lambda span: " " * len(span.group(0)), text)  # code, not links
        for pattern in (INLINE_LINK, REFERENCE_LINK):
            for match in pattern.finditer(line):
                target = match.group(1)
                if not SCHEME.match(target):  # http(s), mailto: not ours to check
                    yield Link(page, number, target)


ALL_LINKS = [link for page in PAGES for link in _links(page)]
FILE_LINKS = [link for link in ALL_LINKS if not link.target.startswith("#")]
ANCHORED_MD_LINKS = [link for link in ALL_LINKS
                     if link.anchor and link.file().suffix == ".md" and link.file().is_file()]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, punctuation dropped (word
    characters, spaces and hyphens stay), spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").replace("*", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, a repeated one numbered as GitHub does (-1, -2)."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for _, line in _prose(page):
        heading = HEADING.match(line)
        if heading:
            slug = _slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(f"{slug}-{count}" if count else slug)
    return anchors


def _link_id(link: Link) -> str:
    return f"{link.where} {link.target}"


def test_readme_stays_a_front_page() -> None:
    """The README keeps to what groupscope is, the two commands and the three uses, each with
    its guide; whatever makes it longer belongs in docs/."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move details to docs/")


def test_the_pages_have_links_to_check() -> None:
    """An extraction that found nothing would pass every check below: the README alone links its
    pictures and guides."""
    assert any(link.page == README and link.target.endswith(".png") for link in FILE_LINKS)
    assert any(link.page == README and link.target.startswith("docs/") for link in FILE_LINKS)


@pytest.mark.parametrize("link", FILE_LINKS, ids=_link_id)
def test_a_relative_link_points_at_a_file(link: Link) -> None:
    """A link or picture that moved with its text into docs/ must be rewritten relative to
    its new page (`../assets/...`), or the reader gets a 404."""
    target = link.file()
    assert target.is_relative_to(REPO), f"{link.where}: {link.target} leaves the repository"
    assert target.exists(), f"{link.where}: {link.target} -> {rel(target)} does not exist"


@pytest.mark.parametrize("link", ANCHORED_MD_LINKS, ids=_link_id)
def test_an_anchor_names_a_heading(link: Link) -> None:
    """A section that moved to a guide, or was renamed, leaves `file.md#section` links that
    open the page at its top: the anchor must still be one of the page's headings."""
    anchors = _anchors(link.file())
    assert link.anchor in anchors, (
        f"{link.where}: {rel(link.file())} has no heading #{link.anchor}; "
        f"it has {sorted(anchors)}")


# ---- commands ---------------------------------------------------------------------------------

COMMANDS = all_commands()
GROUPSCOPE_COMMANDS = [c for c in COMMANDS if c.program == "groupscope"]
MAKE_COMMANDS = [c for c in COMMANDS if c.program == "make"]


def _command_id(command: Command) -> str:
    return f"{command.where} {TRAILING_COMMENT.sub('', command.text)}"


@functools.cache
def _make_targets() -> set[str]:
    """The Makefile's rules, as `grep '^X:'` finds them (`X Y:` names two)."""
    rule = re.compile(r"^([^\s:#=][^:#=]*?)\s*::?(?!=)")
    targets: set[str] = set()
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        match = rule.match(line)
        if match:
            targets.update(match.group(1).split())
    return targets


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    """The `groupscope` command's own parser: every subcommand module registers itself in
    `build_parser`, so what it accepts is exactly what the installed command accepts."""
    return build_parser()


def test_the_guides_have_commands_to_check() -> None:
    """An extraction that found nothing would pass every check below: the README alone
    holds `make demo`, `make test` and a `groupscope watch`."""
    assert {c.page for c in GROUPSCOPE_COMMANDS} >= {README} | {
        REPO / "docs" / f"{guide}.md" for guide in GUIDES}
    assert {"demo", "test"} <= {word for c in MAKE_COMMANDS if c.page == README
                                for word in c.argv or ()}


@pytest.mark.parametrize("command", GROUPSCOPE_COMMANDS, ids=_command_id)
def test_a_groupscope_example_parses(command: Command, parser: argparse.ArgumentParser) -> None:
    """An example a reader copies must run: a renamed option, a removed subcommand or a
    choice that no longer exists fails here, naming the guide and the line."""
    assert command.argv is not None, (
        f"{command.where}: `{command.text}` does not split as the shell would (a lone quote?)")
    errors = io.StringIO()
    args: argparse.Namespace | None = None
    code: int | str | None = 0
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = parser.parse_args(list(command.argv))
        except SystemExit as exit_:  # argparse's way to refuse, or to end after --help (0)
            code = exit_.code
    if code:
        reason = errors.getvalue().strip().splitlines()[-1:] or [f"exit code {code}"]
        pytest.fail(f"{command.where}: `{command.text}` is refused by groupscope's parser: "
                    f"{reason[0]}", pytrace=False)
    if args is None:  # --help printed the usage
        return
    assert args.command, f"{command.where}: `{command.text}` names no subcommand"


@pytest.mark.parametrize("command", MAKE_COMMANDS, ids=_command_id)
def test_a_make_example_names_a_target(command: Command) -> None:
    """`make X` in a guide must be a rule of the Makefile; `VAR=value` words are settings,
    and the first rule runs when no target is given."""
    assert command.argv is not None, f"{command.where}: `{command.text}` does not split"
    targets = [word for word in command.argv
               if not word.startswith("-") and not ENV_ASSIGNMENT.match(word)]
    missing = sorted(set(targets) - _make_targets())
    assert not missing, f"{command.where}: `{command.text}`: no Makefile rule for {missing}"


@pytest.mark.parametrize("guide", GUIDES)
def test_a_guide_opens_with_its_command(guide: str) -> None:
    """A reader who came for the command finds it first: under the title and a one-sentence
    purpose, the guide's first block is a ```bash block that runs `groupscope` or `make`."""
    page = REPO / "docs" / f"{guide}.md"
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# "), f"{rel(page)} does not open with a title"
    blocks = _blocks(page)
    first = blocks[0] if blocks else None
    assert first is not None and first.language == "bash", (
        f"{rel(page)}: the first block is not a ```bash block")
    prose = [line for line in lines[1:first.opening - 1] if line.strip()]
    assert len(prose) <= 3 and not any(line.startswith("#") for line in prose), (
        f"{rel(page)}: more than a title and one sentence before its command")
    assert any(c.page == page and first.opening < c.line <= first.opening + len(first.lines)
               for c in COMMANDS), (
        f"{rel(page)}: its opening block holds no groupscope or make command")


# ---- which commands a run exercised ----------------------------------------------------------

@pytest.mark.parametrize(("ran", "shown", "covered"), [
    # values aside: the test's own broker and a short duration run the guide's line
    (["chaos", "--duration", "20", "--rate", "50", "--json", "/tmp/x.json"],
     ["chaos", "--duration", "600", "--json", "alo.json"], True),
    # an option the guide shows and no run gave
    (["chaos", "--duration", "20"], ["chaos", "--duration", "600", "--broker-kills"], False),
    # a positional's value is a value: `ctl kill bruno` is run by `ctl kill ada`, options
    # anywhere; a positional's fixed choices are part of the path
    (["ctl", "--data-dir", "d", "kill", "ada"], ["ctl", "kill", "bruno"], True),
    (["ctl", "kill", "ada", "--data-dir", "d"], ["ctl", "kill", "bruno"], True),
    (["ctl", "share", "scale", "3"], ["ctl", "share", "scale", "8"], True),
    (["ctl", "share", "kill", "ada"], ["ctl", "share", "scale", "8"], False),
    (["ctl", "broker", "kill", "1"], ["ctl", "broker", "kill", "2"], True),
    (["ctl", "broker", "start", "1"], ["ctl", "broker", "kill", "2"], False),
    # `--name=value` is `--name`; a negative number is a value
    (["offsets", "reset", "--group=g", "--shift-by", "-5"],
     ["offsets", "reset", "--group", "invoicer", "--shift-by", "-500"], True),
    (["offsets", "delete", "--group", "g"], ["offsets", "reset", "--group", "g"], False),
    # a flag takes no value: the word after it is read as what it is
    (["replica", "--share", "--id", "ada"], ["replica", "--share", "--id", "bruno"], True),
])
def test_a_guide_command_is_covered_by_a_run_of_its_subcommand_with_its_options(
        parser: argparse.ArgumentParser, ran: list[str], shown: list[str], covered: bool) -> None:
    guide = Command(README, 1, " ".join(shown), "groupscope", tuple(shown))
    assert (unexercised(parser, [guide], [ran]) == []) is covered, (
        f"{shape(parser, ran)} against {shape(parser, shown)}")


def test_a_line_without_a_subcommand_needs_no_run(parser: argparse.ArgumentParser) -> None:
    helps = Command(README, 1, "groupscope --help", "groupscope", ("--help",))
    assert unexercised(parser, [helps], []) == []


def test_the_recorded_runs_survive_a_torn_line(tmp_path: Path) -> None:
    """Processes killed mid-write (the suite kills many) may leave half a line."""
    log = tmp_path / "argv.jsonl"
    log.write_text('["watch", "--bootstrap", "b"]\n{"not": "argv"}\n["ctl", "st')
    assert recorded(log) == [["watch", "--bootstrap", "b"]]
    assert recorded(tmp_path / "absent.jsonl") == []
