"""Server time of one Live-page refresh at workshop-plus scale (target: < 200 ms).

Builds observer Snapshots with the real contract types — 64 partitions, 16 replicas,
1 000 streams, 100 recent events, 300 snapshots of history with rebalances — then times:
  * each panel's pure work (view-model, HTML, Plotly figure + its JSON, as Streamlit sends it);
  * every panel drawn by Streamlit itself (AppTest running the page's draw_* functions).

    .venv/bin/python bench/dashboard_refresh.py [--repeat 30] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.contracts import (  # noqa: E402
    Event,
    MemberView,
    PartitionView,
    RebalanceView,
    Snapshot,
    StreamView,
)
from backend.kafka.partitioner import partition_for  # noqa: E402
from backend.pool.names import name_at  # noqa: E402


def build(partitions: int = 64, replicas: int = 16, streams: int = 1000,
          history_len: int = 300) -> tuple[Snapshot, tuple[Snapshot, ...]]:
    names = [name_at(i) for i in range(replicas)]
    keys = [f"car-{i:04d}" for i in range(streams)]
    key_part = {k: partition_for(k, partitions) for k in keys}
    rebalances = tuple(
        RebalanceView(start_ms=1_000_000 + 60_000 * i, end_ms=1_000_000 + 60_000 * i + 4_000,
                      generation=10 + i, joined=(names[i % replicas],), left=(),
                      moved=tuple((p, names[0], names[1]) for p in range(0, partitions, 8)))
        for i in range(5))
    history = []
    for t in range(history_len):
        ts = 1_000_000 + 1000 * t
        shift = 1 if any(r.start_ms <= ts <= r.end_ms for r in rebalances) else 0
        owners = {p: names[(p + shift) % replicas] for p in range(partitions)}
        parts = tuple(PartitionView(partition=p, owner=owners[p], committed=200 * t,
                                    end=210 * t + p, lag_messages=10 * t + p,
                                    lag_seconds=0.5 + p / 100) for p in range(partitions))
        members = tuple(MemberView(member_id=f"{n}-id", client_id=n, host="/127.0.0.1",
                                   partitions=tuple(p for p in range(partitions)
                                                    if owners[p] == n))
                        for n in names)
        svs = tuple(StreamView(stream_id=k, partition=key_part[k], owner=owners[key_part[k]])
                    for k in keys)
        events = []
        for i in range(100):
            n = names[i % replicas]
            kind = ("stream_received", "streams_revoked", "heartbeat", "assigned")[i % 4]
            fields = {"stream_received": {"stream": keys[i], "partition": key_part[keys[i]]},
                      "streams_revoked": {"streams": keys[i:i + 5]},
                      "heartbeat": {"rate": 123.0, "last_batch_ms": 640.0},
                      "assigned": {"partitions": [i % partitions]}}[kind]
            events.append(Event(ts - 100_000 + 1000 * i, "g", n, kind, fields))
        history.append(Snapshot(
            taken_ms=ts, group="telemetry-summariser", topic="telemetry", state="Stable",
            protocol="classic", assignor="range", generation=14, members=members,
            partitions=parts, streams=svs,
            rebalances=tuple(r for r in rebalances if r.start_ms <= ts),
            total_lag=sum(p.lag_messages for p in parts), events=tuple(events),
            partition_count=partitions))
    return history[-1], tuple(history)


def time_pure(snap: Snapshot, history: tuple[Snapshot, ...], repeat: int) -> dict[str, list[float]]:
    import plotly.io as pio

    from dashboard import live_model as lm
    from dashboard.figures import throughput_lag_figure
    from dashboard.panels import cards_html, lanes_html
    from dashboard.views.live import header_badges

    def chart() -> None:
        points = lm.series(history)
        fig = throughput_lag_figure(points, lm.rebalance_periods(snap, points[0].ts))
        pio.to_json(fig, validate=False)

    steps = {
        "header + idle rule": lambda: (header_badges(snap), lm.idle_warning(snap)),
        "lanes (64 lanes, 1000 chips)": lambda: lanes_html(snap),
        "replica cards": lambda: cards_html(lm.replica_cards(snap, ())),
        "event feed": lambda: lm.filter_feed(lm.feed_items(snap.events), (), ""),
        "throughput/lag figure + JSON": chart,
        "stream locator": lambda: lm.locate("car-0042", snap, history),
    }
    out: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeat):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - t0) * 1000)
    out["total (pure)"] = [sum(v[i] for v in out.values()) for i in range(repeat)]
    return out


PAGE = '''
import pickle, sys
sys.path.insert(0, {root!r})
import streamlit as st
from dashboard.views import live

@st.cache_resource
def data():
    with open({data!r}, "rb") as f:
        return pickle.load(f)


snap, history = data()  # loaded once, like the observer's store in a live server
live.draw_header(snap)
left, right = st.columns([3, 2])
with left:
    live.draw_lanes(snap)
with right:
    live.draw_cards(snap, ())
    live.draw_feed(snap, ())
live.draw_chart(snap, history, "bench")
live.draw_locator(snap, history)
'''


def time_streamlit(snap: Snapshot, history: tuple[Snapshot, ...],
                   repeat: int) -> tuple[list[float], list[float]]:
    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "snap.pkl"
        data.write_bytes(pickle.dumps((snap, history)))
        script = Path(tmp) / "page.py"
        script.write_text(PAGE.format(root=str(ROOT), data=str(data)))
        at = AppTest.from_file(str(script), default_timeout=60)
        at.run()  # imports and the pickle load happen once, like a live server
        assert not at.exception, at.exception
        times, cpu = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            at.run()
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        assert not at.exception, at.exception
        assert any("1,000" in str(m.value) or m.value == "1000" for m in at.metric), "not drawn"
        return times, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    snap, history = build()
    print(f"snapshot: {len(snap.partitions)} partitions, {len(snap.members)} replicas, "
          f"{len(snap.streams)} streams, {len(snap.events)} events, {len(history)} in history")
    pure = time_pure(snap, history, args.repeat)
    page, page_cpu = time_streamlit(snap, history, args.repeat)
    rows = [(k, v) for k, v in pure.items()]
    rows.append(("whole page drawn by Streamlit (AppTest run), wall", page))
    rows.append(("whole page drawn by Streamlit (AppTest run), CPU", page_cpu))
    print(f"{'step':58} {'median ms':>10} {'p95 ms':>8}")
    results = {}
    for name, vals in rows:
        med = statistics.median(vals)
        p95 = sorted(vals)[max(0, int(len(vals) * 0.95) - 1)]
        results[name] = {"median_ms": round(med, 2), "p95_ms": round(p95, 2)}
        print(f"{name:58} {med:10.1f} {p95:8.1f}")
    target = statistics.median(page)
    verdict = "OK" if target < 200 else "OVER"
    print(f"Live refresh server time: median {target:.0f} ms wall, "
          f"{statistics.median(page_cpu):.0f} ms CPU; target < 200 ms: {verdict}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "refresh_ms": round(target, 2),
                                         "target_ms": 200}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
