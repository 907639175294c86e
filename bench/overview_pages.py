"""The overview as people use it at scale: watch's Groups page in Chromium, the exporter's scrape.

`overview.py` times the overview's cycle in-process; this one starts the real commands on the
same kind of cluster (GROUPS Empty groups with committed offsets, `overview.prepare`), one at
a time so neither's cycles load the other's figures:

1. `groupscope watch --bootstrap …`, a first page open until the status line has every group
   described (the watcher warm), then a fresh page:
   - first screen: goto → the table's first rows drawn;
   - sort: "name" chosen in "sort by" → the first row is the first group by name (the time
     includes typing the choice, ~0.2 s);
   - filter: one group's name typed in "group name contains" → the table holds that row alone;
   - the resident memory of watch's process tree (Python and the reader's JVM).
2. `groupscope exporter --bootstrap …` until its first cycle has described every group, then
   SCRAPES scrapes of /metrics: seconds and bytes each.

    .venv/bin/python bench/overview_pages.py [--groups 65000] [--partitions 3000]
                                             [--topics 300] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.netutil import free_port, wait_until
from bench.common import LoadSampler, Stack, machine, rss_mb, spawn, stop
from bench.overview import prepare
from tests.dashboard.browser import choose, chromium_page, streamlit_healthy
from tests.dashboard.test_groups_browser import grid_rows

SCRAPES = 3
WARM_TIMEOUT_S = 600.0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPSCOPE_")}
    env["GROUPSCOPE_DATA"] = str(data)
    return env


def _first_cells(page) -> list[str]:
    return [r[0] for r in grid_rows(page) if r]


def groups_page(bootstrap: str, groups: int, prefix: str, work: Path) -> dict:
    port = free_port()
    watch = spawn([sys.executable, "-m", "backend.cli", "watch", "--bootstrap", bootstrap,
                   "--port", str(port)], work / "watch.log", env=_env(work / "watch-data"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: streamlit_healthy(url), 120, what="watch serving")
        with chromium_page(viewport=(1600, 1000)) as page:
            page.goto(url + "/")
            t = time.perf_counter()
            wanted = f"{groups:,} groups listed · {groups:,} described"
            wait_until(lambda: wanted in page.inner_text("body"), WARM_TIMEOUT_S, interval=1.0,
                       what=f"watch's status line saying '{wanted}'")
            warm_s = time.perf_counter() - t
            fresh = page.context.new_page()
            t = time.perf_counter()
            fresh.goto(url + "/")
            wait_until(lambda: any(c.startswith(prefix) for c in _first_cells(fresh)), 120,
                       interval=0.05, what="the first rows drawn")
            first_screen_s = time.perf_counter() - t
            first = f"{prefix}-group-00000"
            t = time.perf_counter()
            choose(fresh, "groups_sort", "name")
            wait_until(lambda: _first_cells(fresh)[:1] == [first], 120, interval=0.05,
                       what="the table sorted by name")
            sort_s = time.perf_counter() - t
            one = f"{prefix}-group-{groups // 2:05d}"
            box = fresh.locator(".st-key-groups_name input")
            box.fill(one)
            t = time.perf_counter()
            box.press("Enter")
            wait_until(lambda: _first_cells(fresh) == [one], 120, interval=0.05,
                       what=f"the table filtered to {one}")
            filter_s = time.perf_counter() - t
            rss = rss_mb(watch.pid)
    finally:
        stop(watch)
    return {"warm_s": round(warm_s, 1), "first_screen_s": round(first_screen_s, 2),
            "sort_s": round(sort_s, 2), "filter_s": round(filter_s, 2),
            "watch_rss_mb": round(rss)}


def _metric(text: str, name: str) -> float | None:
    """The first sample of `name` in an exposition, by a scan that stops there: the warm-up
    polls a 20 MiB body every 2 s, which prometheus_client's parser (the tests' `scrape`)
    would take seconds of this machine's CPU to read whole, beside what is measured."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def exporter_scrape(bootstrap: str, groups: int, work: Path) -> dict:
    port = free_port()
    exporter = spawn([sys.executable, "-m", "backend.cli", "exporter", "--bootstrap",
                      bootstrap, "--port", str(port)], work / "exporter.log",
                     env=_env(work / "exporter-data"))
    url = f"http://127.0.0.1:{port}/metrics"

    def scrape() -> tuple[float, str]:
        t = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as response:
            body = response.read().decode()
        return time.perf_counter() - t, body

    try:
        t = time.perf_counter()
        wait_until(lambda: (_metric(scrape()[1], "groupscope_exporter_groups_described") or 0)
                   >= groups, WARM_TIMEOUT_S, interval=2.0,
                   what="the exporter's first cycle describing every group")
        warm_s = time.perf_counter() - t
        runs = [scrape() for _ in range(SCRAPES)]
        rss = rss_mb(exporter.pid)
    finally:
        stop(exporter)
    seconds = [s for s, _ in runs]
    return {"warm_s": round(warm_s, 1), "scrape_s": [round(s, 2) for s in seconds],
            "scrape_median_s": round(statistics.median(seconds), 2),
            "bytes": len(runs[-1][1].encode()), "series": sum(
                1 for line in runs[-1][1].splitlines() if line and not line.startswith("#")),
            "exporter_rss_mb": round(rss)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=65_000)
    ap.add_argument("--partitions", type=int, default=3_000)
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--prefix", default="ovp", help="topic and group name prefix (default ovp)")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    with Stack(need_spark=False) as stack, LoadSampler() as load:
        assert stack.settings is not None
        setup = prepare(stack.settings, args.groups, args.partitions, args.topics,
                        args.prefix)
        print(f"seeded {args.groups} groups: {setup}", file=sys.stderr, flush=True)
        page = groups_page(stack.settings.bootstrap, args.groups, args.prefix, stack.work)
        print(f"Groups page: {page}", file=sys.stderr, flush=True)
        scraped = exporter_scrape(stack.settings.bootstrap, args.groups, stack.work)
    result = {"groups": args.groups, "topics": args.topics, "setup": setup,
              "groups_page": page, "exporter": scraped, "load_before": round(load_before, 2),
              "load": load.summary(), "machine": machine()}
    print(f"{args.groups} groups over {setup['partitions']} partitions (load "
          f"{load_before:.2f} before, {result['load']['median']} median during)")
    print(f"  watch warm (every group described)  {page['warm_s']} s")
    print(f"  Groups page, first screen           {page['first_screen_s']} s")
    print(f"  sort by name                        {page['sort_s']} s")
    print(f"  filter to one group                 {page['filter_s']} s")
    print(f"  watch's resident memory             {page['watch_rss_mb']} MiB")
    print(f"  exporter warm                       {scraped['warm_s']} s")
    print(f"  exporter scrape                     {scraped['scrape_median_s']} s "
          f"({scraped['scrape_s']}), {scraped['bytes'] / 2**20:.1f} MiB, "
          f"{scraped['series']} series")
    print(f"  exporter's resident memory          {scraped['exporter_rss_mb']} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
