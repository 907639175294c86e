"""Smoke test: bench/throughput.py runs end to end at a tiny size (a broken bench fails CI).

Uses the session's broker and Spark; asserts every variant finished (commits reached the log
end) and reported a positive rate, and that groupscope's summaries are exact in both modes: a
faster pipeline must not lose or double-count a message. Not a performance test: no number is
compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run as run_process

REPO = Path(__file__).resolve().parents[2]
QUIX = Path.home() / ".cache" / "groupscope" / "bench-quix-venv" / "bin" / "python"


@pytest.mark.slow  # a minute of whole pipelines, no timing asserted: the second lane
@pytest.mark.timeout(300)
def test_throughput_tiny(kafka, spark_remote, tmp_path):
    variants = "groupscope,share,raw,rawsum" + (",quix" if QUIX.exists() else "")
    out = tmp_path / "t.json"
    proc = run_process(
        [sys.executable, str(REPO / "bench" / "throughput.py"), "--messages", "3000",
         "--repeats", "1", "--replicas", "2", "--share-replicas", "3", "--modes", "alo,eos",
         "--variants", variants,
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert {r["variant"] for r in data["runs"]} == set(variants.split(","))
    for run in data["runs"]:
        assert run["ok"], run
        assert run["messages"] >= 3000 and run["rate"] > 0
        # the CPU profile: here only the consumers' (broker and Spark are the session's)
        assert run["cpu_s"]["consumers"] > 0 and run["cores_busy"] > 0, run
        per_msg = run["cpu_us_per_msg"]
        assert per_msg["total"] == per_msg["consumers"] > 0, run
        if run["variant"] in ("groupscope", "share"):
            exact = run["summaries"]
            assert exact["exact"] and exact["streams"] == 12, run
            assert exact["lost"] == 0 and exact["unexpected"] == 0, run
            if run["mode"] == "eos":
                assert exact["duplicates"] == 0, run
    assert {(r["replicas"], r["mode"]) for r in data["runs"] if r["variant"] == "groupscope"} \
        == {(2, "alo"), (2, "eos")}
    # a share group acknowledges records: no transactions, so at-least-once only
    assert {(r["replicas"], r["mode"]) for r in data["runs"] if r["variant"] == "share"} \
        == {(3, "alo")}
    assert "eos_vs_alo_x2" in data["ratios"]
    if QUIX.exists():  # CPU per message beside Quix Streams', in its own mode
        assert all(row["cpu_vs_quix"] > 0 for row in data["table"]), data["table"]
