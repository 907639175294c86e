"""A Kafka node killed under load on a three-node cluster: how long until its partitions have
new leaders, and how long the replicas stop committing on them.

Setup: an EmbeddedCluster of three KRaft nodes (topics with three copies, two in sync), Spark
(bench/common.Stack), one fresh 6-partition topic, the fleet simulator at `--rate`, two real
`groupscope replica` processes. Each repetition SIGKILLs the node leading partition 0 and
times, from the kill:

- **leaders moved**: every partition the victim led has another leader in the metadata
  (polled every 50 ms from a client of the surviving nodes);
- **gap**: the longest time any of those partitions went without its committed offset
  advancing, from the last advance before the kill to the first after it: how long the
  replicas stopped processing them (they keep their assignment; the producer and the
  replicas' fetches move to the new leader);

then starts the node again and waits until every partition's ISR holds three nodes before the
next repetition. Medians with min and max over the repetitions.

    .venv/bin/python bench/brokers.py [--reps 5] [--rate 1000] [--spark-remote URL]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadSampler, Stack, machine, replica_cmd, spawn, spread, stop, wait_for

PARTITIONS = 6


def leaders(admin, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """partition -> (leader, in-sync replicas), from a fresh metadata request."""
    md = admin.list_topics(topic, timeout=5)
    return {p: (meta.leader, tuple(sorted(meta.isrs)))
            for p, meta in md.topics[topic].partitions.items()}


def committed(consumer, topic: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=5)
    return {tp.partition: tp.offset for tp in got}


def one_kill(stack: Stack, admin, watcher, topic: str) -> dict:
    before = leaders(admin, topic)
    victim = before[0][0]
    led = sorted(p for p, (leader, _) in before.items() if leader == victim)
    last = committed(watcher, topic)
    advanced_at = dict.fromkeys(led, time.monotonic())
    t_kill = time.monotonic()
    stack.cluster.kill(victim)
    moved_s = None
    resumed: dict[int, float] = {}
    gaps: dict[int, float] = {}
    deadline = t_kill + 90
    while time.monotonic() < deadline and (moved_s is None or len(resumed) < len(led)):
        now = time.monotonic()
        if moved_s is None:
            try:
                now_leaders = leaders(admin, topic)
                if all(now_leaders[p][0] not in (victim, -1) for p in led):
                    moved_s = now - t_kill
            except Exception:  # a metadata request to the dead node: ask again
                pass
        try:
            offsets = committed(watcher, topic)
        except Exception:
            offsets = last
        for p in led:
            if offsets.get(p, -1) > last.get(p, -1):
                if p not in resumed and now > t_kill:
                    gaps[p] = now - advanced_at[p]
                    resumed[p] = now - t_kill
                advanced_at[p] = now
        last = offsets
        time.sleep(0.05)
    stack.cluster.start_node(victim)
    wait_for(lambda: all(len(isr) == 3 for _, isr in leaders(admin, topic).values()), 120, 0.5)
    return {"victim": victim, "led": led, "leaders_moved_s": round(moved_s, 2) if moved_s else None,
            "gap_s": round(max(gaps.values()), 2) if gaps else None,
            "resumed_s": round(max(resumed.values()), 2) if resumed else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--spark-remote", default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from confluent_kafka import Consumer

    from backend.fleet.simulator import FleetSimulator
    from backend.kafka.clients import quiet_admin
    from backend.kafka.topics import ensure_topics

    runs: list[dict] = []
    with Stack(spark_remote=args.spark_remote, brokers=3) as stack, LoadSampler() as load:
        stamp = int(time.time())
        topic, group = f"bench-brokers-{stamp}", f"bench-brokers-{stamp}"
        ensure_topics(stack.settings, group=group, topic=topic, partitions=PARTITIONS)
        admin = quiet_admin(stack.settings)
        watcher = Consumer(stack.settings.client_config(**{
            "group.id": group, "enable.auto.commit": False}))  # reads commits, never joins
        fleet = FleetSimulator(stack.settings, topic=topic, streams=12, rate=args.rate)
        logs = stack.work / "logs"
        logs.mkdir()
        procs = [spawn(replica_cmd(f"b{i}", group, topic, stack.settings.bootstrap,
                                   stack.spark_remote), logs / f"b{i}.log") for i in range(2)]
        try:
            fleet.start()
            if wait_for(lambda: all(o >= 0 for o in committed(watcher, topic).values()),
                        180, 0.5) is None:
                raise RuntimeError(f"the replicas did not commit on every partition (logs in "
                                   f"{logs})")
            for rep in range(args.reps):
                time.sleep(3)  # steady commits on every partition before the kill
                r = {"rep": rep, **one_kill(stack, admin, watcher, topic)}
                print(json.dumps(r), flush=True)
                runs.append(r)
            stats = fleet.stop()
        finally:
            fleet.stop()
            for p in procs:
                stop(p)
            watcher.close()

    def summary(key: str) -> dict:
        values = [r[key] for r in runs if r[key] is not None]
        return spread(values) if values else {"median": math.nan}

    table = {k: summary(k) for k in ("leaders_moved_s", "gap_s", "resumed_s")}
    print(f"\nkill -9 of a partition leader, 3 nodes, {args.rate:.0f} msg/s, 2 replicas, "
          f"{len(runs)} repetitions (median [min-max], seconds from the kill):")
    for key, label in (("leaders_moved_s", "its partitions have new leaders"),
                       ("resumed_s", "commits resume on all of them"),
                       ("gap_s", "longest gap between commits")):
        s = table[key]
        print(f"  {label:<34} {s['median']:.2f} [{s.get('min', math.nan):.2f}-"
              f"{s.get('max', math.nan):.2f}]")
    print(f"produced {stats.delivered} messages, {stats.failed} failed; load average during "
          f"the run: {load.summary()}  machine: {machine()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine(), "load": load.summary(),
                                         "args": {k: str(v) for k, v in vars(args).items()},
                                         "summary": table, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
