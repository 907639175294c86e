"""The memory's cost: what it adds to the overview's cycle, the bytes it keeps, how fast a
group's week reads back.

- `cycle`: the overview bench's cluster (`bench/overview.py`: GROUPS groups with committed
  offsets on TOPICS topics) read by three watchers in turn: one as before the memory (no
  episode tracker), one with the tracker and no file, one writing the file; warm cycles
  interleaved (A B C A B C ...) so drift hits all alike; then the upkeep (`maintain`: fold the
  cycles' raw lag into hourly blocks) timed on its own.
- `bytes`: a day of G groups written through the store as the recorder writes it (a cycle
  every CYCLE_S seconds, each group's partitions every PARTITION_LAG_STEP_MS, upkeep every
  ten minutes), in two kinds: *busy* groups whose lag moves every cycle (the worst case)
  and *steady* ones whose lag does not (most groups of a production cluster: written when it
  changes and every five minutes), each with and without its episodes (EPISODES a day).
  Bytes per group per day, and 7 days of 5 000 groups.
- `timeline`: one group's 7 days at CYCLE_S (and an episode an hour) beside 50 other groups,
  then what the Timeline page does to open it: the episodes and the lag of the span read, the
  lag cut to the points a browser gets, the figure built. Median of `--repeats`.

    .venv/bin/python bench/memory.py [--part cycle|bytes|timeline|all] [--groups 5000]
                                     [--cycles 5] [--day-groups 100] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LoadSampler, Stack, machine, spread

DAY_MS = 86_400_000
CYCLE_S = 10  # the exporter's and watch's default
PARTITIONS = 20


# ---- synthetic days --------------------------------------------------------------------

def _episode(group: str, t: int, i: int):
    from backend.contracts.history import EXPIRED, JOINED, Cause, Episode, Impact, Moved

    kind = EXPIRED if i % 2 else JOINED
    return Episode(
        "bench", group, t, t + 4_000, "classic", "state",
        causes=(Cause(kind, f"member-{i % 7} (member-{i % 7}-0123456789ab on /10.1.2.3) "
                            f"stopped committing with records waiting and stayed listed 45.2 s "
                            f"until the group noticed", member=f"member-{i % 7}",
                      member_id=f"member-{i % 7}-0123456789abcdef", host="/10.1.2.3",
                      dead_ms=45_200),),
        impact=Impact(moved=tuple(Moved("orders", p, f"member-{i % 7}", "member-0")
                                  for p in range(3)),
                      unowned_partition_seconds=12.0, gap_ms=47_000, lag_before=1200,
                      lag_peak=9000, lag_after=1300, recovered_ms=30_000),
        left=(f"member-{i % 7}",), final=True)


def write_days(store, groups: int, days: float, start_ms: int, busy: bool,
               episodes_per_day: int = 4, seed: int = 7) -> dict[str, float]:
    """Write `days` of `groups` groups the way the recorder does; returns what it took."""
    from backend.contracts.history import PARTITION_LAG_STEP_MS, StateChange
    from backend.history.store import Cycle, GroupLag
    from backend.observer.overview_model import LAG_KEEPALIVE_MS

    rng = random.Random(seed)
    names = [f"group-{g:05d}" for g in range(groups)]
    lag = {g: rng.randrange(0, 5000) for g in names}
    parts = {g: [rng.randrange(0, 300) for _ in range(PARTITIONS)] for g in names}
    written = {g: -LAG_KEEPALIVE_MS for g in names}
    steps = int(days * DAY_MS / (CYCLE_S * 1000))
    began = time.perf_counter()
    upkeep = 0.0
    for n in range(steps):
        t = start_ms + n * CYCLE_S * 1000
        cycle = Cycle("bench", "bench:9092", t)
        for i, g in enumerate(names):
            partition_step = t % PARTITION_LAG_STEP_MS < CYCLE_S * 1000
            if busy:
                lag[g] = max(0, lag[g] + rng.randrange(-60, 61))
                if partition_step:
                    parts[g] = [max(0, v + rng.randrange(-20, 21)) for v in parts[g]]
            if busy or t - written[g] >= LAG_KEEPALIVE_MS:
                written[g] = t
                cycle.lag.append(GroupLag(
                    g, t, lag[g], round(3 + lag[g] / 50, 1) if busy else None,
                    {("orders", p): v for p, v in enumerate(parts[g])}
                    if partition_step else None))
            every = DAY_MS // 1000 // CYCLE_S // max(1, episodes_per_day)
            if episodes_per_day and (n + i * 37) % every == 0:  # groups staggered
                cycle.episodes.append(_episode(g, t, n))
                cycle.states.extend([StateChange(t, g, "PreparingRebalance", "classic",
                                                 "range", 3, None),
                                     StateChange(t + 4000, g, "Stable", "classic", "range",
                                                 2, None)])
        store.write(cycle)
        if t % 600_000 < CYCLE_S * 1000:  # upkeep every ten minutes, as the recorder's
            u = time.perf_counter()
            store.maintain(t, 8 * DAY_MS, 1 << 40)
            upkeep += time.perf_counter() - u
    u = time.perf_counter()
    store.maintain(start_ms + steps * CYCLE_S * 1000 + 600_000, 8 * DAY_MS, 1 << 40)
    upkeep += time.perf_counter() - u
    return {"write_s": round(time.perf_counter() - began, 1), "upkeep_s": round(upkeep, 1)}


def used_bytes(store) -> int:
    return store._used_bytes()  # pages in use (freed pages are reused, then vacuumed)


def part_bytes(groups: int, episodes_per_day: int) -> dict:
    """Each kind twice, with and without episodes: what the lag costs and what an episode
    costs, apart. Two days are written and the second day's growth is the cost a day: the
    first also holds what a file has once (a page per table and index, the open hour's
    blocks, the last minutes' raw points), reported apart as `fixed_bytes_per_group`."""
    from backend.history.sqlite import SqliteStore

    out = {}
    for kind in ("busy", "steady"):
        sizes, fixed, took = {}, {}, {}
        for eps in (0, episodes_per_day):
            with tempfile.TemporaryDirectory() as d:
                store = SqliteStore(Path(d) / "history.sqlite")
                start = 1_800_000_000_000
                first = write_days(store, groups, 1.0, start, busy=kind == "busy",
                                   episodes_per_day=eps)
                one = used_bytes(store)
                took = write_days(store, groups, 1.0, start + DAY_MS, busy=kind == "busy",
                                  episodes_per_day=eps, seed=8)
                sizes[eps] = used_bytes(store) - one
                fixed[eps] = one - sizes[eps]
                took = {k: round(first[k] + took[k], 1) for k in took}
                store.close()
        per = sizes[episodes_per_day] / groups
        out[kind] = {"groups": groups, "episodes_per_day": episodes_per_day,
                     "bytes_per_group_day": round(per),
                     "lag_bytes_per_group_day": round(sizes[0] / groups),
                     "bytes_per_episode": round((sizes[episodes_per_day] - sizes[0])
                                                / groups / max(1, episodes_per_day)),
                     "fixed_bytes_per_group": round(fixed[episodes_per_day] / groups),
                     "week_of_5000_groups_mib": round(per * 5000 * 7 / 2**20, 1),
                     **{f"two_days_{k}": v for k, v in took.items()}}
    return out


# ---- the Timeline of one group's week ------------------------------------------------------

def part_timeline(repeats: int) -> dict:
    from backend.history.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as d:
        store = SqliteStore(Path(d) / "history.sqlite")
        start = 1_800_000_000_000
        took = write_days(store, 51, 7.0, start, busy=True, episodes_per_day=24)
        end = start + 7 * DAY_MS
        timings = []
        shape = {}
        for _ in range(repeats):
            t = time.perf_counter()
            shape = open_week(store, "group-00000", end - 7 * DAY_MS, end)
            timings.append(time.perf_counter() - t)
        size = used_bytes(store)
        store.close()
    return {"open_s": spread(timings), "store_mib": round(size / 2**20, 1), **shape, **took}


def open_week(store, group: str, since: int, until: int) -> dict:
    """What the Timeline page reads and builds for one group's span (pollers.group_memory,
    then the page's view-model and figure)."""
    from dashboard import history_model as hm
    from dashboard.figures import memory_lag_figure

    episodes = store.episodes("bench", group, since, until, hm.MAX_EPISODES)
    block = store.lag("bench", group, since, until, partitions=False)
    series = hm.lag_series(block)
    shown = episodes[-1].start_ms if episodes else None
    memory_lag_figure(series, hm.shades(episodes, until), since, until, shown,
                      revision="bench")
    hm.table(episodes, shown)
    if episodes:
        hm.card(hm.worst(episodes))
    return {"episodes": len(episodes), "points": len(block.times),
            "points_drawn": len(series.times)}


# ---- what it adds to a cycle ------------------------------------------------------------------

def part_cycle(settings, groups: int, cycles: int, prefix: str) -> dict:
    from backend.history.recorder import HistoryRecorder
    from backend.netutil import wait_until
    from backend.observer.overview import OverviewWatcher

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.sqlite"
        recorder = HistoryRecorder(path, "bench").start()
        # as before the memory: no episode tracker, nothing noted for it
        bare = OverviewWatcher(settings, interval=0.0)
        bare.model._track = lambda *a, **k: None  # type: ignore[method-assign]
        bare.model._record = lambda *a, **k: None  # type: ignore[method-assign]
        plain = OverviewWatcher(settings, interval=0.0)  # the tracker, no file
        kept = OverviewWatcher(settings, interval=0.0, history=recorder)
        watchers = (("none", bare), ("without", plain), ("with", kept))
        seconds: dict[str, list[float]] = {name: [] for name, _ in watchers}
        try:
            wait_until(lambda: sum(g.group.startswith(prefix)
                                   for g in plain.collector.list_groups()) >= groups,
                       timeout=120, interval=1.0, what="every group listed")
            for _, w in watchers:
                w.refresh_once()  # cold: the JVM, the metadata, the first descriptions
            for _ in range(cycles):
                for name, w in watchers:
                    t = time.perf_counter()
                    w.refresh_once()
                    seconds[name].append(time.perf_counter() - t)
            wait_until(lambda: not recorder._pending, 60, what="the memory's writes done")
            written = os.path.getsize(path) + os.path.getsize(str(path) + "-wal")
            from backend.history.sqlite import SqliteStore

            store = SqliteStore(path)
            t = time.perf_counter()
            folded = store.maintain(int(time.time() * 1000) + 600_000, 7 * DAY_MS, 1 << 40)
            upkeep = time.perf_counter() - t
            store.close()
        finally:
            for _, w in watchers:
                w.stop()
            recorder.close()
    base = statistics.median(seconds["none"])
    return {"none_s": spread(seconds["none"]), "without_s": spread(seconds["without"]),
            "with_s": spread(seconds["with"]),
            "tracker_added": round(statistics.median(seconds["without"]) / base - 1, 3),
            "added": round(statistics.median(seconds["with"]) / base - 1, 3),
            "file_bytes_after": written,
            "upkeep_s": round(upkeep, 2), "upkeep_folded_points": folded["folded"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("cycle", "bytes", "timeline", "all"), default="all")
    ap.add_argument("--groups", type=int, default=5000, help="cycle: groups on the cluster")
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=5, help="cycle: warm cycles of each watcher")
    ap.add_argument("--day-groups", type=int, default=100, help="bytes: groups written")
    ap.add_argument("--episodes-per-day", type=int, default=4,
                    help="bytes: rebalances a group has a day (default 4)")
    ap.add_argument("--repeats", type=int, default=5, help="timeline: opens timed")
    ap.add_argument("--prefix", default="ovb")
    ap.add_argument("--bootstrap", default=None, help="cycle: use this cluster")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    parts = ("cycle", "bytes", "timeline") if args.part == "all" else (args.part,)
    load_before = os.getloadavg()[0]
    result: dict = {"load_before": round(load_before, 2), "machine": machine()}
    with LoadSampler() as load:
        if "bytes" in parts:
            result["bytes"] = part_bytes(args.day_groups, args.episodes_per_day)
        if "timeline" in parts:
            result["timeline"] = part_timeline(args.repeats)
        if "cycle" in parts:
            from bench.overview import prepare

            with Stack(bootstrap=args.bootstrap, need_spark=False) as stack:
                result["setup"] = prepare(stack.settings, args.groups, args.partitions,
                                          args.topics, args.prefix)
                result["cycle"] = part_cycle(stack.settings, args.groups, args.cycles,
                                             args.prefix)
    result["load"] = load.summary()
    print(f"the memory (load {load_before:.2f} before, {result['load']['median']} median)")
    if "cycle" in result:
        c = result["cycle"]
        def cell(k: str) -> str:
            return f"{c[k]['median']} s [{c[k]['min']}-{c[k]['max']}]"

        print(f"  cycle, {args.groups} groups: no memory {cell('none_s')}; its tracker "
              f"{cell('without_s')} (+{c['tracker_added']:.1%}); tracker and file "
              f"{cell('with_s')} (+{c['added']:.1%}); upkeep {c['upkeep_s']} s for "
              f"{c['upkeep_folded_points']} points")
    for kind, b in result.get("bytes", {}).items():
        print(f"  {kind:6} groups: {b['bytes_per_group_day']:,} bytes a group a day "
              f"({b['lag_bytes_per_group_day']:,} of lag, {b['episodes_per_day']} episodes of "
              f"{b['bytes_per_episode']:,}) and {b['fixed_bytes_per_group']:,} once; 7 days "
              f"of 5 000 groups {b['week_of_5000_groups_mib']} MiB (two days written in "
              f"{b['two_days_write_s']} s, upkeep {b['two_days_upkeep_s']} s)")
    if "timeline" in result:
        t = result["timeline"]
        print(f"  a group's week: opened in {t['open_s']['median']} s "
              f"[{t['open_s']['min']}-{t['open_s']['max']}], {t['episodes']} episodes, "
              f"{t['points']} points ({t.get('points_drawn', '-')} drawn), "
              f"store {t['store_mib']} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
