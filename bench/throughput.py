"""Messages per second fully processed (summarised and committed), side by side.

One prefilled topic (FleetSimulator at full speed), then, each under a fresh consumer group
on the same data: groupscope with 1, 2, 3 real `groupscope replica` processes, a raw
confluent-kafka consume loop (the client's limit: no processing, commit every second), the
same loop with a plain-Python per-stream summary, and a Quix Streams app computing the same
summary in its RocksDB state — each at-least-once and exactly-once. "Processed" means the
group's committed offsets reached the log end; the rate is measured from the first commit
to the last, so process and Spark start-up are excluded (reported apart as `first_commit_s`).
The `share` variant runs `groupscope replica --share` processes in a share group (KIP-932,
at-least-once only: `--share-replicas`, e.g. more than the partitions); a share group commits
no offset, so "processed" there means its deltas hold every produced seq, and the first
commit is the first delta.

    .venv/bin/python bench/throughput.py [--messages 200000] [--partitions 6] [--streams 12]
        [--replicas 1,2,3] [--repeats 3] [--modes alo,eos] [--variants groupscope,raw,rawsum,quix]
        [--share-replicas 1,2,8]
        [--quix-python PATH] [--bootstrap H:P] [--spark-remote URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import row_summary
from common import (
    LoadSampler,
    Stack,
    add_stack_args,
    committed_and_end,
    cpu_s,
    machine,
    replica_cmd,
    spawn,
    spread,
    stop,
)

QUIX_PYTHON = Path.home() / ".cache" / "groupscope" / "bench-quix-venv" / "bin" / "python"
def raw_loop(bootstrap: str, group: str, topic: str, eos: bool, summarise: bool) -> int:
    """Child process: consume as fast as the client allows; commit every second."""
    import signal

    import orjson
    from confluent_kafka import Consumer, Producer

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    p = None
    if eos:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"raw-{group}"})
        p.init_transactions(30)
    c.subscribe([topic])
    state: dict[bytes, dict] = {}
    last = time.monotonic()
    pending: dict[int, int] = {}

    def commit() -> None:
        from confluent_kafka import TopicPartition
        offs = [TopicPartition(topic, part, off) for part, off in pending.items()]
        if not offs:
            return
        if eos:
            p.begin_transaction()
            p.send_offsets_to_transaction(offs, c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
        else:
            c.commit(offsets=offs, asynchronous=False)
        pending.clear()

    while not stopping:
        for m in c.consume(10000, 0.2):
            if m.error():
                continue
            pending[m.partition()] = m.offset() + 1
            if summarise:
                state[m.key()] = row_summary.update(state.get(m.key()), orjson.loads(m.value()))
        if time.monotonic() - last >= 1.0:
            commit()
            last = time.monotonic()
    commit()
    c.close()
    return 0


def measure(settings, group: str, topic: str, partitions: int, procs: list,
            timeout: float) -> dict:
    """Poll the group's commits until they reach the log end; rate from first to last commit."""
    t0 = time.monotonic()
    first = None
    done = None
    while time.monotonic() - t0 < timeout:
        committed, end = committed_and_end(settings, group, topic, partitions)
        now = time.monotonic()
        if committed > 0 and first is None:
            first = (now, committed)
        if end and committed >= end:
            done = now
            break
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.25)
    if first is None or done is None:
        return {"ok": False, "elapsed_s": round(time.monotonic() - t0, 1)}
    # all of it committed at the first sighting (tiny runs): only the wall rate is known
    rate = (end - first[1]) / (done - first[0]) if done > first[0] else end / (done - t0)
    return {"ok": True, "rate": round(rate, 1), "wall_rate": round(end / (done - t0), 1),
            "first_commit_s": round(first[0] - t0, 2), "total_s": round(done - t0, 2),
            "messages": end}


