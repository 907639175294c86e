"""How fast the supervisor's controls take effect, as the broker sees it, and API latency.

Starts an embedded broker and a real `groupscope backend` process whose replicas are the
stand-in consumer (tests/supervisor/standin_member.py: a real group member without Spark, so
the numbers are the supervisor's and the broker's, not Spark's start-up), then times:
  * scale 0 -> N: until the broker lists all N members;
  * kill one: until the broker drops it (session timeout 6 s + rebalance);
  * stop one: until the broker drops it (graceful leave);
  * scale N -> 0: until the group is empty;
  * API latency of GET /status (with a DescribeConsumerGroups inside) and of a refused POST.

    .venv/bin/python bench/supervisor_actions.py [--replicas 8] [--repeat 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.broker.embedded import EmbeddedBroker  # noqa: E402
from backend.control_files import read_control_files  # noqa: E402
from backend.kafka.javaadmin.reader import KafkaReader  # noqa: E402
from backend.netutil import free_port, wait_until  # noqa: E402
from backend.proc import spawn  # noqa: E402
from backend.supervisor.client import ControlClient  # noqa: E402

STANDIN = ROOT / "tests" / "supervisor" / "standin_member.py"


def _timed(what: str, action, condition, timeout: float = 120.0) -> float:
    t0 = time.monotonic()
    action()
    wait_until(condition, timeout, interval=0.05, what=what)
    return time.monotonic() - t0


def _latency(fn, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"p50_ms": statistics.median(samples),
            "p95_ms": samples[int(0.95 * (len(samples) - 1))], "max_ms": samples[-1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-supervisor-"))
    broker = EmbeddedBroker(work / "broker", port=free_port())
    broker.start()
    backend = None
    try:
        kafka = broker.settings
        reader = KafkaReader.shared(kafka, "groupscope-bench")
        data = work / "data"
        cmd = [sys.executable, "-m", "backend.cli", "backend", "--bootstrap", kafka.bootstrap,
               "--data-dir", str(data), "--replicas", "0", "--rate", "50",
               "--partitions", str(max(6, args.replicas)),
               "--replica-command", f"{sys.executable} {STANDIN}"]
        with open(work / "backend.log", "wb") as log:
            backend = spawn(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
        ep = wait_until(lambda: (e := read_control_files(data)).pid == backend.pid and e, 60,
                        what="backend")
        client = ControlClient(ep.url, ep.token)
        wait_until(client.health, 30, what="API")
        group = "telemetry-summariser"

        def members() -> list[str]:
            return reader.describe_group(group).client_ids

        n = args.replicas
        results: dict[str, float | dict[str, float]] = {}
        results[f"scale 0->{n}: all joined (s)"] = _timed(
            "join", lambda: client.scale(n), lambda: len(members()) == n)
        victim = client.status().running[-1].name
        results["kill: broker drops it (s)"] = _timed(
            "kill", lambda: client.kill(victim), lambda: victim not in members())
        leaver = client.status().running[0].name
        results["stop: broker drops it (s)"] = _timed(
            "stop", lambda: client.stop(leaver), lambda: leaver not in members())
        results[f"scale {n - 2}->0: group empty (s)"] = _timed(
            "empty", lambda: client.scale(0), lambda: members() == [])
        client.scale(3)
        wait_until(lambda: len(members()) == 3, 60, what="3 members")
        results["GET /status (ms)"] = _latency(client.status, args.repeat)

        def refused() -> None:
            req = urllib.request.Request(ep.url + "/scale", data=b'{"replicas": -1}',
                                         method="POST",
                                         headers={"Authorization": f"Bearer {ep.token}"})
            try:
                urllib.request.urlopen(req, timeout=10)
            except urllib.error.HTTPError as exc:
                assert exc.code == 400
        results["refused POST /scale (ms)"] = _latency(refused, args.repeat)
    finally:
        if backend is not None and backend.poll() is None:
            os.kill(backend.pid, signal.SIGTERM)
            backend.wait(60)
        broker.stop()

    width = max(len(k) for k in results)
    print(f"{'what'.ljust(width)}  value")
    for k, v in results.items():
        text = (f"{v:.2f}" if isinstance(v, float) else
                ", ".join(f"{a} {b:.1f}" for a, b in v.items()))
        print(f"{k.ljust(width)}  {text}")
    if args.json:
        args.json.write_text(json.dumps({"replicas": args.replicas, "results": results},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
