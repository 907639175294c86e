"""The side-by-side table the settings benchmarks print: each variant against the first."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from common import spread, variants_table


def test_each_variant_is_shown_with_its_spread_and_its_ratio_to_the_first() -> None:
    table = variants_table({"old": {"cpu": spread([2.0, 4.0, 3.0]), "idle": spread([0.0])},
                            "new": {"cpu": spread([1.5, 1.0, 2.0]), "idle": spread([1.0])}},
                           ("cpu", "idle"))
    assert table.splitlines() == [
        "| step | old | new |",
        "| --- | --- | --- |",
        "| cpu | 3.00 [2.00-4.00] | 1.50 [1.00-2.00] 0.50x |",
        "| idle | 0.00 [0.00-0.00] | 1.00 [1.00-1.00] nanx |",
    ]