def measure_share(settings, group: str, produced: dict[str, int], procs: list,
                  timeout: float) -> dict:
    """`measure` for a share group: its deltas (folded in order) until they hold every
    produced seq; the rate from the first delta to the last needed."""
    from backend.chaos.verify import judge_share
    from backend.observer.queue_tail import QueueTail

    total = sum(produced.values())
    t0 = time.monotonic()
    first = done = None
    tail = QueueTail(settings, group)
    verdict = None
    try:
        while time.monotonic() - t0 < timeout:
            verdict = judge_share(produced, tail.read(budget_s=0.25))
            now = time.monotonic()
            seen = total - verdict.lost
            if seen > 0 and first is None:
                first = (now, seen)
            if verdict.lost == 0:
                done = now
                break
            if any(p.poll() is not None for p in procs):
                break
    finally:
        tail.close()
    if first is None or done is None or verdict is None:
        return {"ok": False, "elapsed_s": round(time.monotonic() - t0, 1)}
    rate = (total - first[1]) / (done - first[0]) if done > first[0] else total / (done - t0)
    return {"ok": True, "rate": round(rate, 1), "wall_rate": round(total / (done - t0), 1),
            "first_commit_s": round(first[0] - t0, 2), "total_s": round(done - t0, 2),
            "messages": total,
            "summaries": {"streams": len(verdict.streams), "lost": verdict.lost,
                          "duplicates": verdict.duplicates, "unexpected": verdict.unexpected,
                          "redelivered": verdict.redelivered,
                          "out_of_order": verdict.out_of_order,
                          "exact": verdict.lost == 0 and verdict.unexpected == 0
                          and verdict.unexplained_duplicates == 0}}


ROLES = {"EmbeddedBroker": "broker", "SparkConnectServer": "spark"}  # Stack.pids() kinds
# the roles whose CPU a variant's messages cost: the others leave Spark idle (its background
# work is not theirs to pay)
COSTED = {"groupscope": ("consumers", "broker", "spark"),
          "share": ("consumers", "broker", "spark")}
COSTED_DEFAULT = ("consumers", "broker")


def cpu_us_per_message(variant: str, cpu_s: dict[str, float], messages: int
                       ) -> dict[str, float]:
    """CPU-microseconds per message, per role the variant uses, and their total."""
    roles = [r for r in COSTED.get(variant, COSTED_DEFAULT) if r in cpu_s]
    out = {r: round(cpu_s[r] / messages * 1e6, 1) for r in roles}
    out["total"] = round(sum(cpu_s[r] for r in roles) / messages * 1e6, 1)
    return out


def run_variant(stack: Stack, variant: str, n: int, eos: bool, topic: str, partitions: int,
                rep: int, args, produced: dict[str, int]) -> dict:
    mode = "eos" if eos else "alo"
    group = f"bench-{variant}{n}-{mode}-{rep}-{int(time.time())}"
    logs = stack.work / "logs"
    logs.mkdir(exist_ok=True)
    b = stack.settings.bootstrap
    if variant == "groupscope":
        cmds = [replica_cmd(f"r{i}", group, topic, b, stack.spark_remote, exactly_once=eos)
                for i in range(n)]
    elif variant == "share":
        cmds = [replica_cmd(f"s{i}", group, topic, b, stack.spark_remote, share=True)
                for i in range(n)]
    elif variant in ("raw", "rawsum"):
        cmds = [[sys.executable, __file__, "--_raw", b, group, topic, mode,
                 "1" if variant == "rawsum" else "0"]]
    else:
        cmds = [[str(args.quix_python), str(Path(__file__).with_name("quix_app.py")), b,
                 group, topic, "exactly-once" if eos else "at-least-once",
                 str(stack.work / f"quix-{group}")]]
    servers = {ROLES.get(kind, kind): pid for kind, pid in stack.pids().items()}
    before = {role: cpu_s(pid) for role, pid in servers.items()}
    procs = [spawn(c, logs / f"{group}-{i}.log") for i, c in enumerate(cmds)]
    try:
        r = (measure_share(stack.settings, group, produced, procs, args.timeout)
             if variant == "share" else
             measure(stack.settings, group, topic, partitions, procs, args.timeout))
        used = {"consumers": sum(cpu_s(p.pid) for p in procs),
                **{role: cpu_s(pid) - before[role] for role, pid in servers.items()}}
    finally:
        for p in procs:
            stop(p)
    if r["ok"]:
        # where the run's CPU went: on 2 cores, `cores_busy` near 2 means more consumers
        # can only take CPU from the others
        r["cpu_s"] = {role: round(v, 1) for role, v in used.items()}
        r["cores_busy"] = round(sum(used.values()) / r["total_s"], 2) if r["total_s"] else None
        r["cpu_us_per_msg"] = cpu_us_per_message(variant, used, r["messages"])
    if variant == "groupscope" and r["ok"]:
        r["summaries"] = exactness(stack, group, produced, eos)
    return {"variant": variant, "replicas": n, "mode": mode, "rep": rep, **r}


