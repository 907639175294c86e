"""Read the Procfile so `groupscope up` and honcho run exactly the same processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ProcessType:
    name: str
    command: str


def read_procfile(path: Path | None = None) -> list[ProcessType]:
    path = path or REPO_ROOT / "Procfile"
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip() or not command.strip():
            raise ValueError(f"{path}:{number}: expected 'name: command'")
        entries.append(ProcessType(name.strip(), command.strip()))
    return entries
