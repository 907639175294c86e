"""The lab on the real broker and Spark with real replicas: what each protocol's rebalance
costs, judged from the batches the replicas processed, never from the assignor's name."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from backend.contracts.lab import BOUNCE, KILL
from backend.lab.report import table
from backend.lab.run import LabConfig, LabRun
from tests.replica.harness import REPO


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_kill_stalls_the_eager_group_whole_and_elsewhere_only_the_victims_partitions(
        kafka, spark_remote, artifacts_dir, unique) -> None:
    config = LabConfig(protocols=("eager", "cooperative", "consumer"), event=KILL,
                       partitions=6, replicas=3, rate=300.0, name=f"lab-{unique}")
    lines: list[str] = []
    result = LabRun(kafka, spark_remote, config, artifacts_dir / f"lab-{unique}",
                    progress=lines.append).execute()
    print("\n".join(lines), table(config, [result]), sep="\n")
    by = {s.lab: s for s in result.scores}
    eager = by["eager"]
    assert eager.partitions == 6 and eager.victim_partitions
    assert eager.stopped == 6, "an eager rebalance stops every partition"
    for lab in ("cooperative", "consumer"):
        s = by[lab]
        assert s.partitions == 6 and s.victim_partitions, lab
        assert set(s.stopped_partitions) == set(s.victim_partitions), \
            f"{lab}: only the killed replica's partitions stop"
        assert set(s.stalled_partitions) == set(s.victim_partitions), \
            f"{lab}: only the killed replica's partitions wait"
    for s in result.scores:
        # the victim's wait a session timeout: a stall whatever else the protocol does
        assert set(s.victim_partitions) <= set(s.stalled_partitions), s
        assert s.recovered_s is not None and s.recovered_s > 0, s
        assert s.moved >= len(s.victim_partitions), s  # the victim's went to another


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_rolling_restart_moves_nothing_of_a_static_group_and_the_json_says_so(
        kafka, spark_remote, artifacts_dir, unique, tmp_path) -> None:
    out = tmp_path / "lab.json"
    env = {**os.environ, "GROUPSCOPE_DATA": str(tmp_path / "data")}
    run = subprocess.run(
        [sys.executable, "-m", "backend.cli", "lab", "--bootstrap", kafka.bootstrap,
         "--spark-remote", spark_remote, "--protocols", "eager,static", "--event", BOUNCE,
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
