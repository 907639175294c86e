"""Produce → summary visible in a snapshot, per message, at given rates (p50 / p90 / p99 / max).

Setup: broker + Spark (bench/common.Stack), one fresh topic (6 partitions), 2 real
`groupscope replica` processes, the fleet simulator at each rate in turn. What the dashboard
shows is the observer's view: `Observer.summaries()` (the Streams page), kept by the
observer's own thread (`Observer.start()`, as the dashboard's `SharedObserver` runs it), which
polls the group every DASHBOARD_INTERVAL_S and reads the summaries' tail every TAIL_EVERY_S
in between. This script runs that same thread, with a listener that notes after every one of
its polls, for each stream, the highest `last_seq` now visible. A message's latency is then

    first poll whose summary of its stream has last_seq >= its seq  -  its produce time

where the produce time is the message's own `ts` (wall ms at produce(), recorded for every
message by a thin FleetSimulator subclass). Every message produced in the measuring window is a
sample. The split comes from the changelog itself (read by a separate assign()-only consumer):

    summarised = updated_ms of the first changelog record covering the seq - produce time
                 (broker fetch + waiting for the micro-batch to close + the Spark batch)
    shown      = visible - updated_ms (changelog ack + offset commit + observer poll + tail)

If a rate is more than the replicas sustain, backlog grows through the window: the script then
reports the sustained rate and "unbounded" instead of percentiles of a queue that never drains.

    .venv/bin/python bench/latency.py [--rates 1000,10000] [--duration 60] [--warmup 10]
        [--catch-up 90] [--drain 30] [--repeats 1] [--replicas 2] [--partitions 6] [--streams 12]
        [--batch-ms 1000] [--bootstrap H:P] [--spark-remote URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    LoadSampler,
    Stack,
    add_stack_args,
    machine,
    percentile,
    replica_cmd,
    spawn,
    stop,
    wait_for,
)

from backend.fleet.simulator import FleetSimulator
from backend.observer.observer import DASHBOARD_INTERVAL_S


class StampedFleet(FleetSimulator):
    """The real simulator, also keeping every message's produce time by stream and seq."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.base: dict[str, int] = {}
        self.stamps: dict[str, list[int]] = {}

    def _message(self, key: str, seq: int, ts: int) -> bytes:
        if key not in self.base:
            self.base[key] = seq
            self.stamps[key] = []
        self.stamps[key].append(ts)  # seqs of one stream are contiguous within a run
        return super()._message(key, seq, ts)


@dataclass
class Changelog:
    """Every summaries-changelog record: per stream, (last_seq, updated_ms), in log order."""

    records: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, settings: Any, group: str) -> None:
        import orjson

        from backend.contracts import summaries_topic
        from backend.observer.events import TopicTail

        tail = TopicTail(settings, summaries_topic(group), None, "bench-latency", group)
        try:
            while not self._stop.is_set():
                for msg in tail.poll(timeout=0.1):
                    if msg.key() is None or msg.value() is None:
                        continue
                    s = orjson.loads(msg.value())
                    recs = self.records.setdefault(msg.key().decode(), [])
                    if not recs or s["last_seq"] > recs[-1][0]:
                        recs.append((int(s["last_seq"]), int(s.get("updated_ms") or 0)))
        finally:
            tail.close()

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Visibility:
    """After each observer poll: per stream, when a higher last_seq first became visible.

    `note` runs on the observer's thread (its on_poll listener); the measuring thread reads
    a copy taken under the lock (`view()`)."""

    seen: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    heartbeats: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    polls: list[float] = field(default_factory=list)  # full polls' durations, s
    summaries: Any = None  # the observer's summaries(), set once it exists
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, snap: Any, took_s: float) -> None:
        now_ms = time.time() * 1000.0
        current = self.summaries()
        with self._lock:
            if snap is not None:
                self.polls.append(took_s)
                for e in snap.events:
                    if e.type == "heartbeat":
                        self.heartbeats[(e.replica, e.ts)] = dict(e.fields)
            for key, s in current.items():
                seen = self.seen.setdefault(key, [])
                last = int(s.get("last_seq", -1))
                if not seen or last > seen[-1][0]:
                    seen.append((last, now_ms))

    def view(self) -> Visibility:
        with self._lock:
            return Visibility({k: list(v) for k, v in self.seen.items()},
                              dict(self.heartbeats), list(self.polls))


