"""Smoke test: bench/rebalance.py measures one kill -9 rebalance end to end (a broken bench fails).

One assignor (classic range), one repetition, kill only, on the session's broker and Spark.
Asserts the numbers are sane, not fast: every time is finite and positive, neither the broker
nor the observer shows the new assignment before the member's session could expire, and at
least one partition moved. The bench and the observer poll the broker on their own clocks, so
which of the two sees the change first is not asserted: that order is a race, not behaviour.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from backend.proc import run as run_process

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # half a minute of a whole bench: the second lane, where there is room
@pytest.mark.timeout(480)  # includes starting the session's broker and Spark
def test_rebalance_one_kill(kafka, spark_remote, tmp_path):
    out = tmp_path / "r.json"
    proc = run_process(
        [sys.executable, str(REPO / "bench" / "rebalance.py"), "--reps", "1",
         "--assignors", "range", "--events", "kill", "--streams", "12",
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    runs = data["runs"]
    assert len(runs) == 1 and "error" not in runs[0], runs
    run = runs[0]
    assert (run["assignor"], run["event"]) == ("range", "kill")
    times = [run[k] for k in ("a_broker_s", "b_observer_s", "c_processed_s", "recv_s")]
    assert all(t is not None and math.isfinite(t) and t > 0 for t in times), run
    # a crash is noticed only when the member's session (6 s) expires, by the broker and so
    # by the observer reading it
    session_s = data["sessions"]["classic_client"]["session.timeout.ms"] / 1000
    assert min(run["a_broker_s"], run["b_observer_s"]) >= session_s * 0.8, run
    assert run["moved"] >= 1 and set(run["after"].values()) <= {"r1", "r2"}, run
    [row] = [r for r in data["table"] if r["event"] == "kill"]
    assert row["reps"] == 1 and row["a_broker_s"]["median"] == run["a_broker_s"]


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_rebalance_one_share_replica_kill(kafka, spark_remote, tmp_path):
    """The share group's row: the survivors go on at once, the killed replica's records come
    back to them after the lock time (the broker's 5 s demo setting), never before it."""
    from backend.broker.embedded import DEMO_GROUP_SETTINGS

    out = tmp_path / "s.json"
    proc = run_process(
        [sys.executable, str(REPO / "bench" / "rebalance.py"), "--reps", "1",
         "--assignors", "share", "--events", "kill", "--streams", "12",
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [run] = json.loads(out.read_text())["runs"]
    assert "error" not in run and (run["assignor"], run["event"]) == ("share", "kill"), run
    lock_s = int(DEMO_GROUP_SETTINGS["group.share.record.lock.duration.ms"]) / 1000
    assert run["moved"] >= 1, run  # it was signalled holding records it had just taken
    assert run["c_processed_s"] >= lock_s * 0.9, run
    assert 0 <= run["recv_s"] < run["c_processed_s"], run
