"""Start-up times and resident memory of the whole stack, as a user runs it: `groupscope up`.

Each repeat launches the real CLI as a subprocess on a fresh data directory (GROUPSCOPE_DATA)
and free ports, and times, from the launch:

- each Procfile process reported ready by `up` (broker, spark, backend, web) and `up` done,
  and Spark accepting connections (`spark serving`: the backend starts then);
- the first *live snapshot*: an Observer (the dashboard's own, polled every 0.5 s as the
  dashboard does) reporting the default group with every partition owned;
- the first summary visible in it (the first batch the replicas processed, as the Streams
  page would show it);
- with the browser (default): headless Chromium opens the Live page once `up` is done, and
  the time until its partition lanes all show an owner (the dashboard's own first live view);

then, once the supervisor's warm standby is ready (`standby ready`), the stack **at rest** as a
presenter's laptop idles: `--rest-after` s more (an engine past its first minute), then
`--rest` s in which it measures each role's CPU (% of one core: broker, spark, backend, web,
each replica and the standby; of Spark's, its JIT compiler threads' share) and the records the
fleet produced meanwhile, so CPU per message at rest (`at_rest`); headless Chromium's own share
beside it when the Live page is open. `--rest-only` stops there. Otherwise, once `--settle`
seconds more have passed (an engine past its first minute, as a presenter's is), POSTs "start
replica" to the supervisor's control API (discovered from `<data_dir>/control.json` + token)
and times it to the new replica's first processed batch: the first record it writes to the
summaries changelog (a replica writes there only after Spark summarised a batch, just before it
commits the batch's offsets). That start takes the standby, as a presenter's would, and runs
alone. A second start posted once it has processed its first batch, before the next standby
exists, is a cold start (`cold_start_*`), in the same run for comparison. Each start's
`replica_log` keeps the new replica's own lines (ready, assigned, first batch with its Spark
share), which say where those seconds went.

Then it samples the resident memory (VmRSS from /proc, summed over each process subtree) of
every role of `up`'s process tree — broker, spark, backend (the supervisor, without its
replicas), web (streamlit, serving that open page), each replica — every `--interval` s for
`--steady` s once the next standby is warm too, with each role's CPU over that window
(`cpu_pct_at_rest`: five caught-up replicas at the fleet's default rate), and stops the
stack: SIGTERM to `up`, then SIGKILL for anything of its tree still alive.

    .venv/bin/python bench/footprint.py [--repeats 3] [--steady 60] [--interval 5]
        [--timeout 420] [--settle 0] [--rest 60] [--rest-after 60] [--rest-only]
        [--no-browser] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, LoadSampler, committed_and_end, machine, spread

from backend.contracts.control import STANDBY_NAME, STANDBY_READY
from backend.netutil import wait_until
from backend.observer.observer import DASHBOARD_INTERVAL_S
from backend.proc import abort_if_exited, spawn
from backend.stack.soak import Soak
from tests.dashboard.browser import chromium_page, lanes

PARTITIONS = 6  # the default topic `groupscope up` creates
READY = re.compile(r"^\s*(\w+) \| ready in")
SERVING = re.compile(r"^\s*(\w+) \| accepting connections")  # what needs it starts now


@dataclass
class UpRun:
    """One `groupscope up` on its own data directory and ports.

    Process bookkeeping is the soak's (backend/stack/soak.py): its environment (free ports,
    a marker variable), its per-role sampling of `up`'s /proc tree, and its orphan search.
    """

    root: Path
    soak: Soak = field(default_factory=lambda: Soak(duration=0.0, kill_every=1.0))
    proc: subprocess.Popen | None = None
    t0: float = 0.0
    lines: list[str] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)  # milestone -> s since launch
    kafka_port: int = 0
    web_port: int = 0

    def launch(self) -> None:
        env = self.soak._env(self.root)
        self.kafka_port = int(env["GROUPSCOPE_KAFKA_PORT"])
        self.web_port = int(env["GROUPSCOPE_WEB_PORT"])
        env.pop("GROUPSCOPE_CONTROL_PORT", None)
        self.t0 = time.monotonic()
        # dies with this bench (a test's time-out SIGKILLs it), and its tree with it
        self.proc = spawn([sys.executable, "-m", "backend.cli", "up"], env=env,
                          cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          start_new_session=True)
        threading.Thread(target=self._relay, daemon=True).start()

    def _relay(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with (self.root / "up.log").open("wb") as log:
            for raw in self.proc.stdout:
                log.write(raw)
                line = raw.decode(errors="replace").rstrip()
                self.lines.append(line)
                now = time.monotonic() - self.t0
                m = READY.match(line)
                if m:
                    self.marks.setdefault(f"{m.group(1)} ready", now)
                m = SERVING.match(line)
                if m:
                    self.marks.setdefault(f"{m.group(1)} serving", now)
                if "groupscope is up" in line:
                    self.marks.setdefault("up done", now)

    def since(self) -> float:
        return time.monotonic() - self.t0

    def rss(self) -> dict[str, int]:
        """role -> RSS bytes of its subtree now (replica:NAME for each replica)."""
        assert self.proc is not None
        self.soak.sample(self.proc.pid, self.since())
        out: dict[str, int] = {}
        for role, v in self.soak.ticks[-1].roles.items():
            name = role.split("@")[0]  # replica:NAME@start -> replica:NAME
            out[name] = out.get(name, 0) + v["rss"]
        return out

    def cpu_seconds(self) -> dict[str, float]:
        """role -> CPU seconds (user + system) its live processes have used so far."""
        import psutil

        from backend.stack.soak import all_processes, classify

        assert self.proc is not None
        out: dict[str, float] = {}
        for (pid, _start), role in classify(self.proc.pid, all_processes()).items():
            with contextlib.suppress(psutil.Error):
                t = psutil.Process(pid).cpu_times()
                name = role.split("@")[0]
                out[name] = out.get(name, 0.0) + t.user + t.system
        return out

    def jit_threads(self, role: str) -> dict[tuple[int, int], float]:
        """CPU seconds each live JIT compiler thread (C1, C2) of `role`'s JVMs has used so
        far, by (pid, tid): how much of an engine's rest is still compiling Spark's code.

        By thread, not summed: HotSpot starts and ends compiler threads as its queue grows
        and shrinks, and a sum over the live ones drops whatever an ended thread had used,
        which once made a window's share negative (`jit_seconds_between`)."""
        from backend.stack.soak import all_processes, classify

        assert self.proc is not None
        out: dict[tuple[int, int], float] = {}
        tick = os.sysconf("SC_CLK_TCK")
        for (pid, _start), name in classify(self.proc.pid, all_processes()).items():
            if name.split("@")[0] != role:
                continue
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError):
                        stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
                        if re.match(r"C\d CompilerThre", stat[stat.index("(") + 1:]):
                            fields = stat[stat.rindex(")") + 2:].split()
                            out[(pid, int(task))] = (int(fields[11]) + int(fields[12])) / tick
        return out

    def stop(self) -> dict[str, Any]:
        """SIGTERM to `up` (it stops its children in order), then SIGKILL for what is left."""
        out: dict[str, Any] = {"up_exit": None, "killed": [], "survivors": []}
        if self.proc is None:
            return out
        with contextlib.suppress(Exception):
            self.rss()  # remember the latest children before they go
        t = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(150)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        out["up_exit"] = self.proc.returncode
        out["stop_s"] = round(time.monotonic() - t, 1)
        out["killed"] = self.soak._orphans()
        for label in out["killed"]:  # "pid N: cmdline", from the tree or the marker
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(label.split()[1].rstrip(":")), signal.SIGKILL)
        if out["killed"]:
            time.sleep(1.0)  # let the kernel reap what was just killed before re-checking
        out["survivors"] = self.soak._orphans()
        return out