def first_covering(recs: list[tuple[int, Any]], seq: int) -> Any | None:
    """Second item of the first record whose last_seq >= seq (last_seqs increase)."""
    i = bisect.bisect_left(recs, (seq, -math.inf))
    return recs[i][1] if i < len(recs) else None


def dist(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"n": len(values), "p50": round(percentile(values, 0.5)),
            "p90": round(percentile(values, 0.9)), "p99": round(percentile(values, 0.99)),
            "max": round(max(values)), "mean": round(statistics.fmean(values))}


def analyse(fleet: StampedFleet, vis: Visibility, log: Changelog, w0: float, w1: float,
            end_ms: float) -> dict[str, Any]:
    """Latencies of every message produced in [w0, w1) (epoch ms), seen by end_ms."""
    total, summarised, after = [], [], []
    missing = 0
    for key, seq, ts in window_seqs(fleet, w0, w1):
        t_vis = first_covering(vis.seen.get(key, []), seq)
        if t_vis is None or t_vis > end_ms:
            missing += 1
            continue
        total.append(t_vis - ts)
        upd = first_covering(log.records.get(key, []), seq)
        if upd:
            summarised.append(upd - ts)
            after.append(t_vis - upd)
    produced = len(total) + missing
    window_s = (w1 - w0) / 1000.0
    return {"produced": produced, "samples": len(total), "missing": missing,
            "latency_ms": dist(total), "summarised_ms": dist(summarised),
            "shown_ms": dist(after),
            "visible_rate": round(shown_between(vis, w0, w1) / window_s, 1),
            "produced_rate": round(produced / window_s, 1)}


def shown_between(vis: Visibility, w0: float, w1: float) -> int:
    """Messages that became visible between two wall times, whenever produced: the rate the
    replicas sustain, seen from the dashboard."""
    total = 0
    for seen in vis.seen.values():
        before = [last for last, t in seen if t < w0]
        upto = [last for last, t in seen if t < w1]
        if upto:
            total += upto[-1] - (before[-1] if before else -1)
    return total


def window_seqs(fleet: StampedFleet, w0: float, w1: float):
    """(stream, seq, produce ms) of every message produced in [w0, w1)."""
    for key, stamps in list(fleet.stamps.items()):
        base = fleet.base[key]
        stamps = list(stamps)
        for i in range(bisect.bisect_left(stamps, w0), bisect.bisect_left(stamps, w1)):
            yield key, base + i, stamps[i]


def trend(fleet: StampedFleet, vis: Visibility, w0: float, w1: float,
          end_ms: float) -> dict[str, Any]:
    """Is the rate sustained? Backlog at the window's end (produced, not yet visible, in
    seconds of input), and median latency of the first and the last fifth of the window."""
    fifth = (w1 - w0) / 5
    early, late = [], []
    backlog = produced = never = 0
    for key, seq, ts in window_seqs(fleet, w0, w1):
        produced += 1
        t_vis = first_covering(vis.seen.get(key, []), seq)
        if t_vis is None or t_vis >= w1:
            backlog += 1
        if t_vis is None or t_vis > end_ms:
            never += 1
        elif ts < w0 + fifth:
            early.append(t_vis - ts)
        elif ts >= w1 - fifth:
            late.append(t_vis - ts)
    rate = produced / ((w1 - w0) / 1000.0) if w1 > w0 else 0.0
    e = statistics.median(early) if early else None
    la = statistics.median(late) if late else None
    # sustained: everything showed up within the drain, and the end of the window was not
    # waiting much longer than its start (a growing queue doubles latency within a minute)
    sustained = (never == 0 and e is not None and la is not None
                 and la <= 2 * e + 1000)
    return {"early_p50_ms": None if e is None else round(e),
            "late_p50_ms": None if la is None else round(la),
            "backlog_at_end": backlog, "backlog_s": round(backlog / rate, 1) if rate else None,
            "never_visible": never, "sustained": sustained}


def all_visible(fleet: StampedFleet, vis: Visibility, before_ms: float) -> bool:
    """Every message produced before `before_ms` is covered by a visible summary."""
    for key, stamps in list(fleet.stamps.items()):
        n = bisect.bisect_left(list(stamps), before_ms)
        if n and first_covering(vis.seen.get(key, []), fleet.base[key] + n - 1) is None:
            return False
    return True


