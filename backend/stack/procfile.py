"""Read the Procfile so `groupscope up` and honcho run exactly the same processes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# honcho's own pattern (honcho.environ.PROCFILE_LINE): a line it would not match, honcho skips
# silently, so here anything but a blank line or a comment must match it, or `up` would run
# a process type honcho never starts
LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


class ProcfileError(ValueError):
    """The Procfile, or what `up` is told about its process types, cannot be run."""


@dataclass(frozen=True)
class ProcessType:
    name: str
    command: str


def read_procfile(path: Path | None = None) -> list[ProcessType]:
    path = path or REPO_ROOT / "Procfile"
    entries: list[ProcessType] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = LINE.match(line.rstrip())
        if match is None:
            raise ProcfileError(f"{path}:{number}: expected 'name: command' with a name of "
                                f"letters, digits, '-' or '_' at the start of the line")
        name, command = match.group(1), match.group(2).strip()
        if any(e.name == name for e in entries):
            raise ProcfileError(f"{path}:{number}: process type {name!r} is defined twice")
        entries.append(ProcessType(name, command))
    return entries
