"""`groupscope up`: the Procfile's processes, started in order, each awaited until ready.

Each child runs in its own process group so Ctrl-C reaches only this launcher, which then
stops the children (SIGTERM, then SIGKILL for a group that hangs) within STOP_BUDGET_S:
first the backend and the dashboard, while the broker and Spark still answer, so replicas
finish their batch and leave the group; then the broker and Spark. Every child is spawned
through backend.proc's exec shim, so if this launcher is killed outright the children die
with it, and theirs with them: nothing of the stack is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from backend.cluster.settings import resolve_settings
from backend.engine.session import check_engine
from backend.netutil import wait_until
from backend.paths import data_dir
from backend.proc import (
    LAST_WAVE_S,
    STOP_BUDGET_S,
    StopSignals,
    abort_if_exited,
    reap,
    send,
    spawn,
)
from backend.stack.config import StackConfig
from backend.stack.procfile import REPO_ROOT, ProcessType, read_procfile

READY_TIMEOUT = {"broker": 90.0, "spark": 180.0, "backend": 120.0, "web": 60.0}
# Stopped last, because the others need them to stop cleanly (they get LAST_WAVE_S at least).
SERVICES = ("broker", "spark")


@dataclass
class RunningProcess:
    kind: ProcessType
    popen: subprocess.Popen


class StackLauncher:
    def __init__(self, config: StackConfig | None = None, out=None) -> None:
        self.config = config or StackConfig.from_env()
        self.out = out or sys.stdout
        self.running: list[RunningProcess] = []
        self._signals = StopSignals(on_stop=self._interrupt_start_up)
        self._starting = True

    # ---- readiness probes: real requests, never sleeps -------------------------------

    def _probe(self, name: str) -> Callable[[], bool] | None:
        if name == "broker":
            settings = resolve_settings()
            return lambda: settings.check_reachable(timeout=2.0) >= 1
        if name == "spark":
            return lambda: bool(check_engine(self.config.spark_remote, warm_up=True))
        if name == "backend":
            return self._backend_ready
        if name == "web":
            url = f"http://127.0.0.1:{self.config.web_port}/_stcore/health"
            return lambda: _http_text(url) == "ok"
        return None

    def _backend_ready(self) -> bool:
        import json

        info = data_dir() / "control.json"
        if not info.exists():
            return False
        url = json.loads(info.read_text())["url"]
        return _http_text(f"{url}/health", timeout=2.0) is not None

    def skipped(self, name: str) -> str | None:
        if name == "broker" and self.config.external_kafka:
            return f"external cluster {resolve_settings().describe()}"
        if name == "spark" and self.config.external_spark:
            return f"SPARK_REMOTE={self.config.spark_remote}"
        return None

    # ---- lifecycle -------------------------------------------------------------------

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def start(self, kind: ProcessType) -> RunningProcess:
        # children run from the repository; they must still share this launcher's data dir
        env = dict(os.environ, PYTHONUNBUFFERED="1", GROUPSCOPE_DATA=str(data_dir().resolve()))
        env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
        popen = spawn(
            ["/bin/sh", "-c", f"exec {kind.command}"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc = RunningProcess(kind, popen)
        threading.Thread(target=self._relay, args=(proc,), daemon=True).start()
        self.running.append(proc)
        return proc

    def _relay(self, proc: RunningProcess) -> None:
        assert proc.popen.stdout is not None
        for raw in proc.popen.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.say(f"{proc.kind.name:>8} | {line}")

    def wait_ready(self, proc: RunningProcess) -> None:
        name = proc.kind.name
        probe = self._probe(name) or (lambda: True)
        timeout = READY_TIMEOUT.get(name, 60.0)
        start = time.monotonic()

        try:
            wait_until(probe, timeout, interval=0.5, what=name,
                       abort=abort_if_exited(proc.popen, name, lambda: " while starting"))
        except TimeoutError:
            raise RuntimeError(f"{name} not ready within {timeout:.0f}s") from None
        self.say(f"{name:>8} | ready in {time.monotonic() - start:.1f}s")

    def _interrupt_start_up(self) -> None:
        """Ctrl-C while a probe runs (Spark's warm-up takes seconds): stop waiting at once."""
        if self._starting:
            raise KeyboardInterrupt

    def stop_all(self, budget: float = STOP_BUDGET_S) -> None:
        """Two waves within `budget`: everything but the broker and Spark (reverse start
        order), then those two; a process group still there at its wave's end is SIGKILLed."""
        deadline = time.monotonic() + budget
        users = [p for p in reversed(self.running) if p.kind.name not in SERVICES]
        services = [p for p in reversed(self.running) if p.kind.name in SERVICES]
        for wave, ends in ((users, deadline - LAST_WAVE_S), (services, deadline)):
            for proc in wave:
                if proc.popen.poll() is None:
                    self.say(f"{proc.kind.name:>8} | stopping")
                    send(proc.popen, signal.SIGTERM, group=True)
            for proc in wave:
                try:
                    proc.popen.wait(max(0.0, ends - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{proc.kind.name:>8} | still running; killing it")
                # whatever is left in the group (grandchildren included) goes now
                reap(proc.popen, 0.0, group=True)
        self.running.clear()

    def _first_exited(self) -> RunningProcess | None:
        return next((p for p in self.running if p.popen.poll() is not None), None)

    def run(self) -> int:
        started = time.monotonic()
        with self._signals as signals:
            try:
                for kind in read_procfile():
                    reason = self.skipped(kind.name)
                    if reason:
                        self.say(f"{kind.name:>8} | skipped: {reason}")
                        continue
                    self.say(f"{kind.name:>8} | starting: {kind.command}")
                    self.wait_ready(self.start(kind))
                self._starting = False
                self.say(f"\ngroupscope is up in {time.monotonic() - started:.0f}s: open "
                         f"{self.config.dashboard_url}  (Ctrl-C stops everything)\n")
                if signals.wait(alive=lambda: self._first_exited() is None, interval=0.5):
                    return 0
                gone = self._first_exited()
                assert gone is not None
                self.say(f"{gone.kind.name} exited with code {gone.popen.returncode}; "
                         f"stopping the stack")
                return 1
            except KeyboardInterrupt:
                return 130
            except RuntimeError as exc:
                self.say(f"groupscope up: {exc}")
                return 1
            finally:
                self._starting = False
                self.stop_all()
                self.say("groupscope stopped")


def _http_text(url: str, timeout: float = 1.0) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode().strip()
    except Exception:
        return None
