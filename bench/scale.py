"""Scale end to end: 1 000 streams / 64 partitions / 16 replicas on one broker and one Spark.

Starts (unless given) a broker and a Spark Connect engine, a topic with `--partitions`, the
fleet simulator with `--streams` cars at `--rate` msg/s in total, then `--replicas` real
`groupscope replica` processes (all sharing the one Spark engine), and an in-process
observer. It measures:

  * join: time from spawning the replicas until the group is Stable with every member in it
    and every partition owned (classic protocol, range assignor: partitions/replicas each);
  * keep-up, over a steady window of `--duration` s once the backlog made during start-up
    has drained (`--catch-up-timeout`) and a `--settle` pause: produced vs
    committed msg/s, total lag (max, and its slope: a positive slope that is a noticeable
    share of the rate means the lag grows without bound), rebalances seen in the window;
  * the observer's snapshot time for this group (median / p95 of every poll in the window);
  * per-replica partitions, RSS and CPU, plus the Spark engine's and broker's RSS.

If the replicas do not keep up, the rate is halved and the window repeated (down to
`--min-rate`), so the report says what rate 16 replicas do sustain instead of just failing.

    .venv/bin/python bench/scale.py [--streams 1000] [--partitions 64] [--replicas 16]
        [--rate 2000] [--duration 120] [--settle 10] [--catch-up-timeout 180]
        [--min-rate 250] [--no-step-down] [--bootstrap H:P] [--spark-remote URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    LoadSampler,
    Stack,
    add_stack_args,
    machine,
    percentile,
    replica_cmd,
    rss_mb,
    spawn,
    stop,
)

KEEP_UP_SHARE = 0.95  # committed rate at least this share of the produced rate
LAG_SLOPE_SHARE = 0.05  # lag may grow by at most this share of the rate (msg/s) per second


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of one process so far (for CPU share over a window)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return times.user + times.system


def own_rss_mb() -> float:
    """This process alone (observer + simulator), not the broker and Spark it started."""
    return round(psutil.Process().memory_info().rss / 2**20, 1)


def mem_available_mb() -> float:
    return round(psutil.virtual_memory().available / 2**20, 1)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


@dataclass
class Sample:
    """One observer poll during a window."""

    t: float  # seconds since the window began
    poll_ms: float
    committed: int
    end: int
    lag: int
    max_lag_s: float | None
    members: int
    state: str
    generation: int | None


@dataclass
class Window:
    rate: float
    duration: float
    samples: list[Sample] = field(default_factory=list)
    heartbeats: dict[tuple[str, int], dict] = field(default_factory=dict)  # (replica, ts)

    def batches(self) -> dict:
        """Spark batches in the window from the replicas' heartbeats: how many per replica,
        and how long one took (last_batch_ms of each distinct batch)."""
        per: dict[str, list[int]] = {}
        ms: dict[tuple[str, int], float] = {}
        for (replica, _), f in self.heartbeats.items():
            if f.get("batches") is not None:
                per.setdefault(replica, []).append(f["batches"])
                if f.get("last_batch_ms") is not None:
                    ms[(replica, f["batches"])] = f["last_batch_ms"]
        counts = [max(v) - min(v) for v in per.values()]
        return {"replicas_heard": len(per),
                "per_replica_median": statistics.median(counts) if counts else None,
                "batch_ms_median": round(statistics.median(ms.values())) if ms else None,
                "batch_ms_max": round(max(ms.values())) if ms else None}

    def summary(self) -> dict:
        s = [x for x in self.samples if x.state != "Unknown"]
        if len(s) < 2:
            return {"rate": self.rate, "ok": False, "reason": "fewer than 2 good snapshots"}
        dt = s[-1].t - s[0].t
        produced = (s[-1].end - s[0].end) / dt
        committed = (s[-1].committed - s[0].committed) / dt
        lag_slope = slope([x.t for x in s], [float(x.lag) for x in s])
        polls = [x.poll_ms for x in self.samples]
        gens = {x.generation for x in s if x.generation is not None}
        keeps_up = (committed >= KEEP_UP_SHARE * produced
                    and lag_slope <= LAG_SLOPE_SHARE * max(produced, 1.0))
        lag_s = [x.max_lag_s for x in s if x.max_lag_s is not None]
        return {
            "rate": self.rate, "ok": True, "window_s": round(dt, 1),
            "produced_rate": round(produced, 1), "committed_rate": round(committed, 1),
            "committed_share": round(committed / produced, 3) if produced else None,
            "lag_start": s[0].lag, "lag_end": s[-1].lag, "lag_max": max(x.lag for x in s),
            "lag_median": statistics.median(x.lag for x in s),
            "lag_slope_per_s": round(lag_slope, 1),
            "max_lag_seconds": round(max(lag_s), 2) if lag_s else None,
            "keeps_up": keeps_up,
            "generations_seen": len(gens), "min_members": min(x.members for x in s),
            "not_stable_polls": sum(1 for x in s if x.state != "Stable"),
            "snapshot_ms": {"median": round(statistics.median(polls), 1),
                            "p95": round(percentile(polls, 0.95), 1),
                            "max": round(max(polls), 1), "n": len(polls)},
            "second_half": half(s),
            "spark_batches": self.batches(),
            "series": [{"t": round(x.t, 2), "lag": x.lag, "committed": x.committed,
                        "end": x.end, "poll_ms": round(x.poll_ms, 1)} for x in self.samples],
        }


def overall(samples: list[Sample]) -> dict | None:
    """Committed vs produced over every window together: a replica's batch can take longer
    than one window on a loaded machine, so single windows see commits in lumps."""
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    produced, committed = last.end - first.end, last.committed - first.committed
    return {"produced": produced, "committed": committed,
            "committed_share": round(committed / produced, 3) if produced else None}


def half(s: list[Sample]) -> dict | None:
    """The window's second half alone: a window that starts on a backlog passes the whole-
    window test while draining it; this says whether the input is kept up once drained."""
    tail = [x for x in s if x.t >= s[-1].t / 2]
    if len(tail) < 2 or tail[-1].t <= tail[0].t:
        return None
    dt = tail[-1].t - tail[0].t
    produced = (tail[-1].end - tail[0].end) / dt
    return {"produced_rate": round(produced, 1),
            "committed_rate": round((tail[-1].committed - tail[0].committed) / dt, 1),
            "lag_slope_per_s": round(slope([x.t for x in tail], [float(x.lag) for x in tail]), 1)}


def owned_ok(snap, replicas: int, partitions: int) -> bool:
    owned = sum(1 for p in snap.partitions if p.owner)
    return (snap.state == "Stable" and len(snap.members) == replicas
            and owned == partitions and len(snap.partitions) == partitions)


def catch_up(observer, lag_limit: float, timeout: float, procs: list) -> float | None:
    """Seconds until the total lag is below `lag_limit` (None: not within `timeout`).

    The fleet produces while 16 replicas start (that is what a user sees), so the group
    begins with a backlog; the steady window should measure keeping up, not draining it.
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        snap = observer.poll_once()
        if snap.state == "Stable" and snap.total_lag <= lag_limit:
            return round(time.monotonic() - t0, 1)
        if any(p.poll() is not None for p in procs):
            return None
        time.sleep(1.0)
    return None