def spark_batches(vis: Visibility, t0_ms: float, t1_ms: float) -> dict[str, Any]:
    """Spark+persist time of the replicas' batches (heartbeats' last_batch_ms) in a window."""
    ms = [f["last_batch_ms"] for (_, ts), f in vis.heartbeats.items()
          if t0_ms <= ts <= t1_ms and f.get("last_batch_ms") is not None]
    return {"batch_ms_p50": round(statistics.median(ms)) if ms else None,
            "batch_ms_max": round(max(ms)) if ms else None, "heartbeats": len(ms)}


def run_until(until: float, done: Any = None, step: float = 0.25) -> None:
    """Let the observer's thread run until a wall time, or until `done()` (checked every
    `step` s) holds."""
    while time.time() < until:
        if done is not None and done():
            return
        time.sleep(max(0.0, min(step, until - time.time())))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from backend.kafka.topics import ensure_topics
    from backend.observer.observer import Observer

    rates = [float(r) for r in args.rates.split(",")]
    results: list[dict[str, Any]] = []
    with Stack(args.bootstrap, args.spark_remote) as stack, LoadSampler() as load:
        settings = stack.settings
        stamp = int(time.time())
        topic, group = f"bench-lat-{stamp}", f"bench-lat-{stamp}"
        ensure_topics(settings, group=group, topic=topic, partitions=args.partitions)
        logs = stack.work / "logs"
        logs.mkdir(exist_ok=True)
        procs = []
        vis = Visibility()
        observer = Observer(settings, group, topic, interval=DASHBOARD_INTERVAL_S,
                            on_poll=vis.note)
        vis.summaries = observer.summaries
        log = Changelog()
        reader = threading.Thread(target=log.run, args=(settings, group), daemon=True)
        fleet = StampedFleet(settings, topic=topic, streams=args.streams, rate=0.0)
        try:
            t_spawn = time.monotonic()
            for i in range(args.replicas):
                cmd = [*replica_cmd(f"lat-r{i}", group, topic, settings.bootstrap,
                                    stack.spark_remote), "--batch-ms", str(args.batch_ms)]
                procs.append(spawn(cmd, logs / f"r{i}.log"))
            reader.start()
            observer.start()

            def ready() -> bool:
                snap = observer.latest()
                owners = {pv.owner for pv in snap.partitions if pv.owner} if snap else set()
                ok = {r for (r, _), f in vis.view().heartbeats.items() if f.get("spark_ok")}
                return len(owners) == args.replicas and len(ok) >= args.replicas
            if wait_for(ready, args.join_timeout, DASHBOARD_INTERVAL_S) is None:
                raise RuntimeError(f"{args.replicas} replicas did not join and warm up within "
                                   f"{args.join_timeout:.0f} s (logs in {logs})")
            print(f"{args.replicas} replicas own the topic after "
                  f"{time.monotonic() - t_spawn:.1f} s", flush=True)
            fleet.start()
            # the first batches of a fresh pipeline are slow (Spark plans the summary query,
            # the changelog is created): wait for one summary end to end before any window
            fleet.set_rate(rates[0])
            t_first = time.monotonic()
            if wait_for(observer.summaries, args.join_timeout, DASHBOARD_INTERVAL_S) is None:
                raise RuntimeError(f"no summary visible within {args.join_timeout:.0f} s")
            print(f"first summary visible {time.monotonic() - t_first:.1f} s after producing",
                  flush=True)
            for rep, rate in [(rep, rate) for rep in range(args.repeats) for rate in rates]:
                fleet.set_rate(rate)
                run_until(time.time() + args.warmup)
                # a backlog from start-up or a slower rate would be measured as latency:
                # go on warming up until the pipeline caught up (3 s behind at most), or
                # until --catch-up s (an unsustainable rate never catches up)
                t_catch = time.monotonic()
                run_until(time.time() + args.catch_up,
                          done=lambda: all_visible(fleet, vis.view(), time.time() * 1000 - 3000))
                caught_up_after = round(time.monotonic() - t_catch, 1)
                w0 = time.time() * 1000.0
                n_load = len(load.samples)
                run_until(w0 / 1000.0 + args.duration)
                w1 = time.time() * 1000.0
                window_load = load.samples[n_load:] or [os.getloadavg()[0]]
                run_until(time.time() + args.drain,
                          done=lambda w1=w1: all_visible(fleet, vis.view(), w1))
                end_ms = time.time() * 1000.0
                seen = vis.view()
                tr = trend(fleet, seen, w0, w1, end_ms)
                sustained = tr["sustained"]
                r = {"rate": rate, "rep": rep, "window_s": args.duration,
                     "catch_up_s": caught_up_after,
                     "load_in_window": {"min": min(window_load), "max": max(window_load),
                                        "median": statistics.median(window_load)},
                     **analyse(fleet, seen, log, w0, w1, end_ms), **tr,
                     **spark_batches(seen, w0, w1)}
                if not sustained:
                    r["latency_ms_note"] = "unbounded: backlog grows through the window"
                print(json.dumps(r), flush=True)
                results.append(r)
        finally:
            fleet.stop()
            for p in procs:
                stop(p)
            log.stop()
            reader.join(5)
            observer.stop()
        polls = sorted(vis.view().polls)
    return {"machine": machine(), "load": load.summary(), "group": group,
            "replica_pids": [p.pid for p in procs],
            "args": {k: str(v) for k, v in vars(args).items()},
            "observer_poll_ms_p50": round(percentile(polls, 0.5) * 1000) if polls else None,
            "results": results, "medians": medians(results)}


