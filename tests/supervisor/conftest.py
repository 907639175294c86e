"""Run `groupscope backend` as a real child process and talk to it the way the dashboard does.

Whatever a test does, teardown stops the backend and then SIGKILLs any replica process that
is still alive (found by pid, and by its `--group` argument), so a failing test leaves
nothing; and the backend dies with the test run however it ends (backend.proc's spawn).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from backend.control_files import read_control_files
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.proc import abort_if_exited, process_args, spawn, terminate
from backend.supervisor.client import ControlClient

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin_member.py")
SESSION_TIMEOUT_S = 6.0  # what replicas (and the stand-in) ask the broker for


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids_with_arg(*needles: str) -> list[int]:
    """Processes whose command line contains every needle (as separate arguments)."""
    found = []
    for proc in psutil.process_iter():
        try:
            args = process_args(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if all(n in args for n in needles) and pid_alive(proc.pid):
            found.append(proc.pid)
    return found


@dataclass
class Backend:
    proc: subprocess.Popen
    data_dir: Path
    group: str
    topic: str
    kafka: KafkaSettings
    log: Path
    client: ControlClient | None = None
    seen_pids: set[int] = field(default_factory=set)

    def status(self):
        st = self.client.status()
        self.seen_pids.update(r.pid for r in st.replicas if r.pid)
        return st

    def members(self) -> list[str]:
        """Client ids of the group members, as the broker reports them."""
        return _reader(self.kafka).describe_group(self.group).client_ids

    def member_ids(self) -> dict[str, str]:
        view = _reader(self.kafka).describe_group(self.group)
        return {m.client_id: m.member_id for m in view.members}

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines()[-n:] if self.log.exists() else []
        return "\n".join(lines)


_READERS: dict[str, KafkaReader] = {}


def _reader(kafka: KafkaSettings) -> KafkaReader:
    """The tests' own view of a group, through the reader groupscope reads with (one JVM per
    cluster for the test process, ended with it like every child of backend.proc)."""
    if kafka.bootstrap not in _READERS:
        _READERS[kafka.bootstrap] = KafkaReader.shared(kafka, "groupscope-tests")
    return _READERS[kafka.bootstrap]


def start_backend(kafka: KafkaSettings, data_dir: Path, group: str, topic: str,
                  *args: str, replica_command: list[str] | None = None,
                  timeout: float = 90.0, env: dict[str, str] | None = None) -> Backend:
    cmd = [sys.executable, "-m", "backend.cli", "backend", "--bootstrap", kafka.bootstrap,
           "--group", group, "--topic", topic, "--data-dir", str(data_dir), *args]
    if replica_command:
        cmd += ["--replica-command", subprocess.list2cmdline(replica_command)]
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "backend.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    with open(log, "ab") as out:
        proc = spawn(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    backend = Backend(proc, data_dir, group, topic, kafka, log)

    def ready() -> bool:
        ep = read_control_files(data_dir)
        if ep.pid != proc.pid:
            return False
        client = ControlClient(ep.url, ep.token, timeout=10)
        if client.health():
            backend.client = client
            return True
        return False

    try:
        wait_until(ready, timeout, interval=0.2, what="the backend's control API",
                   abort=abort_if_exited(proc, "backend", lambda: f":\n{backend.log_tail()}",
                                         AssertionError))
    except BaseException:
        stop_backend(backend)
        raise
    return backend


def stop_backend(backend: Backend) -> None:
    """SIGTERM, SIGKILL if it hangs; then SIGKILL any replica that survived (test failed)."""
    terminate(backend.proc, 60, group=True)
    leftovers = {p for p in backend.seen_pids if pid_alive(p)}
    leftovers |= set(pids_with_arg("--group", backend.group))
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def backend_factory(kafka: KafkaSettings, tmp_path: Path) -> Iterator:
    started: list[Backend] = []

    def make(group: str, topic: str, *args: str, **kw) -> Backend:
        b = start_backend(kafka, tmp_path / f"data-{len(started)}", group, topic, *args, **kw)
        started.append(b)
        return b

    try:
        yield make
    finally:
        for b in started:
            stop_backend(b)


@pytest.fixture
def standin_command(tmp_path: Path) -> list[str]:
    """The stand-in member as the replica command; each one starts a child of its own."""
    pid_dir = tmp_path / "child-pids"
    pid_dir.mkdir()
    return [sys.executable, str(STANDIN), "--child-pid-dir", str(pid_dir)]