def run_window(observer, rate: float, duration: float, interval: float, procs: list) -> Window:
    w = Window(rate, duration)
    t0 = time.monotonic()
    while time.monotonic() - t0 < duration:
        t = time.perf_counter()
        snap = observer.poll_once()
        ms = (time.perf_counter() - t) * 1000
        w.samples.append(Sample(
            time.monotonic() - t0, ms,
            sum(p.committed or 0 for p in snap.partitions), sum(p.end for p in snap.partitions),
            snap.total_lag, snap.max_lag_seconds, len(snap.members), snap.state,
            snap.generation))
        for e in snap.events:
            if e.type == "heartbeat":
                w.heartbeats[(e.replica, e.ts)] = e.fields
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(max(0.0, interval - (time.perf_counter() - t)))
    return w


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--rate", type=float, default=2000.0, help="total msg/s (default 2000)")
    ap.add_argument("--duration", type=float, default=120.0, help="steady window, s")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="pause after the group is complete, before the window (s)")
    ap.add_argument("--catch-up-timeout", type=float, default=180.0,
                    help="after joining, wait up to this long for the backlog made during "
                         "start-up to drain (lag below --catch-up-lag-s seconds of input)")
    ap.add_argument("--catch-up-lag-s", type=float, default=5.0)
    ap.add_argument("--min-rate", type=float, default=250.0)
    ap.add_argument("--no-step-down", action="store_true",
                    help="measure --rate only, even if the replicas fall behind")
    ap.add_argument("--interval", type=float, default=1.0, help="observer poll interval, s")
    ap.add_argument("--join-timeout", type=float, default=600.0)
    ap.add_argument("--assignor", default="range")
    add_stack_args(ap)
    ap.add_argument("--keep-logs", type=Path, help="copy the replicas' logs here at the end")
    args = ap.parse_args()

    from backend.fleet.simulator import FleetSimulator
    from backend.kafka.topics import ensure_topics
    from backend.observer.observer import Observer

    mem_before = mem_available_mb()
    result: dict = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()},
                    "mem_available_mb_before": mem_before}
    procs: list = []
    with Stack(args.bootstrap, args.spark_remote) as stack, LoadSampler() as load:
        stamp = int(time.time())
        topic, group = f"bench-scale-{stamp}", f"bench-scale-{stamp}"
        ensure_topics(stack.settings, group=group, topic=topic, partitions=args.partitions)
        sim = FleetSimulator(stack.settings, topic=topic, streams=args.streams, rate=args.rate)
        sim.start()
        observer = Observer(stack.settings, group, topic=topic)
        logs = stack.work / "logs"
        logs.mkdir(exist_ok=True)
        try:
            t0 = time.monotonic()
            names = [f"s{i:02d}" for i in range(args.replicas)]
            procs = [spawn(replica_cmd(n, group, topic, stack.settings.bootstrap,
                                       stack.spark_remote, assignor=args.assignor),
                           logs / f"{n}.log") for n in names]
            joined = None
            snap = None
            while time.monotonic() - t0 < args.join_timeout:
                snap = observer.poll_once()
                if owned_ok(snap, args.replicas, args.partitions):
                    joined = time.monotonic() - t0
                    break
                dead = [n for n, p in zip(names, procs, strict=True) if p.poll() is not None]
                if dead:
                    break
                time.sleep(1.0)
            result["join_s"] = round(joined, 1) if joined is not None else None
            if joined is None:
                dead = [n for n, p in zip(names, procs, strict=True) if p.poll() is not None]
                result["error"] = (f"group not complete after {time.monotonic() - t0:.0f} s: "
                                   f"{len(snap.members) if snap else 0}/{args.replicas} "
                                   f"members, state {snap.state if snap else '?'}"
                                   + (f"; exited: {dead}" if dead else ""))
                print(f"scale: {result['error']} (logs in {logs})", file=sys.stderr)
            else:
                print(f"all {args.replicas} replicas joined, {args.partitions} partitions "
                      f"owned after {joined:.1f} s", flush=True)
                result["catch_up_s"] = catch_up(observer, args.rate * args.catch_up_lag_s,
                                                args.catch_up_timeout, procs)
                print(f"start-up backlog drained: {result['catch_up_s']} s after joining",
                      flush=True)
                time.sleep(args.settle)
                pids = {n: p.pid for n, p in zip(names, procs, strict=True)}
                cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
                w0 = time.monotonic()
                windows = []
                all_samples: list[Sample] = []
                rate = args.rate
                while True:
                    sim.set_rate(rate)
                    w = run_window(observer, rate, args.duration, args.interval, procs)
                    s = w.summary()
                    windows.append(s)
                    all_samples += [x for x in w.samples if x.state != "Unknown"]
                    print(f"rate {rate:.0f}: produced {s.get('produced_rate')} committed "
                          f"{s.get('committed_rate')} msg/s, lag max {s.get('lag_max')} "
                          f"slope {s.get('lag_slope_per_s')}/s, keeps up: "
                          f"{s.get('keeps_up')}", flush=True)
                    if (s.get("keeps_up") or args.no_step_down or rate / 2 < args.min_rate
                            or any(p.poll() is not None for p in procs)):
                        break
                    rate /= 2
                wall = time.monotonic() - w0
                snap = observer.poll_once()
                per = {m.client_id: len(m.partitions) for m in snap.members}
                replicas = []
                for n, pid in pids.items():
                    c1 = cpu_seconds(pid)
                    replicas.append({
                        "name": n, "partitions": per.get(n), "rss_mb": rss_mb(pid),
                        "cpu_share": (round((c1 - cpu0[n]) / wall, 3)
                                      if c1 is not None and cpu0[n] is not None else None),
                        "alive": procs[names.index(n)].poll() is None})
                result["windows"] = windows
                result["overall"] = overall(all_samples)
                result["replicas"] = replicas
                engines = stack.pids()
                result["rss_mb"] = {
                    "replicas_total": round(sum(r["rss_mb"] for r in replicas), 1),
                    "replica_median": statistics.median(r["rss_mb"] for r in replicas),
                    "replica_max": max(r["rss_mb"] for r in replicas),
                    "spark_engine": (rss_mb(engines["SparkConnectServer"])
                                     if "SparkConnectServer" in engines else None),
                    "broker": (rss_mb(engines["EmbeddedBroker"])
                               if "EmbeddedBroker" in engines else None),
                    "bench_process": own_rss_mb(),
                    "mem_available_after": mem_available_mb()}
                sustained = [w["rate"] for w in windows if w.get("keeps_up")]
                result["sustained_rate"] = max(sustained) if sustained else None
        finally:
            for p in procs:  # all at once: each finishes its batch through the one Spark
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                stop(p, timeout=60)
            sim.stop()
            observer.stop()
            if args.keep_logs:
                shutil.copytree(logs, args.keep_logs, dirs_exist_ok=True)
        result["load"] = load.summary()
        result["streams_produced"] = len(sim.stats().produced)
    print_table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result.get("join_s") is not None and result.get("windows") else 1


