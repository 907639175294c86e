"""Debian's two Chromium builds side by side on a live groupscope page: open, live, memory.

The browser tests drive a real Chromium against real pages; a suite run starts some 300 of its
processes, and a live page re-renders every second or two (one fragment per panel). Debian
ships the full browser (`chromium`, run headless) and `chromium-headless-shell` (the same
Blink without the browser's shell around it). Each repeat opens the same page of one
`groupscope watch` in each build, interleaved, and measures:

  open         page.goto → the Groups table drawn (wall seconds)
  open CPU     the browser's processes' CPU seconds from launch until then
  live CPU %   their CPU while the page stays open and refreshes, in % of one core
  RSS          their resident memory at the end

Prints a table with the headless shell's ratio to the full browser; --json PATH writes it.
Usage: python bench/browser.py [--repeats 3] [--live 30] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadSampler, Stack, report_variants, spawn, stop

from backend.netutil import free_port, wait_until
from tests.dashboard.browser import CHROMIUM_ARGS, streamlit_healthy

VARIANTS = {"chromium (headless)": "/usr/bin/chromium",
            "chromium-headless-shell": "/usr/bin/chromium-headless-shell"}
STEPS = ("open_s", "open_cpu_s", "live_cpu_pct", "rss_mb")
GROUPS = 12  # groups with committed offsets, so the table has rows to draw


def _browser_processes() -> list:
    """The browser's processes: what Playwright's node driver (this process's child) started."""
    import psutil

    drivers = [p for p in psutil.Process().children(recursive=True)
               if p.name().startswith("node")]
    return [p for driver in drivers for p in driver.children(recursive=True)]


def _cpu(procs: list) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(Exception):  # gone between listing and reading
            t = p.cpu_times()
            total += t.user + t.system
    return total


def _rss_mb(procs: list) -> float:
    total = 0
    for p in procs:
        with contextlib.suppress(Exception):
            total += p.memory_info().rss
    return total / 2**20


def one_page(executable: str, url: str, live_s: float) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="gs-bench-browser-")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000})
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            t = time.monotonic()
            page.goto(url)
            page.locator("[data-testid=stDataFrame]").first.wait_for(timeout=60_000)
            opened = time.monotonic() - t
            procs = _browser_processes()
            open_cpu = _cpu(procs)
            time.sleep(live_s)
            procs = _browser_processes()
            live = (_cpu(procs) - open_cpu) / live_s * 100
            return {"open_s": opened, "open_cpu_s": open_cpu, "live_cpu_pct": live,
                    "rss_mb": _rss_mb(procs)}
        finally:
            ctx.close()


def _seed(stack: Stack) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import NewTopic

    from backend.kafka.clients import quiet_admin

    assert stack.settings is not None
    admin = quiet_admin(stack.settings)  # kept until the topic is made: its handle must live
    admin.create_topics([NewTopic("bench-browser", 3, 1)])["bench-browser"].result(30)
    for g in range(GROUPS):
        c = Consumer(stack.settings.client_config(**{"group.id": f"bench-browser-{g}"}))
        c.commit(offsets=[TopicPartition("bench-browser", p, 0) for p in range(3)],
                 asynchronous=False)
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--live", type=float, default=30.0, help="seconds on the live page")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    missing = [path for path in VARIANTS.values() if not Path(path).exists()]
    if missing:
        print(f"browser bench: {', '.join(missing)} missing: apt-get install -y chromium "
              f"chromium-headless-shell", file=sys.stderr)
        return 2

    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    with Stack(need_spark=False) as stack, LoadSampler() as sampled:
        _seed(stack)
        assert stack.settings is not None
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPSCOPE_")}
        env["GROUPSCOPE_DATA"] = str(stack.work / "watch")
        watch = spawn([sys.executable, "-m", "backend.cli", "watch", "--bootstrap",
                       stack.settings.bootstrap, "--port", str(port)],
                      stack.work / "watch.log", env=env)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: streamlit_healthy(url), 60, what="groupscope watch serving")
            for rep in range(args.repeats):
                for name, executable in VARIANTS.items():
                    run = one_page(executable, url + "/", args.live)
                    runs[name].append(run)
                    print(f"repeat {rep + 1} {name:>24}: open {run['open_s']:.1f} s, "
                          f"{run['open_cpu_s']:.1f} CPU-s, live {run['live_cpu_pct']:.1f} %, "
                          f"{run['rss_mb']:.0f} MiB", file=sys.stderr, flush=True)
        finally:
            stop(watch)

    report_variants(f"Chromium builds on watch's Groups page, {args.repeats} repeats", runs, STEPS,
                    load_before, sampled, args.json, live_s=args.live)
    return 0


if __name__ == "__main__":
    sys.exit(main())
