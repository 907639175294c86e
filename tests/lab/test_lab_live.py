"""`groupscope lab` on the real broker and Spark with real replicas: what each protocol's
rebalance costs, judged from the batches the replicas processed, never from the assignor's
name. A kill across the protocols is the Lab page's test (test_lab_page_browser.py), judged
by the same rules from the same measurement; here the command line, its JSON and a rolling
restart."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from backend.contracts.lab import BOUNCE
from tests.replica.harness import REPO


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_rolling_restart_moves_nothing_of_a_static_group_and_the_json_says_so(
        kafka, spark_remote, artifacts_dir, unique, tmp_path) -> None:
    out = tmp_path / "lab.json"
    env = {**os.environ, "GROUPSCOPE_DATA": str(tmp_path / "data")}
    run = subprocess.run(
        [sys.executable, "-m", "backend.cli", "lab", "--bootstrap", kafka.bootstrap,
         "--spark-remote", spark_remote, "--protocols", "eager,static,share", "--event", BOUNCE,
         "--partitions", "4", "--replicas", "2", "--name", f"lab-{unique}", "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    (artifacts_dir / f"lab-{unique}.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "hand-offs" in run.stdout and "how a stall is measured" in run.stdout
    doc = orjson.loads(out.read_bytes())
    (rep,) = doc["repetitions"]
    by = {s["lab"]: s for s in rep["scores"]}
    assert by["static"]["moved"] == 0, "a static member back within its session keeps its own"
    assert by["eager"]["moved"] > 0, "a dynamic member that leaves hands its partitions over"
    assert doc["median"]["static"]["moved"] == 0
    # a share group (KIP-932) owns no partition: its members' deltas are its batches, every
    # partition measured and processing again once the last member is back
    share = by["share"]
    assert share["partitions"] == 4 and share["recovered_s"] is not None, share


def test_a_topic_the_broker_refuses_ends_the_lab_with_one_line(kafka, spark_remote,
                                                               tmp_path) -> None:
    # a space is no legal character of a topic's name: the broker refuses to create it
    env = {**os.environ, "GROUPSCOPE_DATA": str(tmp_path / "data")}
    run = subprocess.run(
        [sys.executable, "-m", "backend.cli", "lab", "--bootstrap", kafka.bootstrap,
         "--spark-remote", spark_remote, "--protocols", "eager", "--partitions", "1",
         "--replicas", "1", "--name", "no such topic"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    said = [line for line in run.stderr.splitlines() if line.startswith("groupscope lab: ")]
    assert len(said) == 1, run.stderr[-2000:]
    assert "repetition 1" in said[0] and "no such topic" in said[0], said[0]
