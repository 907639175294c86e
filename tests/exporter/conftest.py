"""Fixtures for the exporter's live tests: the observer's real members and producers, and
`groupscope exporter` / `watch` as real subprocesses that are killed at teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.proc import spawn, terminate
from tests.observer.conftest import REPO, members_factory, producer_factory

__all__ = ["members_factory", "producer_factory"]  # the observer's fixtures, reused

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """(sample name, sorted labels) -> value, read by prometheus_client's own parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        return parse(resp.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def wait_exported(port: int, timeout: float, **labels: str) -> Samples:
    """Scrape until the group's lag series (`labels`: cluster, group, topic) is exported."""
    from backend.netutil import wait_until

    def exported() -> Samples | None:
        s = scrape(port)
        return s if value(s, "groupscope_group_lag_messages", **labels) is not None else None

    return wait_until(exported, timeout=timeout, interval=0.5,
                      what=f"{labels.get('group')} exported on port {port}")


class Command:
    """One `groupscope` subprocess with its output in files (no pipe to fill up)."""

    def __init__(self, proc: subprocess.Popen, out: Path, err: Path) -> None:
        self.proc, self.out, self.err = proc, out, err

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


@pytest.fixture
def groupscope(tmp_path: Path) -> Iterator[Callable[..., Command]]:
    """`groupscope(*args)` starts `python -m backend.cli *args`; teardown SIGTERMs every one
    still running and SIGKILLs it after 5 s, also when the test failed."""
    made: list[Command] = []

    def start(*args: str, data: Path | None = None) -> Command:
        """`data`: the data directory (the memory's), the test's own `data/` by default."""
        n = len(made)
        out, err = tmp_path / f"cmd{n}.out", tmp_path / f"cmd{n}.err"
        env = dict(os.environ, GROUPSCOPE_DATA=str(data or tmp_path / "data"))
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = spawn([sys.executable, "-m", "backend.cli", *args], cwd=REPO, stdout=o,
                         stderr=e, stdin=subprocess.DEVNULL, env=env)
        made.append(Command(proc, out, err))
        return made[-1]

    try:
        yield start
    finally:
        for cmd in made:
            terminate(cmd.proc, 5.0)
