"""A real, minimal consumer-group member that takes the replica's command-line arguments.

Used as the supervisor's replica command where the test is about process control, not about
Spark: it joins the group with client.id = --id, polls until SIGTERM, then closes (leaves the
group) and exits 0. `--child-pid-dir DIR` makes it start a child process of its own (in its
process group) and write that child's pid to DIR/<id>.pid, to prove a kill takes the
replica's children.
"""

from __future__ import annotations

import argparse
import signal
import sys

from confluent_kafka import Consumer

from backend.proc import spawn


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--child-pid-dir")
    p.add_argument("--id", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--protocol", default="classic")
    p.add_argument("--assignor", default="range")
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--kafka-config")
    p.add_argument("--spark-remote")
    args = p.parse_args()

    stopping = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__("flag", True))
    child = None
    if args.child_pid_dir:
        # the group in its arguments lets test teardown find it whatever happened
        # dies with the stand-in however it ends, as everything the tests start does
        child = spawn([sys.executable, "-c", "import time; time.sleep(3600)",
                       "--group", args.group])
        with open(f"{args.child_pid_dir}/{args.id}.pid", "w") as f:
            f.write(str(child.pid))

    conf: dict[str, object] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.id,
        "group.protocol": args.protocol, "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if args.protocol == "classic":
        conf.update({"partition.assignment.strategy": args.assignor,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    else:
        conf["group.remote.assignor"] = args.assignor
    consumer = Consumer(conf)
    consumer.subscribe([args.topic])
    try:
        while not stopping["flag"]:
            consumer.poll(0.2)
    finally:
        consumer.close()
        if child is not None:
            child.terminate()
            child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