def print_table(r: dict) -> None:
    a = r["args"]
    print(f"\n{a['streams']} streams / {a['partitions']} partitions / {a['replicas']} replicas "
          f"(assignor {a['assignor']}); join + Stable + all owned: {r.get('join_s')} s; "
          f"start-up backlog drained after another {r.get('catch_up_s')} s")
    print(f"{'rate':>6} {'produced':>9} {'committed':>9} {'share':>6} {'lag max':>8} "
          f"{'lag end':>8} {'slope/s':>8} {'lag s':>6} {'snap p50':>8} {'p95 ms':>7} "
          f"{'gens':>4} {'keeps up':>8}")
    for w in r.get("windows", []):
        if not w.get("ok"):
            print(f"{w['rate']:>6.0f}  ({w.get('reason')})")
            continue
        print(f"{w['rate']:>6.0f} {w['produced_rate']:>9.0f} {w['committed_rate']:>9.0f} "
              f"{w['committed_share']:>6} {w['lag_max']:>8} {w['lag_end']:>8} "
              f"{w['lag_slope_per_s']:>8} {w['max_lag_seconds'] or '-':>6} "
              f"{w['snapshot_ms']['median']:>8} {w['snapshot_ms']['p95']:>7} "
              f"{w['generations_seen']:>4} {w['keeps_up']!s:>8}")
    for w in r.get("windows", []):
        if w.get("ok"):
            print(f"  @ {w['rate']:.0f}: second half {w['second_half']}; "
                  f"Spark batches {w['spark_batches']}")
    if r.get("overall"):
        print(f"all windows together: {r['overall']}")
    if r.get("replicas"):
        parts = sorted({x["partitions"] for x in r["replicas"]}, key=lambda v: (v is None, v))
        cpu = [x["cpu_share"] for x in r["replicas"] if x["cpu_share"] is not None]
        print(f"partitions per replica: {parts}; replica CPU share median "
              f"{statistics.median(cpu) if cpu else '-'} of a core; RSS {r['rss_mb']}")
    print(f"sustained rate: {r.get('sustained_rate')} msg/s; load average {r.get('load')}; "
          f"machine {r['machine']}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