def exactness(stack: Stack, group: str, produced: dict[str, int], eos: bool) -> dict:
    """Whether the group's summaries account for every message exactly once, judged by the
    chaos harness's own judge (seqs are contiguous per stream): a faster pipeline that lost or
    double-counted a message is a broken one, not a fast one."""
    from backend.chaos.verify import judge, read_summaries

    verdict = judge(produced, read_summaries(stack.settings, group))
    return {"streams": len(verdict.streams), "lost": verdict.lost,
            "duplicates": verdict.duplicates, "unexpected": verdict.unexpected,
            "exact": verdict.lost == 0 and verdict.unexpected == 0
            and (verdict.duplicates == 0 or not eos)}


def target_ratios(table: list[dict]) -> dict[str, float]:
    """The pipeline's targets as ratios of median wall rates from this one run: groupscope x2
    against Quix Streams, x2 against x1, x3 against x2 (at-least-once), and exactly-once
    against at-least-once for x2. A ratio whose two sides did not both run is left out."""
    wall = {(r["variant"], r["replicas"], r["mode"]): r["wall_rate"]["median"]
            for r in table if r.get("ok", True) and "wall_rate" in r}
    wanted = {"x2_vs_quix": (("groupscope", 2, "alo"), ("quix", 1, "alo")),
              "x2_vs_x1": (("groupscope", 2, "alo"), ("groupscope", 1, "alo")),
              "x3_vs_x2": (("groupscope", 3, "alo"), ("groupscope", 2, "alo")),
              "eos_vs_alo_x2": (("groupscope", 2, "eos"), ("groupscope", 2, "alo"))}
    return {name: round(wall[a] / wall[b], 3) for name, (a, b) in wanted.items()
            if a in wall and b in wall and wall[b]}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_raw":
        b, g, t, mode, summ = sys.argv[2:7]
        return raw_loop(b, g, t, mode == "eos", summ == "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--streams", type=int, default=12)
    ap.add_argument("--replicas", default="1,2,3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default="alo,eos")
    ap.add_argument("--variants", default="groupscope,raw,rawsum,quix")
    ap.add_argument("--share-replicas", default="1,2,8",
                    help="replica counts of the share variant (default 1,2,8: more than the "
                         "partitions)")
    ap.add_argument("--quix-python", type=Path, default=QUIX_PYTHON)
    ap.add_argument("--timeout", type=float, default=600.0)
    add_stack_args(ap)
    args = ap.parse_args()
    variants = args.variants.split(",")
    if "quix" in variants and not args.quix_python.exists():
        print(f"throughput: no Quix Streams interpreter at {args.quix_python}; see "
              "bench/README.md (or drop quix from --variants)", file=sys.stderr)
        return 2
    from backend.fleet.simulator import FleetSimulator
    from backend.kafka.topics import ensure_topics

    results: list[dict] = []
    with Stack(args.bootstrap, args.spark_remote,
               need_spark=bool({"groupscope", "share"} & set(variants))) as stack, \
            LoadSampler() as load:
        topic = f"bench-tput-{int(time.time())}"
        ensure_topics(stack.settings, group="bench-tput", topic=topic,
                      partitions=args.partitions)
        sim = FleetSimulator(stack.settings, topic=topic, streams=args.streams, rate=math.inf,
                             limit=args.messages)
        t = time.monotonic()
        sim.start()
        sim.wait_finished(600)
        sim.stop()
        produced = dict(sim.stats().next_seq)  # stream -> messages, seqs 0..n-1
        print(f"prefilled {args.messages} messages in {time.monotonic() - t:.1f} s",
              flush=True)
        counts = {"groupscope": args.replicas, "share": args.share_replicas}
        plan = [(v, n) for v in variants
                for n in ([int(x) for x in counts[v].split(",")] if v in counts else [1])]
        for rep in range(args.repeats):  # interleaved: drift in load hits every variant
            for mode in args.modes.split(","):
                for v, n in plan:
                    if v == "share" and mode == "eos":
                        continue  # a share group acknowledges; it has no transactions
                    r = run_variant(stack, v, n, mode == "eos", topic, args.partitions, rep,
                                    args, produced)
                    print(json.dumps(r), flush=True)
                    results.append(r)
    table = []
    for mode in args.modes.split(","):
        # vs raw on the wall rate: the raw loop is done in 2-4 s, too few commit sightings
        # for a first-to-last-commit rate
        raw = [r["wall_rate"] for r in results if r["variant"] == "raw" and r["mode"] == mode
               and r["ok"]]
        raw_med = spread(raw)["median"] if raw else None
        quix = [r["wall_rate"] for r in results if r["variant"] == "quix" and r["mode"] == mode
                and r["ok"]]
        quix_med = spread(quix)["median"] if quix else None
        for v, n in plan:
            if v == "share" and mode == "eos":
                continue  # not run: see the plan above
            rates = [r["rate"] for r in results if (r["variant"], r["replicas"], r["mode"])
                     == (v, n, mode) and r["ok"]]
            walls = [r["wall_rate"] for r in results if (r["variant"], r["replicas"], r["mode"])
                     == (v, n, mode) and r["ok"]]
            starts = [r["first_commit_s"] for r in results if (r["variant"], r["replicas"],
                      r["mode"]) == (v, n, mode) and r["ok"]]
            if not rates:
                table.append({"variant": v, "replicas": n, "mode": mode, "ok": False})
                continue
            s = spread(rates)
            runs = [r for r in results if (r["variant"], r["replicas"], r["mode"])
                    == (v, n, mode) and r["ok"] and r.get("cpu_s")]
            cpu = {role: spread([r["cpu_s"][role] for r in runs])["median"]
                   for role in (runs[0]["cpu_s"] if runs else {})}
            busy = [r["cores_busy"] for r in runs if r.get("cores_busy") is not None]
            per_msg = {role: spread([r["cpu_us_per_msg"][role] for r in runs])["median"]
                       for role in (runs[0].get("cpu_us_per_msg", {}) if runs else {})}
            table.append({"variant": v, "replicas": n, "mode": mode, "rate": s,
                          "cpu_s": cpu, "cores_busy": spread(busy)["median"] if busy else None,
                          "cpu_us_per_msg": per_msg,
                          "first_commit_s": spread(starts)["median"],
                          "wall_rate": spread(walls),
                          "vs_raw": (round(spread(walls)["median"] / raw_med, 3)
                                     if raw_med else None),
                          "vs_quix": (round(spread(walls)["median"] / quix_med, 3)
                                      if quix_med else None)})
    for mode in args.modes.split(","):  # CPU per message against Quix Streams' in the same mode
        quix_us = [row["cpu_us_per_msg"]["total"] for row in table if row["variant"] == "quix"
                   and row["mode"] == mode and row.get("cpu_us_per_msg")]
        for row in table:
            if row["mode"] == mode and row.get("cpu_us_per_msg") and quix_us:
                row["cpu_vs_quix"] = round(row["cpu_us_per_msg"]["total"] / quix_us[0], 3)
    ratios = target_ratios(table)
    print(f"\n{'variant':<11} {'n':>2} {'mode':>4} {'median msg/s':>13} {'min':>9} {'max':>9} "
          f"{'wall msg/s':>10} {'vs raw':>7} {'vs quix':>7} {'1st commit s':>12}")
    for row in table:
        if not row.get("ok", True):
            print(f"{row['variant']:<11} {row['replicas']:>2} {row['mode']:>4}  (failed)")
            continue
        s = row["rate"]
        print(f"{row['variant']:<11} {row['replicas']:>2} {row['mode']:>4} {s['median']:>13.0f} "
              f"{s['min']:>9.0f} {s['max']:>9.0f} {row['wall_rate']['median']:>10.0f} "
              f"{row['vs_raw'] or 0:>7.3f} {row['vs_quix'] or 0:>7.3f} "
              f"{row['first_commit_s']:>12}")
    print("\nwhere the CPU went (median CPU-seconds over a run; cores busy = all of it / the "
          "run's wall time)")
    for row in table:
        if row.get("cpu_s"):
            parts = ", ".join(f"{role} {v:.1f}" for role, v in row["cpu_s"].items())
            print(f"{row['variant']:<11} {row['replicas']:>2} {row['mode']:>4}  {parts}; "
                  f"cores busy {row['cores_busy']}")
    print("\nCPU-microseconds per message (the roles each variant uses; vs quix: the totals' "
          "ratio)")
    for row in table:
        if row.get("cpu_us_per_msg"):
            parts = ", ".join(f"{role} {v:.1f}" for role, v in row["cpu_us_per_msg"].items())
            if "cpu_vs_quix" in row:
                parts += f"; vs quix {row['cpu_vs_quix']:.2f}"
            print(f"{row['variant']:<11} {row['replicas']:>2} {row['mode']:>4}  {parts}")
    if ratios:
        print("targets (wall rates, medians): " + ", ".join(
            f"{k} {v:.2f}" for k, v in ratios.items()))
    print(f"load average during the run: {load.summary()}  machine: {machine()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine(), "load": load.summary(),
                                         "args": {k: str(v) for k, v in vars(args).items()},
                                         "table": table, "ratios": ratios,
                                         "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