def wait(check, timeout: float, interval: float, up: UpRun, what: str) -> None:
    """wait_until, failing at once (with `up`'s last lines) when `groupscope up` has exited."""
    assert up.proc is not None
    up_running = abort_if_exited(up.proc, "`groupscope up`",
                                 lambda: f" before {what}:\n" + "\n".join(up.lines[-15:]))
    try:
        wait_until(check, timeout, interval, what=what, abort=up_running)
    except TimeoutError:
        raise RuntimeError(f"no {what} within {timeout:.0f} s") from None


def new_replica_times(settings: Any, names: list[str], since_ms: int,
                      timeout: float) -> dict[str, dict[str, float]]:
    """Wall times (s) of new replicas' milestones, per name: its `started` event, its first
    `assigned` event with partitions (it joined the group), its first changelog record
    (`updated_ms`: stamped when Spark's result for its first batch came back)."""
    import orjson

    from backend.contracts import DEFAULT_GROUP, events_topic, summaries_topic
    from backend.observer.events import TopicTail

    tails = [TopicTail(settings, t(DEFAULT_GROUP), since_ms, "bench-footprint", DEFAULT_GROUP)
             for t in (events_topic, summaries_topic)]
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    try:
        deadline = time.monotonic() + timeout
        while (any("first batch" not in v for v in out.values())
               and time.monotonic() < deadline):
            for msg in tails[0].poll(timeout=0.1):
                e = orjson.loads(msg.value()) if msg.value() else {}
                mine = out.get(e.get("replica", ""))
                if mine is None:
                    continue
                if e.get("type") == "started":
                    mine.setdefault("started", e["ts"] / 1000.0)
                elif e.get("type") == "assigned" and e.get("partitions"):
                    mine.setdefault("assigned", e["ts"] / 1000.0)
            for msg in tails[1].poll(timeout=0.1):
                s = orjson.loads(msg.value()) if msg.value() else {}
                mine = out.get(s.get("replica", ""))
                if mine is not None:
                    mine.setdefault("first batch", s["updated_ms"] / 1000.0)
        return out
    finally:
        for tail in tails:
            tail.close()


