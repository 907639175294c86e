"""Smoke test: bench/footprint.py runs `groupscope up` once, finds every role, stops it all.

The real CLI is launched (it starts its own broker and Spark on free ports), so this test
needs no session fixture, only `stack` (which marks it and reaps what survives). Asserts that
start-up milestones were timed, that every role of the process tree was found with a
plausible RSS and CPU at rest, and that nothing of the tree survives the stop.
Not a performance test: no number is compared to a target.
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

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a whole `up`, mostly waiting on it: in the second lane (tests/lanes.py)
@pytest.mark.timeout(600)
def test_footprint_tiny(tmp_path, stack):
    out = tmp_path / "f.json"
    proc = spawn(
        [sys.executable, str(REPO / "bench" / "footprint.py"), "--repeats", "1",
         "--steady", "4", "--interval", "2", "--timeout", "300", "--no-browser",
         "--rest", "5", "--rest-after", "0",
         "--json", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=540)
    finally:
        if proc.poll() is None:  # SIGTERM lets the bench stop `groupscope up` and its tree
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=180)
    assert proc.returncode == 0, (stdout[-2000:], stderr[-2000:])
    data = json.loads(out.read_text())
    [run] = data["runs"]
    assert run["ok"], run.get("error")
    marks = run["marks_s"]
    for m in ("broker ready", "spark ready", "backend ready", "web ready", "up done",
              "first live snapshot", "first summary visible"):
        assert m in marks and math.isfinite(marks[m]) and marks[m] > 0, (m, marks)
    # the backend starts once Spark accepts connections; `up` is done once Spark answered too
    assert marks["spark serving"] <= marks["spark ready"] <= marks["up done"]
    assert marks["broker ready"] <= marks["backend ready"] <= marks["up done"]
    assert run["start_to_first_batch_s"] and run["start_to_first_batch_s"] > 0
    steps = run["start_replica_s"]
    assert 0 < steps["started"] <= steps["assigned"] <= steps["first batch"], steps
    # the first start took the supervisor's warm standby, the one right after it started cold
    assert "standby ready" in marks and run["start_from_standby"] is True, run
    # the new replica's own account of the start, from its log: becoming it, then its first batch
    account = run["replica_log"]
    assert any("becomes replica" in ln for ln in account), account
    assert any("first batch:" in ln and "(Spark " in ln for ln in account), account
    # the second start is cold, unless the first outlasted the next standby's delay (a slow
    # machine's): then the bench says it found a standby, and leaves the cold figures out
    if run["second_start_from_standby"]:
        assert "cold_start_replica_s" not in run, run
    else:
        cold = run["cold_start_replica_s"]
        assert 0 < cold["started"] <= cold["assigned"] <= cold["first batch"], cold
    roles = data["summary"]["rss_mb"]
    for role in ("broker", "spark", "backend", "web", "replica (any)"):
        assert role in roles and roles[role]["median"] > 10, (role, roles)
    assert len([r for r in roles if r.startswith("replica:")]) >= 5  # 3 + the two started
    # CPU at rest was read for every role, and the engine did work in it (replicas' batches)
    cpu = run["cpu_pct_at_rest"]
    assert set(("broker", "spark", "backend", "web")) <= set(cpu), cpu
    assert all(v >= 0 for v in cpu.values()) and cpu["spark"] > 0, cpu
    # the default fleet at rest: every role, the records the fleet produced, CPU per record
    rest = run["at_rest"]
    assert set(("broker", "spark", "backend", "web", "replica:standby")) <= set(rest["cpu_pct"])
    assert rest["records"] > 0 and rest["cpu_ms_per_record"] > 0, rest
    assert 0 <= rest["spark_jit_pct"] <= rest["cpu_pct"]["spark"], rest
    assert run["stop"]["survivors"] == [], run["stop"]
    assert run["stop"]["up_exit"] is not None


@pytest.mark.parametrize(("before", "after", "seconds"), [
    ({(1, 10): 2.0}, {(1, 10): 2.5}, 0.5),  # one thread, running on
    ({(1, 10): 2.0, (1, 11): 9.0}, {(1, 10): 2.5}, 0.5),  # the busier one ended: missed
    ({(1, 10): 2.0}, {(1, 10): 2.0, (1, 12): 0.3}, 0.3),  # one started since: all of it
    ({(1, 10): 2.0}, {(2, 10): 1.0}, 1.0),  # a new JVM reusing the tid
    ({}, {}, 0.0),
])
def test_jit_share_counts_threads_that_come_and_go_never_below_zero(before, after, seconds):
    from bench.footprint import jit_seconds_between

    assert jit_seconds_between(before, after) == pytest.approx(seconds)
