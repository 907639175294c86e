"""Smoke test: bench/throughput.py runs end to end at a tiny size (a broken bench fails CI).

Uses the session's broker and Spark; asserts every variant finished (commits reached the log
end) and reported a positive rate. Not a performance test: no number is compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run as run_process

REPO = Path(__file__).resolve().parents[2]
QUIX = Path.home() / ".cache" / "groupscope" / "bench-quix-venv" / "bin" / "python"


@pytest.mark.timeout(180)
def test_throughput_tiny(kafka, spark_remote, tmp_path):
    variants = "groupscope,raw,rawsum" + (",quix" if QUIX.exists() else "")
    out = tmp_path / "t.json"
    proc = run_process(
        [sys.executable, str(REPO / "bench" / "throughput.py"), "--messages", "3000",
         "--repeats", "1", "--replicas", "1", "--modes", "alo", "--variants", variants,
         "--bootstrap", kafka.bootstrap, "--spark-remote", spark_remote, "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert {r["variant"] for r in data["runs"]} == set(variants.split(","))
    for run in data["runs"]:
        assert run["ok"], run
        assert run["messages"] >= 3000 and run["rate"] > 0