def start_log(path: Path, up: UpRun) -> list[str]:
    """The new replica's own account of its start (ready, assigned, first batch with its
    Spark share): where the seconds to its first batch went, from its log since the start's
    banner. The first-batch line follows the changelog record that ended the timing."""
    wanted = ("becomes replica", "ready in", "assigned [", "first batch:")

    def lines() -> list[str]:
        text = path.read_text(errors="replace")
        return [ln for ln in text[text.rfind("\n---- ") + 1:].splitlines()
                if any(w in ln for w in wanted)]

    wait(lambda: any("first batch:" in ln for ln in lines()), 30, 0.2, up,
         f"the first-batch line in {path.name}")
    return lines()


def browser_cpu_seconds() -> float:
    """CPU seconds of this bench's Chromium processes (Playwright starts them under us)."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "chrom" in child.name().lower():
                t = child.cpu_times()
                total += t.user + t.system
    return total


def jit_seconds_between(before: dict[tuple[int, int], float],
                        after: dict[tuple[int, int], float]) -> float:
    """Compiler CPU used between two `jit_threads` readings: each thread alive at the end
    counts from its first reading (from zero if it started since). A thread that ended in
    between is missed, so this errs low, never below zero."""
    return sum(max(0.0, t - before.get(key, 0.0)) for key, t in after.items())


def at_rest(up: UpRun, settings: Any, group: str, topic: str, window: float,
            browser: bool) -> dict[str, Any]:
    """Each role's share of one core over `window` s, the records produced meanwhile, and
    the stack's CPU per record (the browser's apart: it is not the stack's)."""

    def produced() -> int:  # the topic's log ends, summed
        return committed_and_end(settings, group, topic, PARTITIONS)[1]

    cpu0, n0, b0, j0, t0 = (up.cpu_seconds(), produced(),
                            browser_cpu_seconds(), up.jit_threads("spark"), time.monotonic())
    time.sleep(window)
    cpu1, n1, b1, j1, dt = (up.cpu_seconds(), produced(),
                            browser_cpu_seconds(), up.jit_threads("spark"),
                            time.monotonic() - t0)
    pct = {role: round((cpu1[role] - cpu0[role]) / dt * 100, 1)
           for role in sorted(cpu1) if role in cpu0}
    used = sum(cpu1[r] - cpu0[r] for r in cpu1 if r in cpu0)
    out: dict[str, Any] = {"window_s": round(dt, 1), "records": n1 - n0,
                           "cpu_pct": pct, "stack_pct": round(used / dt * 100, 1),
                           "spark_jit_pct": round(jit_seconds_between(j0, j1) / dt * 100, 1),
                           "cpu_ms_per_record": round(used * 1000 / max(1, n1 - n0), 3),
                           "load1": round(os.getloadavg()[0], 2)}
    if browser:
        out["chromium_pct"] = round((b1 - b0) / dt * 100, 1)
    return out


