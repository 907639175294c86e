"""Where a command's CPU goes, by kind of process and by test lane: made for `make test`.

    .venv/bin/python bench/suite_cpu.py --json bench/results/suite_cpu.json -- bash .ci/run

Runs the command and, every `--interval` s while it lasts, reads every process's CPU time
(user + system) on the machine. A process is named by what it runs (a Kafka node's JVM, the
Spark engine, Chromium, a replica, a `groupscope` subcommand, a lane's pytest, ...) and
charged to the lane whose pytest it descends from (`tests/lanes.py` starts one per marker
expression). Its CPU is the last reading taken before it exited, so a process shorter than
an interval is missed: the machine's own total (/proc/stat) less what was charged is shown as
"unattributed", with the kernel's threads (`kdamond`, ...) as their own kinds.

Why: on 2 cores the suite is CPU-bound (bench/README.md, "The test suite's time"), so its
wall time is its CPU divided by two, and only knowing whose CPU it is says what to cut.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
from common import LoadSampler, machine

# (kind, pattern on the command line): the first that matches names the process
KINDS: tuple[tuple[str, str], ...] = (
    ("kafka reader (java)", r"groupscope\.read\.AdminReader"),
    ("offsets writer (java)", r"groupscope\.write\.OffsetsWriter"),
    ("spark (java)", r"^\S*java .*org\.apache\.spark"),
    ("kafka streams app (java)", r"^\S*java .*[Ss]treams"),
    ("kafka node (java)", r"^\S*java .*kafka"),
    ("java, other", r"^\S*java "),
    ("chromium", r"chrom"),
    ("playwright driver", r"playwright|node "),
    ("pytest lane", r"-m pytest"),
    ("web (streamlit)", r"streamlit"),
    ("replica", r"\breplica\b.*--id|--standby"),
    ("bench script", r"bench/\w+\.py"),
    ("pyspark worker", r"pyspark"),
)
CLI = re.compile(r"(?:backend\.cli|groupscope) (\w+)")
LANE = re.compile(r"-m pytest .*--junitxml=\S*?(\w+)-lane\.xml")  # tests/lanes.py's report


def kind_of(cmd: str, name: str) -> str:
    if not cmd:
        return f"[{name}]"  # a kernel thread
    for kind, pattern in KINDS:
        if re.search(pattern, cmd):
            return kind
    m = CLI.search(cmd)
    if m:
        return f"groupscope {m.group(1)}"
    return "python, other" if "python" in cmd.split(" ", 1)[0] else name


class Sampler:
    """Every process's last CPU reading, its kind and its lane, while `stop` is not set."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last: dict[tuple[int, float], float] = {}
        self.named: dict[tuple[int, float], tuple[str, str]] = {}  # -> (kind, lane)
        self.seen: dict[tuple[int, float], str] = {}  # -> the command line it was named by
        self.lanes: dict[int, str] = {}  # pid of a lane's pytest -> lane
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _lane(self, proc: psutil.Process) -> str:
        try:
            for p in [proc, *proc.parents()]:
                if p.pid in self.lanes:
                    return self.lanes[p.pid]
        except psutil.Error:
            pass
        return "outside the lanes"

    def _run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)

    def sample(self) -> None:
        for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time", "cpu_times"]):
            info = proc.info
            times = info.get("cpu_times")
            if times is None:
                continue
            key = (info["pid"], info["create_time"])
            self.last[key] = times.user + times.system
            cmd = " ".join(info.get("cmdline") or [])
            if self.seen.get(key) == cmd:
                continue
            # named again when its command line changed: a shim or a fork that then exec'd
            self.seen[key] = cmd
            lane = LANE.search(cmd)
            if lane:
                self.lanes[info["pid"]] = lane.group(1)
            self.named[key] = (kind_of(cmd, info.get("name") or "?"), self._lane(proc))


def busy_s() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0)


def children_s() -> float:
    """CPU of this process's waited-for descendants: the command's tree, exactly, once it
    has exited (every process in it was reaped by its parent, orphans aside)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    sampler, load = Sampler(args.interval), LoadSampler()
    sampler.sample()
    before = dict(sampler.last)  # what processes running already had used
    busy0, t0, own0 = busy_s(), time.monotonic(), children_s()
    sampler.thread.start()
    with load:
        code = subprocess.call(command)
    sampler.stop.set()
    sampler.thread.join()
    wall, busy, own = time.monotonic() - t0, busy_s() - busy0, children_s() - own0
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, cpu in sampler.last.items():
        kind, lane = sampler.named[key]
        table[kind][lane] += cpu - before.get(key, 0.0)
    charged = sum(sum(v.values()) for v in table.values())
    lanes = sorted({lane for v in table.values() for lane in v})
    print(f"\n{' '.join(command)}: exit {code}, {wall:.0f} s, machine busy {busy:.0f} CPU-s "
          f"({busy / wall:.2f} cores), the command's own tree {own:.0f} CPU-s, "
          f"load {load.summary()}")
    print(f"| kind | {' | '.join(lanes)} | all |\n|---|{'---|' * len(lanes)}---|")
    for kind, row in sorted(table.items(), key=lambda kv: -sum(kv[1].values())):
        if sum(row.values()) >= 0.5:
            print(f"| {kind} | " + " | ".join(f"{row.get(lane, 0):.0f}" for lane in lanes)
                  + f" | {sum(row.values()):.0f} |")
    print(f"| unattributed (processes shorter than {args.interval:g} s) | "
          + " | ".join("" for _ in lanes) + f" | {busy - charged:.0f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "command": command, "exit": code, "wall_s": round(wall, 1),
            "busy_cpu_s": round(busy, 1), "command_cpu_s": round(own, 1),
            "charged_cpu_s": round(charged, 1),
            "by_kind_and_lane": {k: {lane: round(s, 1) for lane, s in v.items()}
                                 for k, v in table.items()},
            "load": load.summary(), "load_before": os.getloadavg()[0], "machine": machine(),
        }, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