def medians(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rate, over its repeated windows: the median p50 and p99 with their min and max
    (sustained windows only: an unbounded backlog has no percentiles worth a median)."""
    out: dict[str, dict[str, Any]] = {}
    for rate in sorted({r["rate"] for r in results}):
        done = [r["latency_ms"] for r in results
                if r["rate"] == rate and r["sustained"] and r["latency_ms"]]
        if not done:
            continue
        out[str(rate)] = {"windows": len(done), **{
            q: {"median": statistics.median(d[q] for d in done),
                "min": min(d[q] for d in done), "max": max(d[q] for d in done)}
            for q in ("p50", "p99")}}
    return out


def print_table(data: dict[str, Any]) -> None:
    print(f"\n{'rate':>7} {'sust':>4} {'msg/s seen':>10} {'samples':>8} {'p50':>6} {'p90':>6} "
          f"{'p99':>6} {'max':>6}  {'summarised p50/p99':>18} {'shown p50/p99':>14} "
          f"{'spark batch':>11} {'backlog s':>9} {'load':>5}")
    for r in data["results"]:
        lat, su, sh = r["latency_ms"], r["summarised_ms"], r["shown_ms"]
        if not r["sustained"]:
            cells = f"{'unbounded (lag grows)':>27}"
        elif lat:
            cells = f"{lat['p50']:>6} {lat['p90']:>6} {lat['p99']:>6} {lat['max']:>6}"
        else:
            cells = f"{'(none)':>27}"
        sus = f"{su['p50']}/{su['p99']}" if su else "-"
        shw = f"{sh['p50']}/{sh['p99']}" if sh else "-"
        print(f"{r['rate']:>7.0f} {'yes' if r['sustained'] else 'no':>4} "
              f"{r['visible_rate']:>10.0f} {r['samples']:>8} {cells}  {sus:>18} {shw:>14} "
              f"{r['batch_ms_p50']!s:>11} {r['backlog_s']!s:>9} "
              f"{r['load_in_window']['median']:>5.1f}")
    print("latencies in ms; summarised = produce -> replica's batch summarised; shown = that "
          "-> visible in an observer snapshot")
    for rate, m in data.get("medians", {}).items():
        print(f"{float(rate):>7.0f} over {m['windows']} windows: p50 {m['p50']['median']} ms "
              f"[{m['p50']['min']}-{m['p50']['max']}], p99 {m['p99']['median']} ms "
              f"[{m['p99']['min']}-{m['p99']['max']}]")
    print(f"observer poll p50 {data['observer_poll_ms_p50']} ms; load average during the run: "
          f"{data['load']}  machine: {data['machine']}")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1000,10000")
    ap.add_argument("--duration", type=float, default=60.0, help="measuring window per rate, s")
    ap.add_argument("--warmup", type=float, default=10.0, help="at each rate before measuring")
    ap.add_argument("--catch-up", type=float, default=90.0,
                    help="after the warm-up: at most this long for the backlog to clear, s")
    ap.add_argument("--drain", type=float, default=30.0,
                    help="after a window: how long its last messages may take to show up, s")
    ap.add_argument("--repeats", type=int, default=1,
                    help="measuring windows per rate (same replicas); medians reported")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--streams", type=int, default=12)
    ap.add_argument("--batch-ms", type=int, default=1000)
    ap.add_argument("--join-timeout", type=float, default=180.0)
    add_stack_args(ap)
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop replicas, broker and Spark
    signal.signal(signal.SIGTERM, _interrupt)
    data = run(args)
    print_table(data)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