def one_repeat(rep: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from backend.contracts import DEFAULT_GROUP, INPUT_TOPIC
    from backend.kafka.settings import resolve_settings
    from backend.netutil import port_open
    from backend.observer.observer import Observer
    from backend.supervisor.client import ControlClient

    up = UpRun(Path(tempfile.mkdtemp(prefix=f"rep{rep}-", dir=work)))
    result: dict[str, Any] = {"rep": rep}
    observer = None
    browser = contextlib.ExitStack()  # headless Chromium on the Live page, when asked for
    try:
        up.launch()
        wait(lambda: port_open("127.0.0.1", up.kafka_port), args.timeout, 0.2, up,
             "broker port")
        settings = resolve_settings(f"127.0.0.1:{up.kafka_port}", None)
        observer = Observer(settings, DEFAULT_GROUP, INPUT_TOPIC, interval=DASHBOARD_INTERVAL_S)

        def live() -> bool:
            snap = observer.poll_once()
            if snap.error is None and snap.partitions and all(pv.owner for pv in snap.partitions):
                up.marks.setdefault("first live snapshot", up.since())
            if observer.summaries():
                up.marks.setdefault("first summary visible", up.since())
            return "first live snapshot" in up.marks and "first summary visible" in up.marks

        wait(live, args.timeout, DASHBOARD_INTERVAL_S, up, "live snapshot with a summary")
        wait(lambda: "up done" in up.marks, args.timeout, 0.5, up, "`up` done")
        if args.browser:
            page = browser.enter_context(chromium_page())
            t_open = time.monotonic()
            page.goto(f"http://127.0.0.1:{up.web_port}")  # the Live page

            def lanes_owned() -> bool:
                shown = lanes(page)
                return len(shown) == PARTITIONS and all(
                    lane["owner"] and lane["owner"] != "unowned" for lane in shown)

            wait(lanes_owned, args.timeout, 0.5, up, "the Live page's lanes all owned")
            up.marks.setdefault("Live page lanes owned", up.since())
            result["page_open_to_lanes_s"] = round(time.monotonic() - t_open, 2)
        client = ControlClient.discover(up.root / "data", timeout=30)
        logs = up.root / "data" / "replicas"
        standby_log = logs / f"{STANDBY_NAME}.log"
        wait(lambda: standby_log.exists() and STANDBY_READY in standby_log.read_text(),
             args.timeout, 0.5, up, "the supervisor's warm standby")
        up.marks.setdefault("standby ready", up.since())
        if args.rest:  # the default fleet (three replicas and the standby), nobody clicking
            time.sleep(args.rest_after)
            result["at_rest"] = at_rest(up, settings, DEFAULT_GROUP, INPUT_TOPIC, args.rest,
                                         args.browser)
        if args.rest_only:
            result["ok"] = True
            return result
        if args.settle:  # an engine past its first minute, as a presenter's is at a click
            time.sleep(args.settle)
            result["settled_s"] = args.settle

        # The start a presenter gets (the standby has been waiting), alone, as a click on
        # Start is. Once it has processed a batch, a second start: the standby is spent and
        # the next one only starts STANDBY_DELAY_S after this post, so this one is cold, as
        # every start was without a standby (that standby's warm-up overlaps the cold
        # start's last seconds, which makes the cold figure a little worse, not better).
        for key in ("", "cold_"):
            start_ms = int(time.time() * 1000)
            t_post = time.time()
            info = client.start()
            if key == "":
                result["post_ms"] = round((time.time() - t_post) * 1000)
            times = new_replica_times(settings, [info.name], start_ms - 1000, args.timeout)
            warm = "from the warm standby" in (logs / f"{info.name}.log").read_text()
            steps = {k: round(v - t_post, 2) for k, v in times[info.name].items()}
            if key == "":
                result["new_replica"] = info.name
                result["start_from_standby"] = warm
            else:
                result["second_start_from_standby"] = warm
                if warm:  # not cold after all (on a slow machine the first start outlasted
                    continue  # the next standby's delay): the cold keys left out, not mislabelled
            result[f"{key}start_replica_s"] = steps
            result[f"{key}start_to_first_batch_s"] = steps.get("first batch")
            result[f"{key}replica_log"] = start_log(logs / f"{info.name}.log", up)
        # at rest: five replicas caught up, the fleet at its default rate, the next standby
        # warm and waiting (its warm-up would otherwise count as the engine's rest)
        wait(lambda: standby_log.read_text().count(STANDBY_READY) >= 2, args.timeout, 0.5, up,
             "the next warm standby")
        samples: dict[str, list[int]] = {}
        cpu0, t0 = up.cpu_seconds(), time.monotonic()
        t_end = t0 + args.steady
        while True:
            for role, v in up.rss().items():
                samples.setdefault(role, []).append(v)
            if time.monotonic() >= t_end:
                break
            time.sleep(min(args.interval, max(0.0, t_end - time.monotonic())))
        cpu1, dt = up.cpu_seconds(), time.monotonic() - t0
        result["rss_mb"] = {role: [round(x / 2**20, 1) for x in v] for role, v in samples.items()}
        # a role's share of one core over the window, for the processes alive at both ends
        result["cpu_pct_at_rest"] = {role: round((cpu1[role] - cpu0[role]) / dt * 100, 1)
                                     for role in sorted(cpu1) if role in cpu0}
        result["ok"] = True
    except Exception as exc:  # a failed repeat is recorded; the stack is stopped below
        result["ok"] = False
        result["error"] = str(exc)
        print(f"repeat {rep}: {exc}", file=sys.stderr, flush=True)
    finally:
        with contextlib.suppress(Exception):
            browser.close()
        if observer is not None:
            with contextlib.suppress(Exception):
                observer.stop()
        result["stop"] = up.stop()
        result["marks_s"] = {k: round(v, 2) for k, v in sorted(up.marks.items(),
                                                               key=lambda kv: kv[1])}
    return result


MILESTONES = ("broker ready", "spark serving", "spark ready", "backend ready", "web ready",
              "up done", "first live snapshot", "first summary visible", "Live page lanes owned",
              "standby ready")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r.get("ok")]
    startup = {}
    for m in MILESTONES:
        vals = [r["marks_s"][m] for r in ok if m in r["marks_s"]]
        if vals:
            startup[m] = spread(vals)
    starts = [r["start_to_first_batch_s"] for r in ok if r.get("start_to_first_batch_s")]
    colds = [r["cold_start_to_first_batch_s"] for r in ok
             if r.get("cold_start_to_first_batch_s")]
    rss: dict[str, list[float]] = {}
    for r in ok:
        for role, v in r.get("rss_mb", {}).items():
            rss.setdefault(role, []).extend(v)
    replicas = [x for role, v in rss.items() if role.startswith("replica:") for x in v]
    memory = {role: {"median": round(statistics.median(v), 1), "max": max(v), "n": len(v)}
              for role, v in sorted(rss.items())}
    if replicas:
        memory["replica (any)"] = {"median": round(statistics.median(replicas), 1),
                                   "max": max(replicas), "n": len(replicas)}
    cpu: dict[str, list[float]] = {}
    for r in ok:
        for role, v in r.get("cpu_pct_at_rest", {}).items():
            cpu.setdefault(role, []).append(v)
    pages = [r["page_open_to_lanes_s"] for r in ok if r.get("page_open_to_lanes_s")]
    replica_steps, cold_steps = {}, {}
    for step in ("started", "assigned", "first batch"):
        vals = [r["start_replica_s"][step] for r in ok if step in r.get("start_replica_s", {})]
        if vals:
            replica_steps[step] = spread(vals)
        vals = [r["cold_start_replica_s"][step] for r in ok
                if step in r.get("cold_start_replica_s", {})]
        if vals:
            cold_steps[step] = spread(vals)
    rest: dict[str, list[float]] = {}
    for r in ok:
        a = r.get("at_rest")
        if not a:
            continue
        for role, v in a["cpu_pct"].items():
            rest.setdefault(role.split(":")[0] if role.startswith("replica:") else role,
                            []).append(v)
        rest.setdefault("replicas (all)", []).append(round(sum(
            v for role, v in a["cpu_pct"].items() if role.startswith("replica:")), 1))
        for key in ("spark_jit_pct", "stack_pct", "chromium_pct", "cpu_ms_per_record",
                    "load1"):
            if key in a:
                rest.setdefault(key, []).append(a[key])
        rest.setdefault("records_per_s", []).append(round(a["records"] / a["window_s"], 1))
    return {"at_rest": {k: spread(v) for k, v in rest.items()},
            "startup_s": startup,
            "start_replica_to_first_batch_s": spread(starts) if starts else None,
            "cold_start_replica_to_first_batch_s": spread(colds) if colds else None,
            "cold_start_replica_steps_s": cold_steps,
            "starts_from_standby": sum(bool(r.get("start_from_standby")) for r in ok),
            "page_open_to_lanes_s": spread(pages) if pages else None,
            "start_replica_steps_s": replica_steps,
            "rss_mb": memory,
            "cpu_pct_at_rest": {role: spread(v) for role, v in sorted(cpu.items())}}


