"""The peers' per-message summary counts duplicates and gaps like groupscope's Summary."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import row_summary


def _msg(seq: int, speed: float) -> dict:
    return {"seq": seq, **dict.fromkeys(row_summary.FIELDS, 1.0), "speed_kmh": speed}


def test_duplicates_gaps_and_field_stats() -> None:
    s = None
    for seq, speed in [(0, 10.0), (1, 30.0), (1, 30.0), (4, 20.0)]:
        s = row_summary.update(s, _msg(seq, speed))
    assert (s["count"], s["last_seq"], s["dups"], s["gaps"]) == (4, 4, 1, 2)
    assert s["fields"]["speed_kmh"] == [4, 90.0, 2300.0, 10.0, 30.0]
