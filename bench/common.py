"""Shared helpers for the end-to-end benchmarks: the stack they start, offsets, load, stats.

Every end-to-end script starts its own broker (and Spark, when needed) unless given
--bootstrap / --spark-remote, and stops what it started, even on failure (`Stack`).
Timings on a shared 2-core machine are noisy, so the load average is sampled during a run
(`LoadSampler`) and written next to the numbers.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backend.kafka.settings import KafkaSettings  # noqa: E402


def machine() -> dict[str, Any]:
    """What the numbers came from: cores, memory, CPU model, Python."""
    import psutil

    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():  # psutil has no model
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "mem_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "cpu": model, "python": platform.python_version()}


class LoadSampler:
    """1-minute load average every 2 s while a run lasts (other work shares the machine)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(2.0)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def summary(self) -> dict[str, float]:
        s = self.samples or [os.getloadavg()[0]]
        return {"min": round(min(s), 2), "median": round(statistics.median(s), 2),
                "max": round(max(s), 2)}


def spread(values: list[float]) -> dict[str, float]:
    """Median plus min/max: with 3-5 repeats on a shared machine, the honest summary."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def variants_table(variants: dict[str, dict[str, dict[str, float]]], steps: tuple[str, ...]
                   ) -> str:
    """A markdown table, one row per step, one column per variant: median [min-max], and
    each variant's ratio to the first (the benchmarks that compare settings side by side)."""
    names = list(variants)
    base = variants[names[0]]
    lines = ["| step | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for step in steps:
        cells = []
        for name in names:
            v = variants[name][step]
            ratio = v["median"] / base[step]["median"] if base[step]["median"] else float("nan")
            cells.append(f"{v['median']:.2f} [{v['min']:.2f}-{v['max']:.2f}]"
                         + ("" if name == names[0] else f" {ratio:.2f}x"))
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_variants(title: str, runs: dict[str, list[dict[str, float]]], steps: tuple[str, ...],
                    load_before: float, load: LoadSampler, json_path: Path | None,
                    **facts: Any) -> dict[str, Any]:
    """The end of a settings benchmark: each variant's runs summed up per step (`spread`),
    the table printed under `title` with the load, and the whole written to `json_path`."""
    result: dict[str, Any] = {
        "machine": machine(), "load_before": round(load_before, 2), "load": load.summary(),
        **facts,
        "variants": {name: {step: spread([r[step] for r in rs]) for step in steps}
                     for name, rs in runs.items()},
    }
    print(f"\n{title} (median [min-max], ratio to {next(iter(runs))}); load "
          f"{load_before:.2f} before, median {result['load']['median']} during\n")
    print(variants_table(result["variants"], steps))
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2))
    return result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class Stack:
    """Broker and (optionally) Spark for a benchmark: given ones are used, others started."""

    bootstrap: str | None = None
    spark_remote: str | None = None
    need_spark: bool = True
    brokers: int = 1  # more: an EmbeddedCluster of that many KRaft nodes (`cluster`)
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gs-bench-")))
    settings: KafkaSettings | None = None
    cluster: Any = None  # the EmbeddedCluster, with brokers > 1
    _started: list[Any] = field(default_factory=list)

    def __enter__(self) -> Stack:
        from backend.broker.embedded import EmbeddedBroker
        from backend.engine.server import SparkConnectServer
        from backend.kafka.settings import resolve_settings
        from backend.netutil import free_port

        try:
            if self.bootstrap:
                self.settings = resolve_settings(self.bootstrap, None)
            elif self.brokers > 1:
                from backend.broker.nodes import EmbeddedCluster

                self.cluster = EmbeddedCluster(self.work / "cluster", brokers=self.brokers)
                self.cluster.start()
                self._started.append(self.cluster)
                self.settings = self.cluster.settings
            else:
                broker = EmbeddedBroker(self.work / "broker", port=free_port(), heap="1g")
                broker.start()
                self._started.append(broker)
                self.settings = broker.settings
            if self.need_spark and not self.spark_remote:
                spark = SparkConnectServer(self.work / "spark", port=free_port())
                spark.start()
                self._started.append(spark)
                self.spark_remote = spark.remote
        except BaseException:
            self.__exit__()
            raise
        return self

    def pids(self) -> dict[str, int]:
        """Process ids of what this stack started (`EmbeddedBroker`, `SparkConnectServer`)."""
        return {type(s).__name__: s.process.pid for s in self._started
                if getattr(s, "process", None) is not None}

    def __exit__(self, *exc: object) -> None:
        while self._started:
            self._started.pop().stop()
        shutil.rmtree(self.work, ignore_errors=True)


def committed_and_end(settings: KafkaSettings, group: str, topic: str,
                      partitions: int) -> tuple[int, int]:
    """Sum of the group's committed offsets and of the log-end offsets (read_committed)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(settings.client_config(**{"group.id": group, "enable.auto.commit": False,
                                           "isolation.level": "read_committed"}))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = sum(max(0, tp.offset) for tp in c.committed(tps, timeout=10))
        end = sum(c.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps)
        return committed, end
    finally:
        c.close()


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A child in its own session (so kill -9 hits only it), output to a log file; it dies
    with this bench however the bench ends (a test's time-out SIGKILLs it)."""
    from backend.proc import spawn as spawn_dying_with_us

    with open(log, "ab") as out:
        return spawn_dying_with_us(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    from backend.proc import terminate

    terminate(proc, timeout)


def replica_cmd(name: str, group: str, topic: str, bootstrap: str, spark_remote: str,
                exactly_once: bool = False, protocol: str = "classic",
                assignor: str | None = None, batch_max: int | None = None,
                share: bool = False) -> list[str]:
    """A replica's command line; `share`: a share group's member (no protocol options)."""
    from backend.pool.processes import replica_argv

    extra = ("--batch-max", str(batch_max)) if batch_max else ()
    if share:
        return replica_argv(name, group, topic, bootstrap, spark_remote=spark_remote,
                            extra=("--share", *extra))
    return replica_argv(name, group, topic, bootstrap, protocol=protocol, assignor=assignor,
                        exactly_once=exactly_once, spark_remote=spark_remote, extra=extra)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MiB (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in tree:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return round(total / 2**20, 1)


def cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process and all its descendants (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for proc in tree:
        try:
            times = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system
    return total


def wait_for(check, timeout: float, interval: float = 0.2) -> float | None:
    """Seconds until `check()` is truthy, or None on timeout (benchmarks record, not raise)."""
    from backend.netutil import wait_until

    t0 = time.monotonic()
    try:
        wait_until(check, timeout, interval)
    except TimeoutError:
        return None
    return time.monotonic() - t0


def add_stack_args(ap: Any) -> None:
    """The flags every end-to-end bench shares: an existing cluster / engine, and --json."""
    ap.add_argument("--bootstrap", help="use this Kafka instead of starting one")
    ap.add_argument("--spark-remote", help="use this Spark Connect URL instead of starting one")
    ap.add_argument("--json", type=Path, help="write the results here")