def print_table(data: dict[str, Any]) -> None:
    s = data["summary"]
    print(f"\n{'from launching `groupscope up` to':<34} {'median s':>9} {'min':>7} {'max':>7} "
          f"{'n':>3}")
    for m, v in s["startup_s"].items():
        print(f"{m:<34} {v['median']:>9.1f} {v['min']:>7.1f} {v['max']:>7.1f} {v['n']:>3}")
    rows = [(f"start replica (API) -> {step}", v)
            for step, v in s["start_replica_steps_s"].items()]
    rows += [(f"cold start (no standby) -> {step}", v)
             for step, v in s.get("cold_start_replica_steps_s", {}).items()]
    rows.append(("open Live page -> lanes owned", s["page_open_to_lanes_s"]))
    for label, v in rows:
        if v:
            print(f"{label:<34} {v['median']:>9.1f} {v['min']:>7.1f} {v['max']:>7.1f} "
                  f"{v['n']:>3}")
    print(f"\n{'process (subtree)':<20} {'RSS median MB':>13} {'max MB':>8} {'samples':>8}")
    for role, v in s["rss_mb"].items():
        print(f"{role:<20} {v['median']:>13.0f} {v['max']:>8.0f} {v['n']:>8}")
    if s.get("cpu_pct_at_rest"):
        print(f"\n{'at rest (% of one core)':<24} {'median':>7} {'min':>7} {'max':>7}")
        for role, v in s["cpu_pct_at_rest"].items():
            print(f"{role:<24} {v['median']:>7.1f} {v['min']:>7.1f} {v['max']:>7.1f}")
    if s.get("at_rest"):
        print(f"\n{'at rest, default fleet':<24} {'median':>7} {'min':>7} {'max':>7} {'n':>3}"
              "   (% of one core; replica: each replica or standby)")
        for key, v in s["at_rest"].items():
            print(f"{key:<24} {v['median']:>7.1f} {v['min']:>7.1f} {v['max']:>7.1f} "
                  f"{v['n']:>3}")
    print(f"\nload average during the run: {data['load']}  machine: {data['machine']}")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steady", type=float, default=60.0, help="RSS sampling window, s")
    ap.add_argument("--interval", type=float, default=5.0, help="between RSS samples, s")
    ap.add_argument("--timeout", type=float, default=420.0, help="per milestone, s")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="wait this long after the standby is ready before starting a "
                         "replica, s (0: at once, inside the engine's first minute)")
    ap.add_argument("--rest", type=float, default=60.0,
                    help="the at-rest CPU window with the default fleet, s (0: none)")
    ap.add_argument("--rest-after", type=float, default=60.0,
                    help="wait this long after the standby is ready before it, s")
    ap.add_argument("--rest-only", action="store_true",
                    help="stop after the at-rest window (no replica starts, no RSS window)")
    ap.add_argument("--no-browser", dest="browser", action="store_false",
                    help="skip headless Chromium on the Live page (then the dashboard's RSS "
                         "is Streamlit's with no session, and no page timing)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # unwind: every repeat's finally stops `up`
    runs = []
    work = Path(tempfile.mkdtemp(prefix="gs-footprint-"))
    try:
        with LoadSampler() as load:
            for rep in range(args.repeats):
                r = one_repeat(rep, args, work)
                print(json.dumps({k: v for k, v in r.items() if k != "rss_mb"}), flush=True)
                runs.append(r)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data = {"machine": machine(), "load": load.summary(),
            "args": {k: str(v) for k, v in vars(args).items()},
            "summary": summarise(runs), "runs": runs}
    print_table(data)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2))
    survivors = [s for r in runs for s in r["stop"]["survivors"]]
    if survivors:
        print(f"footprint: processes survived the stop: {survivors}", file=sys.stderr)
    failed = [r for r in runs if not r.get("ok")]
    return 1 if survivors or len(failed) == len(runs) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
