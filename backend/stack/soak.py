"""`groupscope soak`: run the whole stack, kill replicas on a timer, watch for resource leaks.

It starts `groupscope up` as a subprocess on its own data directory and free ports, kills a
replica every K seconds through the control API (and starts a replacement, so three keep
running), and samples every process of the stack (the descendants of `up`, read with psutil):
RSS, open file descriptors, threads, and zombies. At the end it stops `up` with SIGINT, as
Ctrl-C would.

Checks (any failing one makes the exit code 1):

* **no orphans** - after `up` has exited, no process it ever had is alive, and no process
  carrying this run's marker in its environment survives (that catches processes that were
  re-parented before a sample saw them);
* **no lingering zombies** - a zombie may be seen in one sample (it died since the last one
  and its parent has not reaped it yet) but never in two consecutive samples;
* **memory flat within 20 %** - the first 25 % of the run is warm-up (JVM heaps grow, Spark
  and Streamlit load lazily). After it, for every long-lived role (broker, spark, backend,
  web) max RSS / min RSS <= 1.2, where a role's RSS is the sum over its process subtree
  (e.g. the `groupscope broker` wrapper and its JVM). Replicas are replaced by the kills,
  so they are judged as one *replica slot*: each incarnation that lived through at least
  one whole kill interval contributes its largest RSS, and the median of the later half of
  those incarnations may exceed the median of the earlier half by at most 20 % - a leak that
  each new replica inherits, or that grows with replica age, shows up there. (Not max/min:
  an incarnation that starts behind a backlog processes full 20k-row batches and peaks
  higher than one that starts on a caught-up group, without leaking anything.)
* **no fd / thread growth** - per long-lived role, the last sample after warm-up exceeds the
  first by no more than max(20 %, 16) fds and max(20 %, 8) threads; for the replica slot
  the same rule compares the first and the last judged incarnation at their peak.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from backend.contracts.control import STANDBY_NAME
from backend.netutil import free_port, wait_until
from backend.proc import abort_if_exited, reap, spawn
from backend.supervisor.client import ControlClient, ControlError

ROLES = ("broker", "spark", "backend", "web")
RSS_RATIO = 1.2
WARMUP_FRACTION = 0.25
FD_SLACK, THREAD_SLACK = 16, 8
MARKER_ENV = "GROUPSCOPE_SOAK_MARKER"
# the warm standby's role: one for every standby process, as footprint.py reports it
STANDBY_ROLE = f"replica:{STANDBY_NAME}"


@dataclass(frozen=True)
class ProcSample:
    pid: int
    ppid: int
    start: float  # creation time: (pid, start) names a process across pid reuse
    state: str  # psutil's status: "running", "sleeping", "zombie", ...
    rss: int  # bytes
    fds: int
    threads: int
    cmdline: str

    @property
    def zombie(self) -> bool:
        return self.state == psutil.STATUS_ZOMBIE


def _sample(proc: psutil.Process) -> ProcSample | None:
    """One process, or None when it vanished meanwhile (or is not ours to read)."""
    try:
        with proc.oneshot():
            state = proc.status()
            try:
                cmd = " ".join(proc.cmdline())
            except psutil.ZombieProcess:
                cmd = ""
            return ProcSample(proc.pid, proc.ppid(), proc.create_time(), state,
                              proc.memory_info().rss, proc.num_fds(), proc.num_threads(),
                              cmd or f"[{proc.name()}]")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def read_proc(pid: int) -> ProcSample | None:
    """One process by pid, or None when there is no such process."""
    try:
        return _sample(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return None


def all_processes() -> dict[int, ProcSample]:
    return {s.pid: s for s in map(_sample, psutil.process_iter()) if s is not None}


def replica_name(cmd: str) -> str | None:
    parts = cmd.split()
    if "replica" in parts and "--id" in parts:
        i = parts.index("--id")
        return parts[i + 1] if i + 1 < len(parts) else None
    return None


def classify(root: int, procs: dict[int, ProcSample]) -> dict[tuple[int, int], str]:
    """(pid, start) -> role: broker/spark/backend/web for a subtree, `replica:NAME@start`, and
    STANDBY_ROLE for the warm standby: a process waiting for its order, a replica only once
    it takes a name (its title then says it), so it is never judged as an incarnation."""
    roles: dict[tuple[int, int], str] = {}
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)

    def walk(pid: int, role: str) -> None:
        p = procs[pid]
        name = replica_name(p.cmdline)
        if name == STANDBY_NAME:
            role = STANDBY_ROLE
        elif name:
            role = f"replica:{name}@{p.start}"
        roles[(p.pid, p.start)] = role
        for c in children.get(pid, []):
            walk(c, role)

    for pid in children.get(root, []):
        cmd = procs[pid].cmdline
        role = next((r for r in ROLES if f"groupscope {r}" in cmd or f"cli {r}" in cmd),
                    "web" if "streamlit" in cmd else "other")
        walk(pid, role)
    return roles


@dataclass
class Tick:
    t: float  # seconds since the stack was up
    roles: dict[str, dict[str, int]]  # role -> rss, fds, threads, procs
    zombies: list[tuple[int, int, str]]


@dataclass
class RoleReport:
    role: str
    rss_first_mb: float
    rss_last_mb: float
    rss_max_mb: float
    rss_min_mb: float
    fds_first: int
    fds_last: int
    threads_first: int
    threads_last: int
    samples: int
    verdict: str
    problems: list[str] = field(default_factory=list)


@dataclass
class SoakResult:
    duration: float
    kill_every: float
    kills: int
    kill_errors: list[str]
    samples: int
    roles: list[RoleReport]
    orphans: list[str]
    lingering_zombies: list[str]
    up_exit: int | None
    problems: list[str]
    loadavg: tuple[float, float, float]

    @property
    def ok(self) -> bool:
        return not self.problems


def _growth_ok(first: int, last: int, slack: int) -> bool:
    return last - first <= max(slack, first * (RSS_RATIO - 1))


def _growth_problems(label: str, first: dict[str, int], last: dict[str, int]) -> list[str]:
    """fds and threads may not grow beyond their slack between two samples."""
    return [f"{label}: {key} grew {first[key]} -> {last[key]}"
            for key, slack in (("fds", FD_SLACK), ("threads", THREAD_SLACK))
            if not _growth_ok(first[key], last[key], slack)]


def _report(label: str, points: list[dict[str, int]], problems: list[str]) -> RoleReport:
    first, last = points[0], points[-1]
    rss = [v["rss"] for v in points]
    return RoleReport(label, first["rss"] / 2**20, last["rss"] / 2**20, max(rss) / 2**20,
                      min(rss) / 2**20, first["fds"], last["fds"], first["threads"],
                      last["threads"], len(points), "ok" if not problems else "FAIL", problems)


def judge_role(role: str, ticks: list[Tick], warm_from: float) -> RoleReport:
    series = [(t.t, t.roles[role]) for t in ticks if role in t.roles]
    if not series:
        return RoleReport(role, 0, 0, 0, 0, 0, 0, 0, 0, 0, "FAIL", [f"{role}: never sampled"])
    steady = [v for ts, v in series if ts >= warm_from] or [v for _, v in series]
    problems = []
    rss = [v["rss"] for v in steady]
    if min(rss) and max(rss) / min(rss) > RSS_RATIO:
        problems.append(f"{role}: RSS after warm-up {min(rss) / 2**20:.0f}..{max(rss) / 2**20:.0f}"
                        f" MB, more than {RSS_RATIO:.1f}x")
    problems += _growth_problems(role, steady[0], steady[-1])
    return _report(role, steady, problems)


def judge_replica_slot(ticks: list[Tick], warm_from: float, kill_every: float) -> RoleReport:
    """Each replica incarnation that lived >= one kill interval, at its peak, in birth order."""
    lives: dict[str, list[tuple[float, dict[str, int]]]] = {}
    for t in ticks:
        for role, v in t.roles.items():
            if role.startswith("replica:") and role != STANDBY_ROLE:
                lives.setdefault(role, []).append((t.t, v))
    by_birth = sorted(lives.values(), key=lambda series: series[0][0])

    def peak(series: list[tuple[float, dict[str, int]]]) -> dict[str, int]:
        return {k: max(v[k] for _, v in series) for k in ("rss", "fds", "threads")}

    peaks = [peak(s) for s in by_birth if s[-1][0] - s[0][0] >= kill_every and s[0][0] >= warm_from]
    if len(peaks) < 2:  # a short run: fall back to every incarnation seen after warm-up
        peaks = [peak(s) for s in by_birth if s[-1][0] >= warm_from]
    if not peaks:
        return RoleReport("replica slot", 0, 0, 0, 0, 0, 0, 0, 0, 0, "FAIL",
                          ["replica slot: no replica sampled"])
    problems = []
    rss = [p["rss"] for p in peaks]
    half = len(rss) // 2
    earlier, later = (rss[:half], rss[half:]) if half else (rss, rss)
    trend = statistics.median(later) / statistics.median(earlier)
    if trend > RSS_RATIO:
        problems.append(f"replica slot: median peak RSS of later incarnations "
                        f"{statistics.median(later) / 2**20:.0f} MB is {trend:.2f}x the earlier "
                        f"{statistics.median(earlier) / 2**20:.0f} MB (limit {RSS_RATIO:.1f}x)")
    problems += _growth_problems("replica slot", peaks[0], peaks[-1])
    return _report("replica slot", peaks, problems)


class Soak:
    def __init__(self, duration: float, kill_every: float, interval: float = 2.0,
                 out=None, keep_dir: Path | None = None) -> None:
        self.duration = duration
        self.kill_every = kill_every
        self.interval = interval
        self.out = out or sys.stdout
        self.keep_dir = keep_dir
        self.marker = uuid.uuid4().hex
        self.ticks: list[Tick] = []
        self.seen: dict[tuple[int, int], str] = {}  # every (pid, start) ever seen -> cmdline
        self.zombie_runs: dict[tuple[int, int], int] = {}
        self.lingering: dict[tuple[int, int], str] = {}
        self.kills = 0
        self.kill_errors: list[str] = []
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _env(self, root: Path) -> dict[str, str]:
        env = dict(os.environ, GROUPSCOPE_DATA=str(root / "data"),
                   GROUPSCOPE_KAFKA_PORT=str(free_port()),
                   GROUPSCOPE_SPARK_PORT=str(free_port()),
                   GROUPSCOPE_WEB_PORT=str(free_port()), PYTHONUNBUFFERED="1")
        env[MARKER_ENV] = self.marker
        for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE"):
            env.pop(key, None)
        return env

    def sample(self, root: int, t: float) -> None:
        procs = all_processes()
        roles = classify(root, procs)
        agg: dict[str, dict[str, int]] = {}
        zombies, current = [], set()
        for (pid, start), role in roles.items():
            p = procs[pid]
            self.seen.setdefault((pid, start), p.cmdline)
            if p.zombie:
                zombies.append((pid, start, role))
                current.add((pid, start))
                continue
            a = agg.setdefault(role, {"rss": 0, "fds": 0, "threads": 0, "procs": 0})
            a["rss"] += p.rss
            a["fds"] += p.fds
            a["threads"] += p.threads
            a["procs"] += 1
        for key in list(self.zombie_runs):
            if key not in current:
                del self.zombie_runs[key]
        for pid, start, role in zombies:
            self.zombie_runs[(pid, start)] = self.zombie_runs.get((pid, start), 0) + 1
            if self.zombie_runs[(pid, start)] >= 2:
                p, parent = procs[pid], procs.get(procs[pid].ppid)
                self.lingering[(pid, start)] = (
                    f"pid {pid} {p.cmdline} ({role}, parent {p.ppid} "
                    f"{parent.cmdline[:60] if parent else '?'}) a zombie in "
                    f"{self.zombie_runs[(pid, start)]} samples, last at {t:.0f}s")
        self.ticks.append(Tick(t, agg, zombies))

    def _kill_one(self, client) -> None:
        try:
            running = sorted((r for r in client.status().replicas if r.state == "running"),
                             key=lambda r: r.started_at or 0)
            if not running:
                self.kill_errors.append("no running replica to kill")
                return
            victim = running[0]
            client.kill(victim.name)
            self.kills += 1
            new = client.start()
            self.say(f"  soak | killed {victim.name} (pid {victim.pid}), started {new.name}")
        except ControlError as exc:
            self.kill_errors.append(str(exc))
            self.say(f"  soak | control API: {exc}")

    def _orphans(self) -> list[str]:
        out = []
        for (pid, start), cmd in self.seen.items():
            p = read_proc(pid)
            if p is not None and p.start == start and not p.zombie:
                out.append(f"pid {pid}: {cmd[:100]}")
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(MARKER_ENV) != self.marker:
                    continue
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            p = _sample(proc)
            label = f"pid {proc.pid}: {p.cmdline[:100] if p else '?'}"
            if label not in out and (p is None or not p.zombie):
                out.append(label)
        return out

    def run(self) -> SoakResult:
        tmp = tempfile.mkdtemp(prefix="groupscope-soak-", dir=self.keep_dir)
        root = Path(tmp)
        env = self._env(root)
        up = spawn([sys.executable, "-m", "backend.cli", "up"], env=env,
                   cwd=Path(__file__).resolve().parents[2],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   stdin=subprocess.DEVNULL, start_new_session=True)
        ready = threading.Event()

        def relay() -> None:
            assert up.stdout is not None
            with (root / "up.log").open("wb") as log:
                for raw in up.stdout:
                    log.write(raw)
                    log.flush()
                    line = raw.decode(errors="replace").rstrip()
                    self.lines.append(line)
                    if "groupscope is up" in line:
                        ready.set()

        threading.Thread(target=relay, daemon=True).start()
        problems: list[str] = []
        up_exit: int | None = None
        try:
            up_running = abort_if_exited(
                up, "`groupscope up`", lambda: " while starting:\n" + "\n".join(self.lines[-20:]))
            try:
                wait_until(ready.is_set, 420, interval=0.5, what="`groupscope up`",
                           abort=up_running)
            except TimeoutError:
                raise RuntimeError("`groupscope up` did not come up:\n"
                                   + "\n".join(self.lines[-20:])) from None
            self.say(f"  soak | stack up; sampling every {self.interval:.0f}s for "
                     f"{self.duration:.0f}s, a kill every {self.kill_every:.0f}s "
                     f"(data in {root})")
            client = ControlClient.discover(root / "data", timeout=20)
            t0 = time.monotonic()
            next_kill = t0 + self.kill_every
            next_sample = t0
            while (now := time.monotonic()) - t0 < self.duration:
                if up.poll() is not None:
                    problems.append(f"`groupscope up` exited early with {up.returncode}")
                    break
                if now >= next_sample:
                    self.sample(up.pid, now - t0)
                    next_sample += self.interval
                if now >= next_kill:
                    self._kill_one(client)
                    next_kill += self.kill_every
                time.sleep(max(0.05, min(next_sample, next_kill) - time.monotonic()))
            self.sample(up.pid, time.monotonic() - t0)
            with contextlib.suppress(ControlError):
                client.status()
        except RuntimeError as exc:
            problems.append(str(exc))
        finally:
            up_exit = self._stop_up(up)
        orphans = self._orphans()
        self._kill_orphans()
        loadavg = os.getloadavg()
        warm_from = self.duration * WARMUP_FRACTION
        roles = [judge_role(r, self.ticks, warm_from) for r in ROLES] if self.ticks else []
        if self.ticks:
            roles.append(judge_replica_slot(self.ticks, warm_from, self.kill_every))
        for r in roles:
            problems.extend(r.problems)
        problems.extend(f"orphan {o}" for o in orphans)
        problems.extend(f"lingering zombie {z}" for z in self.lingering.values())
        if self.ticks and self.kills == 0:
            problems.append("no replica was killed")
        if up_exit not in (0, 130):
            problems.append(f"`groupscope up` exited with {up_exit} on SIGINT")
        if problems:  # the logs of a failed run are what explains it
            self.say(f"  soak | the run's data and logs are kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
        return SoakResult(self.duration, self.kill_every, self.kills, self.kill_errors,
                          len(self.ticks), roles, orphans, list(self.lingering.values()),
                          up_exit, problems, loadavg)

    def _stop_up(self, up: subprocess.Popen) -> int | None:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)  # what Ctrl-C delivers
            try:
                return up.wait(150)
            except subprocess.TimeoutExpired:
                self.say("  soak | `up` did not stop in 150s; killing its group")
                reap(up, 0.0, group=True)
                return None
        return up.returncode

    def _kill_orphans(self) -> None:
        """A failed run must not leave the stack behind on the machine."""
        for (pid, start) in self.seen:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                proc = psutil.Process(pid)
                if proc.create_time() == start:
                    proc.kill()


def format_table(result: SoakResult) -> str:
    head = (f"{'process':<13} {'RSS MB first':>12} {'last':>7} {'max':>7} {'min':>7} "
            f"{'fds first':>9} {'last':>5} {'thr first':>9} {'last':>5}  verdict")
    rows = [head, "-" * len(head)]
    for r in result.roles:
        rows.append(f"{r.role:<13} {r.rss_first_mb:>12.0f} {r.rss_last_mb:>7.0f} "
                    f"{r.rss_max_mb:>7.0f} {r.rss_min_mb:>7.0f} {r.fds_first:>9} "
                    f"{r.fds_last:>5} {r.threads_first:>9} {r.threads_last:>5}  {r.verdict}")
    rows.append("")
    rows.append(f"duration {result.duration:.0f}s, kill every {result.kill_every:.0f}s: "
                f"{result.kills} kills, {result.samples} samples; orphans: "
                f"{len(result.orphans)}; lingering zombies: {len(result.lingering_zombies)}; "
                f"load average {' '.join(f'{x:.2f}' for x in result.loadavg)}")
    rows.append("verdict: " + ("ok" if result.ok else "FAIL"))
    rows.extend(f"  - {p}" for p in result.problems)
    return "\n".join(rows)


def to_json(result: SoakResult) -> dict:
    d = asdict(result)
    d["ok"] = result.ok
    return d


def main(duration: float, kill_every: float, interval: float, json_path: Path | None) -> int:
    result = Soak(duration, kill_every, interval).run()
    print(format_table(result), flush=True)
    if json_path:
        json_path.write_text(json.dumps(to_json(result), indent=2))
    return 0 if result.ok else 1
