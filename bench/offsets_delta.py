"""Every group's committed offsets read whole, and as a delta (the overview's way), side by side.

The overview reads every group's committed offsets each cycle. With `known` (the last answers
held), the reader's JVM sends {"same": true} for a group whose answer did not change and the
reader hands back the object it holds (backend/kafka/javaadmin/reader.py, `offsets`). This
bench seeds a cluster as `overview.py` does, then reads every group's offsets in the
overview's batches, alternating the two ways round after round on the same cluster: wall
seconds, this process's CPU seconds, the reader JVM's CPU seconds. A last pair of rounds has
one group in ten committed anew in between, so the delta's cost when groups do move is seen.

    .venv/bin/python bench/offsets_delta.py [--groups 65000] [--rounds 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LoadSampler, Stack, machine, spread
from bench.overview import prepare

WAYS = ("whole", "delta")


def read_all(reader, groups: list[str], known: dict | None) -> tuple[dict, dict[str, float]]:
    """Every group's offsets in the collector's batches; the answers and what they cost."""
    import psutil

    jvm = psutil.Process(reader.gateway.pid)
    jvm_cpu = sum(jvm.cpu_times()[:2])
    cpu, wall = time.process_time(), time.perf_counter()
    answers: dict = {}
    for i in range(0, len(groups), 1000):  # the overview's batch (OverviewWatcher.batch)
        answers.update(reader.offsets(groups[i:i + 1000], known=known))
    cost = {"wall_s": time.perf_counter() - wall, "python_cpu_s": time.process_time() - cpu,
            "jvm_cpu_s": sum(jvm.cpu_times()[:2]) - jvm_cpu}
    return answers, cost


def measure(settings, groups: list[str], rounds: int, moved_topic_of) -> dict:
    from backend.kafka.javaadmin.reader import KafkaReader
    from backend.observer.overview import relax_collector
    from tests.observer.seed import seed_groups

    relax_collector()  # as the watcher's process runs
    reader = KafkaReader(settings, "bench-offsets-delta", 60.0)
    try:
        held, _ = read_all(reader, groups, {})  # the first answers, with their digests
        costs: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
        for r in range(rounds):
            for way in (WAYS if r % 2 == 0 else WAYS[::-1]):
                gc.collect()
                answers, cost = read_all(reader, groups, held if way == "delta" else None)
                if way == "delta":
                    same = sum(answers[g] is held[g] for g in groups)
                    assert same == len(groups), f"{len(groups) - same} groups parsed again"
                costs[way].append(cost)
        # one group in ten commits anew: what the delta costs when groups move
        moved = groups[::10]
        seed_groups(settings, {g: {tp: 1 for tp in moved_topic_of(g)} for g in moved},
                    in_flight=64, timeout=120)
        gc.collect()
        _, moving_delta = read_all(reader, groups, held)
        gc.collect()
        _, moving_whole = read_all(reader, groups, None)
    finally:
        reader.close()
    out = {way: {k: spread([c[k] for c in costs[way]]) for k in costs[way][0]} for way in WAYS}
    out["one_in_ten_moved"] = {"delta": moving_delta, "whole": moving_whole}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=65000)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefix", default="odb", help="topic and group name prefix (default odb)")
    ap.add_argument("--bootstrap", default=None, help="use this cluster instead of a new broker")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    per_topic = max(1, args.partitions // args.topics)
    groups = [f"{args.prefix}-group-{i:05d}" for i in range(args.groups)]

    def topic_of(group: str) -> list[tuple[str, int]]:
        i = int(group.rsplit("-", 1)[1])
        return [(f"{args.prefix}-{i % args.topics:03d}", p) for p in range(per_topic)]

    with Stack(bootstrap=args.bootstrap, need_spark=False) as stack, LoadSampler() as load:
        setup = prepare(stack.settings, args.groups, args.partitions, args.topics, args.prefix)
        result = measure(stack.settings, groups, args.rounds, topic_of)
    result.update({"groups": args.groups, "partitions": setup["partitions"], "setup": setup,
                   "load_before": round(load_before, 2), "load": load.summary(),
                   "machine": machine()})
    print(f"{args.groups} groups' committed offsets over {setup['partitions']} partitions, "
          f"{args.rounds} rounds each way, alternating (load {load_before:.2f} before, "
          f"{result['load']['median']} median during): median [min-max]")
    print(f"| read of every group | {' | '.join(WAYS)} | delta / whole |")
    print("| --- | --- | --- | --- |")
    for key in ("wall_s", "python_cpu_s", "jvm_cpu_s"):
        cells = [result[w][key] for w in WAYS]
        ratio = cells[1]["median"] / cells[0]["median"] if cells[0]["median"] else float("nan")
        print(f"| {key} | " + " | ".join(f"{c['median']:.2f} [{c['min']:.2f}-{c['max']:.2f}]"
                                          for c in cells) + f" | {ratio:.2f}x |")
    moving = result["one_in_ten_moved"]
    print("one group in ten committed anew, one read each way: " + ", ".join(
        f"{w} {moving[w]['wall_s']:.2f} s wall, {moving[w]['python_cpu_s']:.2f} s Python CPU"
        for w in ("whole", "delta")))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
