"""Smoke test: bench/latency.py runs end to end at a tiny size and leaves nothing running.

Uses the session's broker and Spark; asserts the run produced latency samples with sane
percentiles and that no replica it started survives. Not a performance test: no number is
compared to a target (the machine is shared; a slow run may even be judged "not sustained").
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backend.proc import spawn
from backend.stack.soak import all_processes, read_proc

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # half a minute of a whole bench: the second lane, where there is room
@pytest.mark.timeout(480)
def test_latency_tiny(kafka, spark_remote, tmp_path):
    out = tmp_path / "lat.json"
    proc = spawn(
        [sys.executable, str(REPO / "bench" / "latency.py"), "--rates", "200",
         "--duration", "6", "--warmup", "2", "--catch-up", "30", "--streams", "6",
         "--join-timeout", "150",
         "--drain", "120",
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=360)
    finally:
        if proc.poll() is None:  # SIGTERM lets the bench stop its replicas, broker, Spark
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-2000:]
    data = json.loads(out.read_text())
    [r] = data["results"]
    assert r["produced"] > 500
    lat = r["latency_ms"]
    assert lat is not None and r["samples"] > 0 and lat["n"] == r["samples"]
    assert all(math.isfinite(lat[k]) and lat[k] > 0 for k in ("p50", "p90", "p99", "max"))
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert r["summarised_ms"]["p50"] > 0  # the split was measured too
    assert any(line.split()[:1] == ["200"] for line in stdout.splitlines())  # table row
    for pid in data["replica_pids"]:
        p = read_proc(pid)
        assert p is None or p.zombie, f"replica {pid} survived"
    left = [p.cmdline for p in all_processes().values() if data["group"] in p.cmdline]
    assert not left, f"bench processes survived: {left}"
