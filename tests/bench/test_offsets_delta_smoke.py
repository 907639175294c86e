"""Smoke test: bench/offsets_delta.py runs end to end at a tiny size (a broken bench fails CI).

300 groups on the session's broker, two rounds each way. The bench itself asserts that every
group's answer came back as the object held when nothing moved; this checks the JSON has the
keys bench/README.md quotes. Not a performance test: no number is compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_offsets_delta_tiny(kafka, unique, tmp_path):
    out = tmp_path / "delta.json"
    proc = run([sys.executable, str(REPO / "bench" / "offsets_delta.py"), "--groups", "300",
                "--partitions", "20", "--topics", "4", "--rounds", "2", "--prefix",
                f"odb-{unique}", "--bootstrap", kafka.bootstrap, "--json", str(out)],
               cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    for way in ("whole", "delta"):
        assert data[way]["wall_s"]["n"] == 2 and data[way]["python_cpu_s"]["median"] >= 0
        assert data["one_in_ten_moved"][way]["wall_s"] > 0
    assert {"load_before", "load", "machine"} <= data.keys()
    assert "delta / whole" in proc.stdout
