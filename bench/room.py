"""A participant's laptop in a workshop room: how fast it joins, and how fast it takes over.

`groupscope up --room` runs on this host with its room address on a veth link to a network
namespace that plays the laptop (tests/system/room/netns.py; needs root and iproute2). Per
repeat, the laptop starts the join card's Python consumer (as the card renders it, with a
probe that stamps each assignment and message) and two times are taken:

  join      consumer start → its first partitions assigned (its own on_assign callback);
  takeover  the presenter kills (SIGKILL, through the control API) a replica owning
            partitions → the laptop consumer's first message from one of that replica's
            partitions. Bounded below by the classic session timeout the replicas ask for (6 s)
            when the laptop is given the partition in the rebalance that follows.

Then the killed replica is restarted and the laptop consumer leaves before the next repeat.

    .venv/bin/python bench/room.py [--reps 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.contracts.room import read_room  # noqa: E402
from backend.kafka.javaadmin.reader import KafkaReader  # noqa: E402
from backend.kafka.settings import KafkaSettings  # noqa: E402
from backend.netutil import free_port, wait_until  # noqa: E402
from backend.proc import spawn  # noqa: E402
from backend.supervisor.client import ControlClient  # noqa: E402
from bench.common import LoadSampler, machine, spread  # noqa: E402
from dashboard import room_model as rm  # noqa: E402
from tests.system.room.netns import laptop_namespace  # noqa: E402

# Stamps added to the card's consumer, unchanged otherwise: every assignment and every
# message, with wall time (one clock: the laptop is a namespace of this machine).
PROBE = """
import json as _json, time as _time


def _stamp(kind, **fields):
    print(_json.dumps({"t": _time.time(), "kind": kind, **fields}), flush=True)


class Consumer(Consumer):
    def subscribe(self, topics, **kw):
        return super().subscribe(topics, on_assign=lambda c, ps: _stamp(
            "assigned", partitions=[p.partition for p in ps]))

    def poll(self, timeout=None):
        msg = super().poll(timeout)
        if msg is not None and not msg.error():
            _stamp("message", partition=msg.partition())
        return msg
"""


def probe_script(room) -> str:
    """The join card's consumer, named `bench-laptop`, printing JSON stamps."""
    text = rm.python_consumer(room).replace(f'NAME = "{rm.NAME_PLACEHOLDER}"',
                                            'NAME = "bench-laptop"')
    anchor = "from confluent_kafka import Consumer\n"
    assert anchor in text, "the card's consumer no longer imports Consumer that way"
    return text.replace(anchor, anchor + PROBE, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    load_at_start = os.getloadavg()[0]
    results: dict[str, list[float]] = {"join_s": [], "takeover_s": []}
    with laptop_namespace() as laptop, LoadSampler() as load:
        work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gs-bench-room-{os.getpid()}"
        data = work / "data"
        kafka_port = free_port()
        env = {k: v for k, v in os.environ.items()
               if k not in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE")}
        env.update(GROUPSCOPE_DATA=str(data), GROUPSCOPE_KAFKA_PORT=str(kafka_port),
                   GROUPSCOPE_SPARK_PORT=str(free_port()), GROUPSCOPE_WEB_PORT=str(free_port()),
                   GROUPSCOPE_ROOM_KAFKA_PORT=str(free_port()), PYTHONPATH=str(ROOT))
        work.mkdir(parents=True, exist_ok=True)
        up = spawn([sys.executable, "-m", "backend.cli", "up", "--room-address",
                    laptop.host_address], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                   start_new_session=True)
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True).start()
        try:
            wait_until(lambda: any("groupscope is up" in x for x in lines) or up.poll(), 300,
                       what="groupscope up --room")
            room = read_room(data)
            assert room is not None, "".join(lines[-20:])
            client = ControlClient.discover(data)
            local = KafkaSettings(bootstrap=f"127.0.0.1:{kafka_port}")
            script = work / "join.py"
            script.write_text(probe_script(room))
            for rep in range(args.reps):
                join, takeover = one_round(laptop, script, client, local, room, work, rep)
                results["join_s"].append(join)
                results["takeover_s"].append(takeover)
                print(f"rep {rep + 1}: join {join:.2f} s, takeover {takeover:.2f} s",
                      flush=True)
        finally:
            if up.poll() is None:
                up.send_signal(signal.SIGINT)
                up.wait(60)
    report = {"machine": machine(), "load_at_start": load_at_start, "load": load.summary(),
              **{k: {"values": v, **spread(v)} for k, v in results.items()}}
    print(f"\nload average at start {load_at_start:.2f}, during {load.summary()}")
    print(f"{'what':<12} {'median s':>9} {'min':>7} {'max':>7}")
    for key in results:
        s = report[key]
        print(f"{key:<12} {s['median']:>9.2f} {s['min']:>7.2f} {s['max']:>7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def one_round(laptop, script: Path, client: ControlClient, local: KafkaSettings, room,
              work: Path, rep: int) -> tuple[float, float]:
    """One join and one takeover; the laptop consumer leaves at the end."""
    reader = KafkaReader.shared(local, "groupscope-bench")
    stamps: list[dict] = []
    started = time.time()
    consumer = laptop.spawn([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)})

    def read() -> None:
        for line in consumer.stdout:
            if line.startswith("{"):
                stamps.append(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    try:
        first = wait_until(lambda: next((s for s in stamps if s["kind"] == "assigned"
                                         and s["partitions"]), None), 120,
                           what="the laptop's first partitions")
        join = first["t"] - started

        def owners() -> dict[str, tuple[int, ...]]:
            view = reader.describe_group(room.group)
            return {m.client_id: m.partitions(room.topic) for m in view.members}

        victim, parts = wait_until(lambda: next(((n, p) for n, p in owners().items()
                                                 if p and n != "bench-laptop"), None), 60,
                                   what="a replica owning partitions")
        killed = time.time()
        client.kill(victim)
        moved = wait_until(lambda: next((s for s in stamps if s["kind"] == "message"
                                         and s["t"] > killed and s["partition"] in parts),
                                        None), 120, what="the laptop processing a moved partition")
        takeover = moved["t"] - killed
        client.restart(victim)
        wait_until(lambda: victim in owners(), 120, what=f"{victim} back in the group")
        return join, takeover
    finally:
        consumer.send_signal(signal.SIGINT)
        try:
            consumer.wait(30)
        except subprocess.TimeoutExpired:
            consumer.kill()


if __name__ == "__main__":
    sys.exit(main())
