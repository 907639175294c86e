"""Smoke test: bench/overview_pages.py runs end to end at a tiny size (a broken bench fails CI).

200 groups on the bench's own broker: watch's Groups page opened, sorted and filtered in
Chromium, then the exporter scraped (as curl asks, and as Prometheus does). Asserts each step
was timed and the scrape holds the groups; not a performance test: no number is compared to a
target. `broker` and `chromium`
are requested for their markers: the bench starts its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.idle  # a watch, then an exporter, on 200 groups: mostly waiting on their cycles
@pytest.mark.timeout(400)
def test_overview_pages_tiny(broker, chromium, tmp_path):
    out = tmp_path / "pages.json"
    proc = run([sys.executable, str(REPO / "bench" / "overview_pages.py"), "--groups", "200",
                "--partitions", "20", "--topics", "4", "--json", str(out)],
               cwd=REPO, capture_output=True, text=True, timeout=360)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "exporter scrape" in proc.stdout
    data = json.loads(out.read_text())
    page = data["groups_page"]
    for step in ("warm_s", "first_screen_s", "sort_s", "filter_s"):
        assert 0 < page[step] < 120, (step, page)
    assert page["watch_rss_mb"] > 50
    scraped = data["exporter"]
    for asked in ("scrape_s", "prometheus_scrape_s"):  # as curl asks, as Prometheus asks
        assert len(scraped[asked]) == 3 and all(0 < s < 60 for s in scraped[asked]), scraped
    assert 0 < scraped["prometheus_wire_bytes"] < scraped["bytes"]  # gzipped
    # a few series per group at least (per-partition ones are opt-in)
    assert scraped["series"] >= 3 * 200 and scraped["bytes"] > 0
    assert {"load_before", "load", "machine", "setup"} <= set(data)
