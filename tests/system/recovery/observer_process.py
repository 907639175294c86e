"""The dashboard's SharedObserver in a process of its own, printing each new snapshot as JSON.

The broker-restart test watches the observer through this process, so that if librdkafka ever
aborts the observer's process again, the test fails with that exit code instead of the abort
taking the whole test run down with it.

    python -m tests.system.recovery.observer_process BOOTSTRAP GROUP TOPIC
"""

from __future__ import annotations

import sys
import time

import orjson

from dashboard.checks import ClusterTarget
from dashboard.pollers import SharedObserver


def main(bootstrap: str, group: str, topic: str) -> None:
    shared = SharedObserver(ClusterTarget(bootstrap, None, external=False), group, topic,
                            interval_s=0.5)
    last = 0
    try:
        while True:
            snap = shared.latest()
            if snap is not None and snap.taken_ms != last:
                last = snap.taken_ms
                sys.stdout.buffer.write(orjson.dumps({
                    "taken_ms": snap.taken_ms, "error": snap.error,
                    "owners": {str(p.partition): p.owner for p in snap.partitions},
                    "members": sorted(m.client_id for m in snap.members),
                }) + b"\n")
                sys.stdout.flush()
            time.sleep(0.1)
    finally:
        shared.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
