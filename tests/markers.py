"""Tests say what they use: markers derived from fixtures, and a guard that holds light runs to it.

`broker`, `spark`, `browser` and `stack` are never written by hand. Each test is marked by the
fixtures it requests, transitively (`item.fixturenames` is the closure), from the one table
below, keyed by the root fixtures that start a JVM, a browser or the whole stack: a fixture
built on one of them is covered without anyone remembering a decorator, and the markers cannot
drift from what a test really starts.

The guard makes that checkable. A session whose selected tests carry no `broker`/`spark`/
`stack` marker may not start `java`; one whose tests carry no `browser` marker may not start
Chromium. While such a session runs, three nets catch a start:

* an audit hook refuses a `java`/Chromium executable spawned by the pytest process itself;
* a shim directory first on PATH (and as JAVA_HOME) answers `java` and `chromium` for every
  descendant that looks them up the usual way (the broker, spark-submit), records the call and
  exits 126, so the offending test fails fast instead of loading a shared machine;
* a thread polls the process tree for any descendant named like them (Playwright starts
  Chromium by absolute path from its Node driver, out of reach of the first two).

Whatever is caught fails the session, naming the test that was running. `make unit` also sets
GROUPSCOPE_UNIT_ONLY=1, which turns a heavy test that slipped through its `-m` into a usage
error before anything runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# root fixture -> the markers a test requesting it (directly or through other fixtures) gets
FIXTURE_MARKERS: dict[str, tuple[str, ...]] = {
    "broker": ("broker",),  # tests/conftest.py: the session's embedded Kafka
    "broker_factory": ("broker",),  # tests/conftest.py: private brokers a test stops/restarts
    "secure_broker": ("broker",),  # tests/observer/test_acl_observer.py: SASL + ACLs
    "tls_cluster": ("broker",),  # tests/system/security/test_tls_watch.py: SSL + SASL_SSL + ACLs
    "kafka_cluster": ("broker",),  # tests/conftest.py: three KRaft nodes (cluster3)
    # tests/supervisor/test_broker_control.py: `groupscope broker --brokers 3` as a process
    "cluster_process": ("broker",),
    # tests/broker/test_cluster_nodes.py: a cluster the test starts itself
    "cluster_root": ("broker",),
    "kafka3": ("broker",),  # tests/system/test_kafka3.py: a Kafka 3.9 node
    "spark_engine": ("spark",),  # tests/conftest.py: the session's Spark Connect server
    "spark_factory": ("spark",),  # tests/conftest.py: private servers a test stops/replaces
    # tests/conftest.py: standalone masters, workers and their drivers, by API or command
    "spark_cluster_factory": ("spark",),
    "chromium": ("browser",),  # tests/conftest.py: headless Chromium pages via Playwright
    # tests/conftest.py: `groupscope up`, or the backend with the web server; the stack runs a
    # broker and Spark (its own or the session's), so `-m "not spark"` leaves it out too
    "stack": ("stack", "broker", "spark"),
}

HEAVY_MARKERS = frozenset(m for marks in FIXTURE_MARKERS.values() for m in marks)
JAVA_MARKERS = frozenset({"broker", "spark", "stack"})
BROWSER_MARKERS = frozenset({"browser"})
JAVA_NAMES = frozenset({"java"})
CHROMIUM_NAMES = frozenset({"chromium", "chromium-browser", "chromium-headless-shell",
                            "chrome", "google-chrome", "headless_shell",
                            "chrome-headless-shell"})
UNIT_ONLY_ENV = "GROUPSCOPE_UNIT_ONLY"
POLL_INTERVAL_S = 0.2


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark before `-m` deselects (tryfirst), so `make unit` selects on the derived markers."""
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for name in getattr(item, "fixturenames", ()):
            for marker in FIXTURE_MARKERS.get(name, ()):
                if marker not in have:
                    item.add_marker(marker)
                    have.add(marker)


def _program(executable: object, args: object) -> str:
    """The basename a spawn will run: `executable` if given, else the first argument."""
    prog = executable
    if prog is None:
        if isinstance(args, (str, bytes, os.PathLike)):
            prog = args
        elif isinstance(args, (list, tuple)) and args:
            prog = args[0]
    return os.path.basename(os.fsdecode(prog)) if prog is not None else ""


SHIM = """#!/bin/sh
# written by tests/markers.py for a run whose tests may not start this program
parent=$(tr '\\0' ' ' < /proc/$PPID/cmdline 2>/dev/null | cut -c1-200)
printf '%s\\t%s\\n' "$(basename "$0")" "$parent" >> {record}
echo "$(basename "$0") refused: no selected test is marked for it (tests/markers.py)" >&2
exit 126
"""


