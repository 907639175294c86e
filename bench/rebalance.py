"""How long a rebalance takes, per protocol / assignor, after a crash and after a graceful stop.

Per assignor: a fresh topic (6 partitions) and group, the fleet simulator producing in-process,
three real `groupscope replica` processes, and an in-process Observer polling the group. Then,
repeatedly, the oldest replica is killed (SIGKILL) or stopped (SIGTERM) and three times are taken
from the signal:

  a  broker     a DescribeConsumerGroups (every 100 ms) shows the victim gone and every
                partition owned by a survivor (KIP-848: the survivors' *current* assignment,
                i.e. what they acknowledged, not just the coordinator's target);
  b  observer   an Observer snapshot, as published (wall clock of the publish), shows the same;
  c  processed  the first summary a new owner writes to the changelog (`summaries_topic`) for a
                stream of a partition that moved: the message was consumed, summarised by Spark
                and made durable by its new owner. Its `updated_ms` is the time taken.
                `recv` is the earlier signal, the new owner's `stream_received` event (the
                message consumed, not yet processed).

`moved` counts partitions whose owner (client id) differs before and after. A replacement is
then started and the group must be Stable with 3 members, every partition owned (KIP-848:
assignment = target) for a second before the next repetition; that join is timed apart (`join`,
process start included). The kill-9 times are bounded below by the session timeout: classic
members ask for 6 s (replica config), KIP-848 sessions are the broker's 6 s (demo settings).

`--assignors share` runs three share-group replicas (`groupscope replica --share`, KIP-932)
instead, and signals one the moment it has taken records (its log names them: "acquired 80
records (P0 100-139, ...)"). A share group does not move partitions, so the columns mean:
`a` the broker's describe without the victim; `recv` the next records a survivor summarises
(the group does not pause: its deltas topic shows them); `c` a survivor taking one of the
victim's records again (its `redelivered` event names it, delivery 2: after the 5 s lock; a
SIGTERMed replica finishes its batch first, so none come back); `moved` the records those
events count.

    .venv/bin/python bench/rebalance.py [--reps 5] [--events kill,stop]
        [--assignors range,roundrobin,cooperative-sticky,kip848-uniform,kip848-range]
        [--streams 24] [--rate 200] [--partitions 6] [--observer-interval 0.25]
        [--bootstrap H:P] [--spark-remote URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    LoadSampler,
    Stack,
    add_stack_args,
    machine,
    replica_cmd,
    spawn,
    spread,
    stop,
)

from backend.errors import one_line
from backend.kafka.groups import GroupDescription
from backend.kafka.javaadmin.reader import KafkaReader
from backend.observer.observer import Observer

# name on the command line -> (protocol, assignor)
ASSIGNORS: dict[str, tuple[str, str]] = {
    "range": ("classic", "range"),
    "roundrobin": ("classic", "roundrobin"),
    "cooperative-sticky": ("classic", "cooperative-sticky"),
    "kip848-uniform": ("consumer", "uniform"),
    "kip848-range": ("consumer", "range"),
}
SHARE = "share"  # --assignors share: a share group's replicas (run_share)
EVENTS = {"kill": signal.SIGKILL, "stop": signal.SIGTERM}
DESCRIBE_EVERY_S = 0.1
MEASURE_TIMEOUT_S = 60.0  # a, b and c must all be seen within this
READY_TIMEOUT_S = 150.0
READY_HOLD_S = 1.0


class BenchError(RuntimeError):
    """The group never reached the state a repetition needs; the assignor's run is cut short."""


def owners_of(desc: GroupDescription, topic: str) -> dict[int, str]:
    return {p: m.client_id for m in desc.members for p in m.partitions(topic)}


def reassigned(members: set[str], owners: dict[int, str | None], victim: str,
               survivors: set[str], partitions: int) -> bool:
    """The victim is gone and every partition has a surviving owner."""
    return victim not in members and all(owners.get(p) in survivors for p in range(partitions))


