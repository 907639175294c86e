"""Smoke test: bench/overview.py runs end to end at a tiny size (a broken bench fails CI).

60 groups over 20 partitions on the session's broker, two cycles. Asserts every row was
described without error, the lagging ones with their age, and that the JSON has the keys
bench/README.md quotes. Not a performance test: no number is compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_overview_tiny(kafka, unique, tmp_path):
    out = tmp_path / "overview.json"
    proc = run([sys.executable, str(REPO / "bench" / "overview.py"), "--groups", "60",
                "--partitions", "20", "--topics", "4", "--cycles", "2", "--visible", "10",
                "--prefix", f"ovs{unique}", "--bootstrap", kafka.bootstrap, "--traced",
                "--json", str(out)],
               cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "every row filled" in proc.stdout
    data = json.loads(out.read_text())
    assert 0 < data["names_s"] <= data["visible_s"] <= data["all_rows_s"]
    for cycle in data["cycles"]:
        assert cycle["rows"] == cycle["described"] == 60 and cycle["errors"] == 0
        assert cycle["lagging"] == 48  # every fifth group is caught up
        # many groups per describe and per OffsetFetch: a handful of calls, not one a group
        assert 0 < cycle["requests"] < 30
        assert cycle["cpu_s"]["broker"] == 0  # the session's broker: no child of the bench
        assert 0 <= cycle["fold_waited_s"] <= cycle["seconds"]
    first = data["cycles"][0]["cpu_s"]  # the watcher's first cycle and its JVM's start
    assert first["python"] > 0 and first["reader_jvm"] > 0
    assert data["cycles"][-1]["lag_seconds_known"] == 48
    assert 0 < data["rss_mb"]["traced_python_objects"] < data["rss_mb"]["python"]
    assert {"load_before", "load", "machine", "setup"} <= set(data)