@dataclass
class SpawnGuard:
    """Refuses and records java/Chromium starts in a session whose tests may not make any."""

    forbidden: frozenset[str]
    current: str = "(collection)"
    found: list[tuple[str, str]] = field(default_factory=list)
    active: bool = False
    _seen_pids: set[int] = field(default_factory=set)
    _shim: Path | None = None
    _record_read: int = 0
    _saved_env: dict[str, str | None] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str) -> None:
        with self._lock:
            self.found.append((self.current, what))

    # ---- the three nets --------------------------------------------------------------

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """sys.addaudithook target: raising here stops the spawn before the fork."""
        if not self.active or event not in ("subprocess.Popen", "os.posix_spawn",
                                            "backend.proc.spawn"):
            return
        # backend.proc.spawn names the real command; Popen's own event shows only the
        # interpreter of the die-with-parent shim that backend.proc wraps it in
        prog = _program(args[0], args[1]) if event == "subprocess.Popen" \
            else _program(None, args[0]) if event == "backend.proc.spawn" \
            else _program(args[0], None)
        if prog in self.forbidden:
            self.note(f"{prog} spawned by the test process")
            raise PermissionError(f"{prog} refused: no selected test is marked for it "
                                  "(tests/markers.py)")

    def _install_shim(self) -> None:
        self._shim = Path(tempfile.mkdtemp(prefix="gs-spawn-guard-"))
        record = self._shim / "record"
        record.touch()
        (self._shim / "bin").mkdir()
        for name in self.forbidden:
            path = self._shim / "bin" / name
            path.write_text(SHIM.format(record=record))
            path.chmod(0o755)
        overrides = {"PATH": f"{self._shim / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        if self.forbidden & JAVA_NAMES:
            overrides["JAVA_HOME"] = str(self._shim)  # spark-class prefers $JAVA_HOME/bin/java
        for key, value in overrides.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value

    def read_shim_record(self) -> None:
        if self._shim is None:
            return
        lines = (self._shim / "record").read_text(errors="replace").splitlines()
        for line in lines[self._record_read:]:
            prog, _, parent = line.partition("\t")
            self.note(f"{prog} run by a descendant ({parent.strip() or 'parent gone'})")
        self._record_read = len(lines)

    def scan(self) -> None:
        """One look at the process tree: any descendant that is java/Chromium is recorded."""
        import psutil

        try:
            children = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            if child.pid in self._seen_pids:
                continue
            try:
                # the executable, not the name: a shim script called `java` (this guard's, or
                # a child pytest's) runs as /bin/sh and must not count as a JVM
                prog = os.path.basename(child.exe())
            except psutil.Error:
                continue
            if prog in self.forbidden:
                self._seen_pids.add(child.pid)
                self.note(f"{prog} (pid {child.pid}) running under the test process")

    def _poll(self) -> None:
        while not self._stop.wait(POLL_INTERVAL_S):
            self.scan()

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self.active = True
        self._install_shim()
        self._thread = threading.Thread(target=self._poll, name="spawn-guard", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        if not self.active:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.scan()
        self.read_shim_record()
        self.active = False
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._shim is not None:
            shutil.rmtree(self._shim, ignore_errors=True)


_GUARD_KEY = pytest.StashKey[SpawnGuard]()
_AUDIT_GUARDS: list[SpawnGuard] = []  # audit hooks cannot be removed: one, reading this list


def _audit(event: str, args: tuple[Any, ...]) -> None:
    for guard in _AUDIT_GUARDS:
        guard.audit(event, args)


def pytest_collection_finish(session: pytest.Session) -> None:
    """After `-m`/`-k` chose the tests: decide what this run may start, and guard the rest."""
    marked = {m.name for item in session.items for m in item.iter_markers()} & HEAVY_MARKERS
    if os.environ.get(UNIT_ONLY_ENV) == "1" and marked:
        heavy = [i.nodeid for i in session.items if HEAVY_MARKERS & {m.name for m in
                                                                     i.iter_markers()}]
        pytest.exit(f"{UNIT_ONLY_ENV}=1 but {len(heavy)} selected tests are marked "
                    f"{'/'.join(sorted(marked))}, e.g. {heavy[0]}", returncode=4)
    forbidden: set[str] = set()
    if not marked & JAVA_MARKERS:
        forbidden |= JAVA_NAMES
    if not marked & BROWSER_MARKERS:
        forbidden |= CHROMIUM_NAMES
    if not forbidden or session.config.option.collectonly:
        return
    guard = SpawnGuard(frozenset(forbidden))
    session.config.stash[_GUARD_KEY] = guard
    if not _AUDIT_GUARDS:
        sys.addaudithook(_audit)
    _AUDIT_GUARDS[:] = [guard]
    guard.start()


def _guard(config: pytest.Config) -> SpawnGuard | None:
    return config.stash.get(_GUARD_KEY, None)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """What the guard catches is charged to the test running at the time."""
    for guard in _AUDIT_GUARDS:
        guard.current = nodeid


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Shim calls are attributed per test: the record is read as each test finishes."""
    for guard in _AUDIT_GUARDS:
        guard.read_shim_record()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Tryfirst: the verdict must be in before the terminal summary and the exit status."""
    guard = _guard(session.config)
    if guard is None:
        return
    guard.finish()
    _AUDIT_GUARDS.clear()
    if guard.found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """Say which test started what: the exit status alone would send one hunting."""
    guard = _guard(config)
    if guard is None or not guard.found:
        return
    terminalreporter.section("processes this run may not start", sep="=", red=True, bold=True)
    terminalreporter.line("No selected test is marked for these (markers come from fixtures, "
                          "see tests/markers.py):", red=True)
    for test, what in guard.found:
        terminalreporter.line(f"  {test}: {what}", red=True)
