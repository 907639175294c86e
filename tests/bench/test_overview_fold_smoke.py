"""Smoke test: bench/overview_fold.py runs at a tiny size (a broken bench fails CI).

60 groups over 20 partitions, twelve cycles: past the windows' filling, so the settled
shortcut runs too. Asserts the rows the fold left (four in five lagging, each with its age,
and stopped once its window spans the rules' minimum) and the keys bench/README.md quotes.
Not a performance test: no number is compared to a target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


def test_overview_fold_tiny(tmp_path: Path) -> None:
    out = tmp_path / "fold.json"
    proc = run([sys.executable, str(REPO / "bench" / "overview_fold.py"), "--groups", "60",
                "--partitions", "20", "--topics", "4", "--cycles", "12", "--json", str(out)],
               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert set(data["ways"]) == {"unmoved groups taken whole", "every partition folded"}
    for way in data["ways"].values():
        assert len(way["per_cycle_s"]) == 12 and way["partitions_folded"] == 60 * 5
        assert way["rows"] == 60 and way["lagging"] == way["lag_seconds_known"] == 48
        assert way["stopped"] == 48  # Empty, never moving, lagging: STOP, as Burrow says
        assert way["filling_median_s"] is not None and way["settled_median_s"] is not None
    assert {"load_before", "load_after", "machine"} <= set(data)
    assert "every partition folded" in proc.stdout
