"""Always on: the Groups page left open does not grow.

Two minutes in `make test` (a quick leak only); `make soak-page` leaves it open for thirty
(GROUPSCOPE_ALWAYS_ON_S=1800), which is what to run after a change to the Groups page, its
poller or the overview's memory.

A real `groupscope watch` on the real broker, a real Chromium tab on its Groups page, while
the cluster changes underneath: new groups appear every minute, a live group gains and loses
a member (a rebalance each time), a producer keeps the lag moving. After a warm-up, the
page's JS heap (after a forced GC, through the DevTools protocol) and the server's RSS are
sampled every 30 s; each must stay within ±20 % of its first sample after the warm-up.
The samples are written to test-artifacts/ so a failure shows the curve.
"""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from backend.netutil import wait_until
from tests.dashboard.browser import open_page
from tests.dashboard.test_groups_browser import grid_rows, watch_server
from tests.observer.conftest import create_topic, members_factory, producer_factory
from tests.observer.seed import seed_groups

__all__ = ["members_factory", "producer_factory"]  # the observer tests' fixtures, reused

TOTAL_S = float(os.environ.get("GROUPSCOPE_ALWAYS_ON_S", 120))  # `make soak-page`: 1800
WARMUP_S = min(120.0, TOTAL_S / 3)
SAMPLE_EVERY_S = 20.0 if TOTAL_S < 900 else 60.0
CHURN_EVERY_S = 30.0 if TOTAL_S < 900 else 60.0
TOLERANCE = 0.20
PARTITIONS = 4


def listening_pid(port: int) -> int:
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            return conn.pid
    raise AssertionError(f"nothing listens on port {port}")


@pytest.mark.idle  # two minutes of a page refreshing itself: the third lane
@pytest.mark.timeout(TOTAL_S + 300)
def test_the_groups_page_left_open_does_not_grow(kafka, unique, chromium, members_factory,
                                                 producer_factory, tmp_path, artifacts_dir):
    topic = f"always-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer_factory(topic, rate=30.0)
    prefix = f"always-{unique}-"
    seed_groups(kafka, {f"{prefix}{i:03d}": {(topic, p): 0 for p in range(PARTITIONS)}
                        for i in range(40)})
    live = members_factory(f"{prefix}live", topic, "classic", "cooperative-sticky")
    live.start("steady")
    members_factory(f"{prefix}kip848", topic, "consumer").start("k1")

    samples: list[dict] = []
    with watch_server(kafka.bootstrap, tmp_path / "watch.log", tmp_path / "data") as url, \
            chromium() as page:
        server = psutil.Process(listening_pid(int(url.rsplit(":", 1)[1])))
        open_page(page, url)
        wait_until(lambda: any(prefix in " ".join(r) for r in grid_rows(page)), 90,
                   interval=1.0, what="the seeded groups on the Groups page")
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")

        def sample(at: float) -> dict:
            cdp.send("HeapProfiler.collectGarbage")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            return {"t_s": round(at, 1), "js_heap_mb": metrics["JSHeapUsedSize"] / 2**20,
                    "server_rss_mb": server.memory_info().rss / 2**20,
                    "rows": len(grid_rows(page))}

        start = time.monotonic()
        next_sample, next_churn, churn = start + WARMUP_S, start + CHURN_EVERY_S, 0
        while (now := time.monotonic()) - start < TOTAL_S:
            if now >= next_churn:  # the cluster changes: a group joins, a member comes or goes
                churn += 1
                seed_groups(kafka, {f"{prefix}new-{churn:03d}": {(topic, 0): 0}})
                if churn % 2:
                    live.start("visitor")
                else:
                    live.kill("visitor")
                next_churn += CHURN_EVERY_S
            if now >= next_sample:
                samples.append(sample(now - start))
                next_sample += SAMPLE_EVERY_S
            time.sleep(1.0)  # the page refreshes itself; this loop only paces the churn
        assert server.is_running(), "the dashboard's server died"
        text = page.inner_text("body")

    (artifacts_dir / "always_on.json").write_text(json.dumps(samples, indent=2))
    assert len(samples) >= 3, samples
    assert "Traceback" not in text
    assert churn >= 2  # the page lived through joins and rebalances
    for key in ("js_heap_mb", "server_rss_mb"):
        base = samples[0][key]
        worst = max(samples, key=lambda s: abs(s[key] - base))
        assert abs(worst[key] - base) <= TOLERANCE * base, (
            f"{key} moved from {base:.1f} to {worst[key]:.1f} at {worst['t_s']} s "
            f"(more than ±{TOLERANCE:.0%}); samples in test-artifacts/always_on.json")