def settled(desc: GroupDescription, topic: str, names: set[str], partitions: int) -> bool:
    """Stable, exactly `names` as members, every partition owned, nothing left to reconcile."""
    if desc.state != "Stable" or set(desc.client_ids) != names or len(desc.members) != len(names):
        return False
    if len(owners_of(desc, topic)) != partitions:
        return False
    return all(m.target is None or set(m.target) == set(m.assignment) for m in desc.members)


class TimedObserver(Observer):
    """The dashboard's Observer, recording the wall-clock time each snapshot was published."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: deque[tuple[float, Any]] = deque(maxlen=2000)

    def _publish(self, snap):  # type: ignore[no-untyped-def]
        snap = super()._publish(snap)
        self.published.append((time.time(), snap))
        return snap


@dataclass
class Replica:
    name: str
    proc: Any
    spawned: float  # wall clock


@dataclass
class Run:
    """One assignor's group: its topic, fleet, replicas, observer and a changelog/events tail."""

    stack: Stack
    key: str
    args: argparse.Namespace
    topic: str = ""
    group: str = ""
    replicas: list[Replica] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self) -> None:
        stamp = int(time.time())
        self.protocol, self.assignor = ASSIGNORS[self.key]
        self.topic = f"bench-reb-{self.key}-{stamp}"
        self.group = f"bench-reb-{self.key}-{stamp}"
        self.reader = KafkaReader.shared(self.stack.settings, "groupscope-bench")
        self.logs = self.stack.work / "logs"
        self.logs.mkdir(exist_ok=True)

    # ---- replicas --------------------------------------------------------------------

    def spawn_replica(self) -> Replica:
        name = f"r{self.counter}"
        self.counter += 1
        cmd = replica_cmd(name, self.group, self.topic, self.stack.settings.bootstrap,
                          self.stack.spark_remote, protocol=self.protocol,
                          assignor=self.assignor)
        r = Replica(name, spawn(cmd, self.logs / f"{self.group}-{name}.log"), time.time())
        self.replicas.append(r)
        return r

    def names(self) -> set[str]:
        return {r.name for r in self.replicas}

    def describe(self) -> GroupDescription | None:
        try:
            return self.reader.describe_group(self.group)
        except Exception as exc:  # a slow coordinator is a sample lost, not a failed bench
            print(f"  describe failed: {one_line(exc)}", file=sys.stderr)
            return None

    def wait_settled(self, timeout: float = READY_TIMEOUT_S) -> GroupDescription:
        """Hold `settled` for READY_HOLD_S on consecutive polls; a replica dying is an error."""
        deadline = time.monotonic() + timeout
        since: float | None = None
        while time.monotonic() < deadline:
            dead = [r.name for r in self.replicas if r.proc.poll() is not None]
            if dead:
                raise BenchError(f"replica {dead} exited; see {self.logs}")
            d = self.describe()
            if d is not None and settled(d, self.topic, self.names(), self.args.partitions):
                since = since or time.monotonic()
                if time.monotonic() - since >= READY_HOLD_S:
                    return d
            else:
                since = None
            time.sleep(0.25)
        raise BenchError(f"{self.group}: not Stable with {sorted(self.names())} "
                         f"after {timeout:.0f} s")

    # ---- one measured rebalance ------------------------------------------------------

    def tail_from_now(self):  # type: ignore[no-untyped-def]
        """A read-only consumer on the changelog and events topics, from their current ends."""
        from confluent_kafka import TopicPartition

        from backend.contracts import events_topic, summaries_topic
        from backend.observer.reader import readonly_consumer

        c = readonly_consumer(self.stack.settings, "bench-rebalance", f"{self.group}-bench")
        tps = []
        for t in (summaries_topic(self.group), events_topic(self.group)):
            md = c.list_topics(topic=t, timeout=5).topics[t]
            for p in md.partitions:
                hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=5, cached=False)[1]
                tps.append(TopicPartition(t, p, hi))
        c.assign(tps)
        return c

    def measure(self, event: str, observer: TimedObserver) -> dict[str, Any]:
        from backend.contracts import EventType, summaries_topic

        n = self.args.partitions
        before_desc = self.describe()
        if before_desc is None:
            raise BenchError("no description before the event")
        before = owners_of(before_desc, self.topic)
        victim = self.replicas.pop(0)
        survivors = self.names()
        tail = self.tail_from_now()
        changelog = summaries_topic(self.group)
        summaries: list[tuple[int, int, str]] = []  # (updated_ms, partition, replica)
        received: list[tuple[int, int, str]] = []  # (ts, partition, replica)
        load1 = os.getloadavg()[0]
        t0 = time.time()
        os.kill(victim.proc.pid, EVENTS[event])
        a = exit_s = None
        after: dict[int, str] = {}
        next_describe = 0.0
        try:
            while time.time() - t0 < MEASURE_TIMEOUT_S:
                for m in tail.consume(1000, 0.05):
                    if m.error() is not None or m.value() is None:
                        continue
                    try:
                        v = json.loads(m.value())
                    except ValueError:
                        continue
                    if m.topic() == changelog:
                        summaries.append((int(v.get("updated_ms", 0)), m.partition(),
                                          str(v.get("replica"))))
                    elif v.get("type") == EventType.STREAM_RECEIVED:
                        received.append((int(v["ts"]), int(v.get("partition", -1)),
                                         str(v.get("replica"))))
                if exit_s is None and victim.proc.poll() is not None:
                    exit_s = time.time() - t0
                if a is None and time.monotonic() >= next_describe:
                    next_describe = time.monotonic() + DESCRIBE_EVERY_S
                    d = self.describe()
                    if d is not None:
                        own = owners_of(d, self.topic)
                        if reassigned(set(d.client_ids), own, victim.name, survivors, n):
                            a, after = time.time() - t0, own
                b = self._observer_time(observer, t0, victim.name, survivors)
                c = self._first(summaries, t0, before, after) if a is not None else None
                if a is not None and b is not None and c is not None:
                    break
        finally:
            tail.close()
            if victim.proc.poll() is None:
                victim.proc.wait(30)
            exit_s = exit_s if exit_s is not None else time.time() - t0
        b = self._observer_time(observer, t0, victim.name, survivors)
        c = self._first(summaries, t0, before, after) if a is not None else None
        recv = self._first(received, t0, before, after) if a is not None else None
        moved = sorted(p for p in range(n) if after and before.get(p) != after.get(p))
        return {"assignor": self.key, "protocol": self.protocol, "event": event,
                "victim": victim.name, "a_broker_s": _r(a), "b_observer_s": _r(b),
                "c_processed_s": _r(c), "recv_s": _r(recv), "victim_exit_s": _r(exit_s),
                "moved": len(moved) if after else None, "moved_partitions": moved,
                "before": {str(p): o for p, o in sorted(before.items())},
                "after": {str(p): o for p, o in sorted(after.items())},
                "load1": round(load1, 2)}

    def _observer_time(self, observer: TimedObserver, t0: float, victim: str,
                       survivors: set[str]) -> float | None:
        for at, snap in list(observer.published):
            if at < t0:
                continue
            owners = {pv.partition: pv.owner for pv in snap.partitions}
            members = {m.client_id for m in snap.members}
            if snap.error is None and reassigned(members, owners, victim, survivors,
                                                 self.args.partitions):
                return at - t0
        return None

    @staticmethod
    def _first(records: list[tuple[int, int, str]], t0: float, before: dict[int, str],
               after: dict[int, str]) -> float | None:
        """Earliest record by a moved partition's new owner, after the event."""
        t0_ms = t0 * 1000
        times = [ts for ts, p, who in records
                 if ts >= t0_ms and p in after and before.get(p) != after[p] and who == after[p]]
        return (min(times) - t0_ms) / 1000 if times else None

    def close(self) -> None:
        for r in self.replicas:
            stop(r.proc)
        self.replicas.clear()


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def run_assignor(stack: Stack, key: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    from backend.fleet.simulator import FleetSimulator
    from backend.kafka.topics import ensure_topics

    run = Run(stack, key, args)
    ensure_topics(stack.settings, group=run.group, topic=run.topic, partitions=args.partitions)
    fleet = FleetSimulator(stack.settings, topic=run.topic, streams=args.streams, rate=args.rate)
    observer = TimedObserver(stack.settings, run.group, topic=run.topic,
                             interval=args.observer_interval)
    rows: list[dict[str, Any]] = []
    events = args.events.split(",")
    try:
        fleet.start()
        t = time.time()
        for _ in range(3):
            run.spawn_replica()
        run.wait_settled()
        print(f"{key}: 3 replicas settled in {time.time() - t:.1f} s", flush=True)
        observer.start()
        plan = [(rep, ev) for rep in range(args.reps) for ev in events]
        for i, (rep, ev) in enumerate(plan):
            row = run.measure(ev, observer)
            row["rep"] = rep
            if i < len(plan) - 1:  # the last one needs no replacement
                r = run.spawn_replica()
                try:
                    run.wait_settled()
                    row["join_s"] = _r(time.time() - r.spawned)
                except BenchError as exc:
                    row["error"] = str(exc)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    break
            rows.append(row)
            print(json.dumps(row), flush=True)
    except BenchError as exc:
        print(f"{key}: {exc}", file=sys.stderr)
        rows.append({"assignor": key, "protocol": run.protocol, "error": str(exc)})
    finally:
        observer.stop()
        run.close()
        fleet.stop()
    return rows


def run_share(stack: Stack, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The share group's rows (module docstring): three share replicas, each repetition
    signalling the oldest while it holds records, then a replacement."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from backend.contracts import SHARE as SHARE_TYPE
    from backend.contracts import EventType, events_topic
    from backend.fleet.simulator import FleetSimulator
    from backend.kafka.share import ensure_share_group
    from backend.kafka.topics import TopicSpec, ensure
    from backend.observer.queue_tail import QueueTail

    stamp = int(time.time())
    group, topic = f"bench-rb-share-{stamp}", f"bench-rb-share-t-{stamp}"
    ensure(stack.settings, [TopicSpec(topic, args.partitions, None)])
    ensure_share_group(stack.settings, group)
    fleet = FleetSimulator(stack.settings, topic=topic, streams=args.streams, rate=args.rate)
    tail = QueueTail(stack.settings, group)
    reader = KafkaReader(stack.settings, "bench-rebalance-share")
    logs = stack.work / "logs"
    logs.mkdir(exist_ok=True)
    procs: dict[str, Any] = {}
    order: deque[str] = deque()
    rows: list[dict[str, Any]] = []

    def start_one() -> str:
        name = f"s{len(procs)}"
        procs[name] = spawn(replica_cmd(name, group, topic, stack.settings.bootstrap,
                                        stack.spark_remote, share=True),
                            logs / f"{group}-{name}.log")
        order.append(name)
        return name

    def acquired(name: str) -> int:
        return (logs / f"{group}-{name}.log").read_text(errors="replace").count("acquired")

    def members() -> set[str]:
        d = reader.describe([group], SHARE_TYPE).get(group)
        return set() if d is None or isinstance(d, str) else set(d.client_ids)

    events = Consumer(stack.settings.client_config(**{
        "group.id": f"bench-rb-events-{stamp}", "enable.auto.commit": False}))
    events.assign([TopicPartition(events_topic(group), 0, OFFSET_BEGINNING)])
    redelivered: list[dict[str, Any]] = []  # survivors' `redelivered` events, as they come

    def counts() -> dict[str, int]:
        queue = tail.read(budget_s=0.05)
        for m in events.consume(500, 0.01):
            if m.error() is None:
                ev = orjson.loads(m.value())
                if ev.get("type") == EventType.REDELIVERED:
                    redelivered.append(ev)
        done: dict[str, int] = {}
        for q in queue.values():
            for r, n in q.replicas.items():
                done[r] = done.get(r, 0) + n
        return done

    def held(name: str) -> list[tuple[int, int, int]]:
        """(partition, first, last offset) of what `name` took last, from its log."""
        lines = [x for x in (logs / f"{group}-{name}.log").read_text(errors="replace")
                 .splitlines() if "acquired" in x]
        spans = re.findall(r"P(\d+) (\d+)-(\d+)", lines[-1]) if lines else []
        return [(int(p), int(lo), int(hi)) for p, lo, hi in spans]

    def took_back(ev: dict[str, Any], spans: list[tuple[int, int, int]]) -> bool:
        """Whether a survivor's `redelivered` event overlaps what the victim held."""
        return any(p == q and lo <= hi2 and lo2 <= hi
                   for q, lo2, hi2 in ev.get("spans") or [] for p, lo, hi in spans)

    def wait_working(names: list[str]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            done = counts()
            if all(done.get(n, 0) > 0 for n in names) and set(names) <= members():
                return
            time.sleep(0.2)
        raise BenchError(f"share replicas {names} not all summarising within "
                         f"{READY_TIMEOUT_S:.0f} s")

    try:
        fleet.start()
        t = time.time()
        for _ in range(3):
            start_one()
        wait_working(list(order))
        print(f"{SHARE}: 3 replicas summarising in {time.time() - t:.1f} s", flush=True)
        plan = [(rep, ev) for rep in range(args.reps) for ev in args.events.split(",")]
        for i, (rep, ev) in enumerate(plan):
            victim = order.popleft()
            before_done = counts()
            took = acquired(victim)
            deadline = time.monotonic() + MEASURE_TIMEOUT_S
            while acquired(victim) == took and time.monotonic() < deadline:
                time.sleep(0.005)  # signalled while it holds what it just took
            procs[victim].send_signal(EVENTS[ev])
            t0 = time.time()
            spans = held(victim)
            row: dict[str, Any] = {"assignor": SHARE, "protocol": SHARE, "event": ev,
                                   "rep": rep, "victim": victim}
            survivors = set(order)
            back: list[dict[str, Any]] = []
            while time.time() - t0 < MEASURE_TIMEOUT_S:
                now = time.time() - t0
                done = counts()
                if "recv_s" not in row and any(done.get(n, 0) > before_done.get(n, 0)
                                               for n in survivors):
                    row["recv_s"] = _r(now)
                back = [e for e in redelivered if e.get("replica") in survivors
                        and e.get("ts", 0) >= t0 * 1000 and took_back(e, spans)]
                if "c_processed_s" not in row and back:
                    row["c_processed_s"] = _r(min(e["ts"] for e in back) / 1000 - t0)
                if "a_broker_s" not in row and victim not in members():
                    row["a_broker_s"] = _r(time.time() - t0)
                expected = {"recv_s", "a_broker_s"} | ({"c_processed_s"} if ev == "kill"
                                                       else set())
                if expected <= set(row) and now > 8.0:
                    break
                time.sleep(0.05)
            row["moved"] = sum(int(e.get("count", 0)) for e in back)
            stop(procs[victim])
            if i < len(plan) - 1:
                name = start_one()
                r0 = time.time()
                wait_working(list(order))
                row["join_s"] = _r(time.time() - r0)
                print(f"{SHARE}: {name} joined", flush=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    except BenchError as exc:
        print(f"{SHARE}: {exc}", file=sys.stderr)
        rows.append({"assignor": SHARE, "protocol": SHARE, "error": str(exc)})
    finally:
        for p in procs.values():
            stop(p)
        fleet.stop()
        tail.close()
        events.close()
        reader.close()
    return rows


COLUMNS = (("a_broker_s", "a broker"), ("b_observer_s", "b observer"),
           ("c_processed_s", "c processed"), ("recv_s", "recv"), ("moved", "moved"))


def table(rows: list[dict[str, Any]], keys: list[str], events: list[str]) -> list[dict]:
    out = []
    for key in keys:
        for ev in events:
            mine = [r for r in rows if r.get("assignor") == key and r.get("event") == ev]
            entry: dict[str, Any] = {"assignor": key,
                                     "protocol": ASSIGNORS.get(key, (SHARE,))[0],
                                     "event": ev, "reps": len(mine)}
            for col, _ in COLUMNS:
                vals = [r[col] for r in mine if r.get(col) is not None]
                entry[col] = spread(vals) if vals else None
                entry[f"{col}_missing"] = len(mine) - len(vals)
            out.append(entry)
    return out


def print_table(tab: list[dict]) -> None:
    def cell(s: dict | None) -> str:
        return "-" if s is None else f"{s['median']:.2f} / {s['max']:.2f}"

    head = f"{'assignor':<19} {'event':<5} {'n':>2} " + " ".join(
        f"{title + ' med/max':>20}" for _, title in COLUMNS)
    print("\n" + head)
    for e in tab:
        cells = []
        for col, _ in COLUMNS:
            c = cell(e[col])
            if e[f"{col}_missing"]:
                c += f" ({e[f'{col}_missing']} miss)"
            cells.append(f"{c:>20}")
        print(f"{e['assignor']:<19} {e['event']:<5} {e['reps']:>2} " + " ".join(cells))


def session_settings() -> dict[str, Any]:
    from backend.broker.embedded import DEMO_GROUP_SETTINGS
    from backend.replica.membership import GroupChoice

    classic = GroupChoice("classic", "range").consumer_properties()
    return {"classic_client": {k: classic[k] for k in ("session.timeout.ms",
                                                       "heartbeat.interval.ms")},
            "broker": dict(DEMO_GROUP_SETTINGS)}


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--events", default="kill,stop")
    ap.add_argument("--assignors", default=",".join(ASSIGNORS))
    ap.add_argument("--streams", type=int, default=24)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--observer-interval", type=float, default=0.25)
    add_stack_args(ap)
    args = ap.parse_args()
    keys = [k.strip() for k in args.assignors.split(",") if k.strip()]
    events = [e.strip() for e in args.events.split(",") if e.strip()]
    bad = [k for k in keys if k not in ASSIGNORS and k != SHARE] + [
        e for e in events if e not in EVENTS]
    if bad or args.reps < 1 or not keys or not events:
        print(f"rebalance: unknown or empty choice {bad}; assignors: {', '.join(ASSIGNORS)}, "
              f"{SHARE}; "
              f"events: kill, stop; --reps >= 1", file=sys.stderr)
        return 2
    args.events = ",".join(events)
    signal.signal(signal.SIGTERM, _interrupted)  # unwind: finally blocks stop what we started
    rows: list[dict[str, Any]] = []
    started = time.time()
    with Stack(args.bootstrap, args.spark_remote) as stack, LoadSampler() as load:
        for key in keys:
            try:
                rows += run_share(stack, args) if key == SHARE else run_assignor(stack, key,
                                                                                 args)
            except Exception as exc:  # one assignor's failure must not lose the others' rows
                print(f"{key}: {type(exc).__name__}: {exc}", file=sys.stderr)
                rows.append({"assignor": key, "protocol": ASSIGNORS.get(key, (SHARE,))[0],
                             "error": f"{type(exc).__name__}: {exc}"})
    tab = table(rows, keys, events)
    print_table(tab)
    sessions = session_settings()
    print(f"sessions: classic client {sessions['classic_client']}; KIP-848 broker "
          f"session {sessions['broker']['group.consumer.session.timeout.ms']} ms, heartbeat "
          f"{sessions['broker']['group.consumer.heartbeat.interval.ms']} ms")
    print(f"load average during the run: {load.summary()}  machine: {machine()}  "
          f"took {time.time() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "machine": machine(), "load": load.summary(), "sessions": sessions,
            "args": {k: str(v) for k, v in vars(args).items()}, "took_s": round(
                time.time() - started, 1), "table": tab, "runs": rows}, indent=2))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
