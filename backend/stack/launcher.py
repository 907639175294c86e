"""`groupscope up`: the Procfile's processes, started in order, each awaited until ready.

Each child runs in its own process group so Ctrl-C reaches only this launcher, which then
stops the children in reverse order (SIGTERM, then SIGKILL for a group that hangs). That is
how nothing of the stack is left behind: a replica's own children die with its group.
"""

from __future__ import annotations

import contextlib
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
from backend.paths import data_dir
from backend.stack.config import StackConfig
from backend.stack.procfile import REPO_ROOT, ProcessType, read_procfile

READY_TIMEOUT = {"broker": 90.0, "spark": 180.0, "backend": 120.0, "web": 60.0}
# The backend stops its replicas gracefully (finish batch, commit, leave the group) first.
STOP_GRACE = {"backend": 45.0}


@dataclass
class RunningProcess:
    kind: ProcessType
    popen: subprocess.Popen


class StackLauncher:
    def __init__(self, config: StackConfig | None = None, out=None) -> None:
        self.config = config or StackConfig.from_env()
        self.out = out or sys.stdout
        self.running: list[RunningProcess] = []
        self._stop = threading.Event()

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
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
        popen = subprocess.Popen(
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
        probe = self._probe(proc.kind.name)
        timeout = READY_TIMEOUT.get(proc.kind.name, 60.0)
        start = time.monotonic()
        while True:
            if self._stop.is_set():
                raise KeyboardInterrupt
            code = proc.popen.poll()
            if code is not None:
                raise RuntimeError(f"{proc.kind.name} exited with code {code} while starting")
            try:
                if probe is None or probe():
                    self.say(f"{proc.kind.name:>8} | ready in {time.monotonic() - start:.1f}s")
                    return
            except Exception:
                pass
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"{proc.kind.name} not ready within {timeout:.0f}s")
            self._stop.wait(0.5)

    def stop_all(self) -> None:
        for proc in reversed(self.running):
            grace = STOP_GRACE.get(proc.kind.name, 20.0)
            if proc.popen.poll() is None:
                self.say(f"{proc.kind.name:>8} | stopping")
                _signal_group(proc.popen.pid, signal.SIGTERM)
                try:
                    proc.popen.wait(grace)
                except subprocess.TimeoutExpired:
                    self.say(f"{proc.kind.name:>8} | did not stop in {grace:.0f}s; killing")
            # whatever is left in the group (grandchildren included) goes now
            _signal_group(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()
        self.running.clear()

    def run(self) -> int:
        def on_signal(signum: int, frame: object) -> None:
            self._stop.set()

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        started = time.monotonic()
        try:
            for kind in read_procfile():
                reason = self.skipped(kind.name)
                if reason:
                    self.say(f"{kind.name:>8} | skipped: {reason}")
                    continue
                self.say(f"{kind.name:>8} | starting: {kind.command}")
                self.wait_ready(self.start(kind))
            self.say(f"\ngroupscope is up in {time.monotonic() - started:.0f}s: open "
                     f"{self.config.dashboard_url}  (Ctrl-C stops everything)\n")
            while not self._stop.wait(0.5):
                for proc in self.running:
                    if proc.popen.poll() is not None:
                        self.say(f"{proc.kind.name} exited with code {proc.popen.returncode}; "
                                 f"stopping the stack")
                        return 1
            return 0
        except KeyboardInterrupt:
            return 130
        except RuntimeError as exc:
            self.say(f"groupscope up: {exc}")
            return 1
        finally:
            self.stop_all()
            for s, h in old.items():
                signal.signal(s, h)
            self.say("groupscope stopped")


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _http_text(url: str, timeout: float = 1.0) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode().strip()
    except Exception:
        return None
