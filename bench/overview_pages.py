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
   - the resident memory of watch's process tree (Python and the reader's JVM), and again
     after `--settle` seconds more of cycles (its health windows and lag trends filling up),
     Python's sampled every SETTLE_SAMPLE_S on the way (`--settle-closed`: no page open
     meanwhile; `--watch-arg=--no-history`: without the memory).
2. unless `--watch-only`: `groupscope exporter --bootstrap …` until its first cycle has
   described every group, then SCRAPES scrapes of /metrics as `curl` asks (the text format,
   not compressed), then SCRAPES as Prometheus asks (OpenMetrics, gzip), SCRAPE_EVERY_S
   apart: seconds and bytes each, and
   the exporter's own figure for its last cycle (a render per cycle runs beside the cycle).

    .venv/bin/python bench/overview_pages.py [--groups 65000] [--partitions 3000]
                                             [--topics 300] [--exporter-only]
                                             [--settle SECONDS] [--settle-closed]
                                             [--watch-arg ARG] [--json PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.netutil import free_port, wait_until
from bench.common import LoadSampler, Stack, machine, rss_mb, spawn, stop
from bench.overview import prepare
from tests.dashboard.browser import choose, chromium_page, streamlit_healthy
from tests.dashboard.test_groups_browser import grid_rows

SCRAPES = 3
SCRAPE_EVERY_S = 5.0
# what Prometheus 3 sends (its scrape_protocols' default order)
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.6,"
                     "application/openmetrics-text;version=0.0.1;q=0.5,"
                     "text/plain;version=1.0.0;escaping=underscores;q=0.4,"
                     "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
WARM_TIMEOUT_S = 600.0
SETTLE_SAMPLE_S = 30.0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPSCOPE_")}
    env["GROUPSCOPE_DATA"] = str(data)
    return env


def _first_cells(page) -> list[str]:
    return [r[0] for r in grid_rows(page) if r]


def groups_page(bootstrap: str, groups: int, prefix: str, work: Path,
               settle_s: float = 0.0, watch_args: tuple[str, ...] = (),
               settle_closed: bool = False) -> dict:
    port = free_port()
    watch = spawn([sys.executable, "-m", "backend.cli", "watch", "--bootstrap", bootstrap,
                   "--port", str(port), *watch_args], work / "watch.log",
                  env=_env(work / "watch-data"))
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
            python_rss = psutil.Process(watch.pid).memory_info().rss / 2**20
            fresh.close()  # the watcher's cycles alone from here
            if settle_closed:
                page.close()  # and no page open at all
            samples = []  # Python's memory along the settle: a plateau, or growth
            settle_end = time.monotonic() + settle_s
            while time.monotonic() < settle_end:
                time.sleep(min(SETTLE_SAMPLE_S, settle_end - time.monotonic()))
                samples.append(round(psutil.Process(watch.pid).memory_info().rss / 2**20))
            settled = rss_mb(watch.pid)
            python_settled = psutil.Process(watch.pid).memory_info().rss / 2**20
    finally:
        stop(watch)
    return {"warm_s": round(warm_s, 1), "first_screen_s": round(first_screen_s, 2),
            "sort_s": round(sort_s, 2), "filter_s": round(filter_s, 2),
            "watch_rss_mb": round(rss), "watch_python_rss_mb": round(python_rss),
            "settle_s": settle_s, "watch_rss_settled_mb": round(settled),
            "watch_python_rss_along_settle_mb": samples, "watch_args": list(watch_args),
            "settled_with_page_open": not settle_closed,
            "watch_python_rss_settled_mb": round(python_settled)}


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

    def scrape(headers: dict[str, str] | None = None) -> tuple[float, int, str]:
        """Seconds, bytes on the wire, the body's text."""
        t = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=120) as response:
            wire = response.read()
            seconds = time.perf_counter() - t
            zipped = response.headers.get("Content-Encoding") == "gzip"
        return seconds, len(wire), (gzip.decompress(wire) if zipped else wire).decode()

    def scrapes(headers: dict[str, str] | None = None) -> list[tuple[float, int, str]]:
        runs = []
        for _ in range(SCRAPES):
            time.sleep(SCRAPE_EVERY_S)  # scrapes apart, as a scraper's interval keeps them
            runs.append(scrape(headers))
        return runs

    try:
        t = time.perf_counter()
        wait_until(lambda: (_metric(scrape()[2], "groupscope_exporter_groups_described") or 0)
                   >= groups, WARM_TIMEOUT_S, interval=2.0,
                   what="the exporter's first cycle describing every group")
        warm_s = time.perf_counter() - t
        plain = scrapes()
        prometheus = scrapes({"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
        rss = rss_mb(exporter.pid)
    finally:
        stop(exporter)
    seconds = [s for s, _, _ in plain]
    prom_seconds = [s for s, _, _ in prometheus]
    body = plain[-1][2]
    return {"warm_s": round(warm_s, 1), "scrape_s": [round(s, 3) for s in seconds],
            "scrape_median_s": round(statistics.median(seconds), 3),
            "bytes": len(body.encode()), "series": sum(
                1 for line in body.splitlines() if line and not line.startswith("#")),
            "prometheus_scrape_s": [round(s, 3) for s in prom_seconds],
            "prometheus_scrape_median_s": round(statistics.median(prom_seconds), 3),
            "prometheus_wire_bytes": prometheus[-1][1],
            "cycle_s": _metric(prometheus[-1][2], "groupscope_exporter_cycle_duration_seconds"),
            "exporter_rss_mb": round(rss)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=65_000)
    ap.add_argument("--partitions", type=int, default=3_000)
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--prefix", default="ovp", help="topic and group name prefix (default ovp)")
    ap.add_argument("--settle", type=float, default=0.0, metavar="SECONDS",
                    help="watch's memory read again after this many seconds more (default 0)")
    ap.add_argument("--watch-arg", action="append", default=[], metavar="ARG",
                    help="pass ARG to `groupscope watch` as well (repeatable), e.g. "
                         "--watch-arg=--no-history to see what its memory holds")
    ap.add_argument("--settle-closed", action="store_true",
                    help="close every page before settling (default: the first stays open)")
    ap.add_argument("--watch-only", action="store_true",
                    help="skip the exporter (watch's figures alone)")
    ap.add_argument("--exporter-only", action="store_true",
                    help="skip watch's Groups page (the exporter's figures alone)")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    with Stack(need_spark=False) as stack, LoadSampler() as load:
        assert stack.settings is not None
        setup = prepare(stack.settings, args.groups, args.partitions, args.topics,
                        args.prefix)
        print(f"seeded {args.groups} groups: {setup}", file=sys.stderr, flush=True)
        page = None if args.exporter_only else groups_page(
            stack.settings.bootstrap, args.groups, args.prefix, stack.work, args.settle,
            tuple(args.watch_arg), args.settle_closed)
        print(f"Groups page: {page}", file=sys.stderr, flush=True)
        scraped = None if args.watch_only else exporter_scrape(
            stack.settings.bootstrap, args.groups, stack.work)
    result = {"groups": args.groups, "topics": args.topics, "setup": setup,
              "groups_page": page, "exporter": scraped, "load_before": round(load_before, 2),
              "load": load.summary(), "machine": machine()}
    print(f"{args.groups} groups over {setup['partitions']} partitions (load "
          f"{load_before:.2f} before, {result['load']['median']} median during)")
    if page is not None:
        print(f"  watch warm (every group described)  {page['warm_s']} s")
        print(f"  Groups page, first screen           {page['first_screen_s']} s")
        print(f"  sort by name                        {page['sort_s']} s")
        print(f"  filter to one group                 {page['filter_s']} s")
        print(f"  watch's resident memory             {page['watch_rss_mb']} MiB "
              f"(Python {page['watch_python_rss_mb']}); {page['watch_rss_settled_mb']} MiB "
              f"(Python {page['watch_python_rss_settled_mb']}) {args.settle:.0f} s later")
        print(f"  watch's Python along the settle     "
              f"{page['watch_python_rss_along_settle_mb']} MiB, every {SETTLE_SAMPLE_S:.0f} s")
    if scraped is not None:
        print(f"  exporter warm                       {scraped['warm_s']} s")
        print(f"  exporter scrape                     {scraped['scrape_median_s']} s "
              f"({scraped['scrape_s']}), {scraped['bytes'] / 2**20:.1f} MiB, "
              f"{scraped['series']} series")
        print(f"  exporter scrape as Prometheus asks  {scraped['prometheus_scrape_median_s']} s "
              f"({scraped['prometheus_scrape_s']}), "
              f"{scraped['prometheus_wire_bytes'] / 2**20:.1f} MiB gzipped")
        print(f"  exporter's last cycle               {scraped['cycle_s']:.1f} s")
        print(f"  exporter's resident memory          {scraped['exporter_rss_mb']} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
