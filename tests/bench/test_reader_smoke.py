"""Smoke test: bench/reader.py runs end to end at its smallest size (a broken bench fails CI).

Two repeats against the session's broker. Asserts the JSON has the keys bench/README.md
quotes and that every restart after a SIGKILL was measured. Not a performance test: no
number is compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_reader_tiny(kafka, tmp_path):
    out = tmp_path / "reader.json"
    proc = run([sys.executable, str(REPO / "bench" / "reader.py"), "--repeats", "2",
                "--bootstrap", kafka.bootstrap, "--json", str(out)],
               cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["first_answer_s"]["n"] == data["after_sigkill_s"]["n"] == 2
    assert data["after_sigkill_s"]["median"] > 0 and data["warm_call_median_ms"] > 0
    assert {"load_before", "load", "machine"} <= data.keys()
