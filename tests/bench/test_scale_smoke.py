"""Smoke test: bench/scale.py runs end to end at a tiny size (a broken bench fails CI).

50 streams / 8 partitions / 2 replicas on the session's broker and Spark, a 15 s window.
Asserts the group completed (4 partitions each with range), the window has finite positive
rates and snapshot times, and the table and JSON have what the README and charts read.
Not a performance test: no number is compared to a target.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # half a minute of a whole bench: the second lane, where there is room
@pytest.mark.timeout(300)  # includes the session broker + Spark start on a loaded machine
def test_scale_tiny(kafka, spark_remote, tmp_path):
    out = tmp_path / "scale.json"
    proc = run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "--streams", "50", "--partitions", "8",
         "--replicas", "2", "--rate", "200", "--duration", "15", "--settle", "2",
         "--no-step-down", "--join-timeout", "80", "--catch-up-timeout", "5",
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "join + Stable + all owned" in proc.stdout and "keeps up" in proc.stdout
    data = json.loads(out.read_text())
    assert 0 < data["join_s"] < 80
    assert sorted(r["partitions"] for r in data["replicas"]) == [4, 4]
    assert all(r["alive"] and r["rss_mb"] > 0 for r in data["replicas"])
    (w,) = data["windows"]
    assert w["ok"] and w["window_s"] >= 10
    for key in ("produced_rate", "committed_rate"):
        assert math.isfinite(w[key]) and w[key] > 0, w
    # 200 msg/s asked for: the simulator's pacing is within a few percent (see fleet_rate)
    assert 150 < w["produced_rate"] < 250, w
    assert 0 < w["snapshot_ms"]["median"] <= w["snapshot_ms"]["p95"] <= w["snapshot_ms"]["max"]
    assert w["snapshot_ms"]["n"] >= 10 and len(w["series"]) == w["snapshot_ms"]["n"]
    assert w["spark_batches"]["replicas_heard"] == 2
    assert w["second_half"]["produced_rate"] > 0
    assert data["overall"]["produced"] > 0
    assert data["rss_mb"]["replicas_total"] > 0
    assert data["load"]["max"] >= data["load"]["min"] >= 0
