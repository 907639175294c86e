"""Plotly charts from the benchmarks' JSON (bench/results/*.json) as standalone HTML.

Each chart reads one file a benchmark writes with `--json`; a missing file is skipped with a
one-line note, so the charts can be rebuilt whatever subset of benchmarks has been run.
Output goes to bench/charts/<name>.html with one shared plotly.min.js next to the pages
(readers may be offline, and embedding the 4.8 MB library in every page would multiply it),
plus <name>.png when `kaleido` is importable (it is not installed by default; HTML only then).

    .venv/bin/python bench/charts.py [--results bench/results] [--out bench/charts]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

HERE = Path(__file__).resolve().parent
MODE_COLOURS = {"alo": "#1f77b4", "eos": "#ff7f0e"}
WINDOW_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
MODE_NAMES = {"alo": "at-least-once", "eos": "exactly-once"}
VARIANT_NAMES = {"raw": "raw loop", "rawsum": "raw loop + summary", "quix": "Quix Streams"}


def _label(row: dict[str, Any]) -> str:
    v = row["variant"]
    return f"groupscope ×{row['replicas']}" if v == "groupscope" else VARIANT_NAMES.get(v, v)


def _bar(spread: dict[str, float], name: str, x: list[str], colour: str,
         show: bool) -> go.Bar:
    return go.Bar(name=name, x=x, y=[s["median"] for s in spread], marker_color=colour,
                  legendgroup=name, showlegend=show,
                  error_y={"type": "data", "symmetric": False,
                           "array": [s["max"] - s["median"] for s in spread],
                           "arrayminus": [s["median"] - s["min"] for s in spread]})


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"median": median, "min": ordered[0], "max": ordered[-1], "n": len(ordered)}


def throughput_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per variant × replicas × mode with `rate` and `wall_rate` spreads.

    Built from `runs` (every run, in every version of throughput.py's JSON); the `table`
    of early versions has no wall rate, so it is only the fallback.
    """
    runs = [r for r in data.get("runs", []) if r.get("ok")]
    if not runs:
        return [r for r in data.get("table", []) if r.get("ok", True) and "rate" in r]
    rows: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        key = (r["variant"], r["replicas"], r["mode"])
        row = rows.setdefault(key, {"variant": key[0], "replicas": key[1], "mode": key[2],
                                    "_rate": [], "_wall": []})
        row["_rate"].append(r["rate"])
        if "wall_rate" in r:
            row["_wall"].append(r["wall_rate"])
    out = []
    for row in rows.values():
        rate, wall = row.pop("_rate"), row.pop("_wall")
        row["rate"] = _spread(rate)
        if len(wall) == len(rate):
            row["wall_rate"] = _spread(wall)
        out.append(row)
    return out


def throughput_figure(data: dict[str, Any]) -> go.Figure:
    """msg/s per variant × mode (median, min–max error bars), and the ratio to the raw loop.

    `rate` is first to last commit, `wall_rate` all messages / time from process start. The
    ratio is on the wall rate when every row has one (the raw loop finishes too quickly for
    a commit-to-commit rate), else on `rate`.
    """
    rows = throughput_rows(data)
    metric = "wall_rate" if all("wall_rate" in r for r in rows) else "rate"
    panels = [("rate", "steady msg/s (first to last commit; too few commits for the raw loop)")]
    if metric == "wall_rate":
        panels.append(("wall_rate", "wall msg/s (all messages / time from start)"))
    fig = make_subplots(rows=len(panels) + 1, cols=1, vertical_spacing=0.08,
                        subplot_titles=[t for _, t in panels]
                        + [f"ratio to the raw loop ({'wall' if metric == 'wall_rate' else 'steady'}"
                           " rate, median)"])
    order = list(dict.fromkeys(_label(r) for r in rows))
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = [r for r in rows if r["mode"] == mode]
        x = [_label(r) for r in mine]
        name, colour = MODE_NAMES.get(mode, mode), MODE_COLOURS.get(mode, "#7f7f7f")
        for i, (key, _) in enumerate(panels, start=1):
            fig.add_trace(_bar([r[key] for r in mine], name, x, colour, show=i == 1),
                          row=i, col=1)
        raw = [r[metric]["median"] for r in mine if r["variant"] == "raw"]
        ratios = [round(r[metric]["median"] / raw[0], 3) if raw else r.get("vs_raw")
                  for r in mine]
        fig.add_trace(go.Bar(name=name, x=x, y=ratios, marker_color=colour, legendgroup=name,
                             showlegend=False, text=[f"{v:.2f}" if v else "" for v in ratios],
                             textposition="outside"), row=len(panels) + 1, col=1)
    for i in range(1, len(panels) + 2):
        fig.update_xaxes(categoryorder="array", categoryarray=order, row=i, col=1)
    for i in range(1, len(panels) + 1):
        fig.update_yaxes(title_text="msg/s", row=i, col=1)
    fig.update_yaxes(title_text="× raw", row=len(panels) + 1, col=1)
    fig.update_layout(barmode="group", height=330 * (len(panels) + 1),
                      title=_title("Throughput: messages fully processed per second", data))
    return fig


def scale_figure(data: dict[str, Any]) -> go.Figure:
    """scale.py: lag and observer poll time over each window, produced vs committed, partitions."""
    a = data["args"]
    fig = make_subplots(rows=2, cols=2, vertical_spacing=0.15, horizontal_spacing=0.1,
                        subplot_titles=["total lag (messages) over the window",
                                        "produced vs committed msg/s",
                                        "observer snapshot time (ms)",
                                        "partitions and RSS per replica"],
                        specs=[[{}, {}], [{}, {"secondary_y": True}]])
    windows = [w for w in data.get("windows", []) if w.get("ok")]
    offset = 0.0  # windows follow one another: one continuous time axis
    for i, w in enumerate(windows):
        name = f"{w['rate']:.0f} msg/s"
        colour = WINDOW_COLOURS[i % len(WINDOW_COLOURS)]
        t = [offset + p["t"] for p in w["series"]]
        fig.add_trace(go.Scatter(x=t, y=[p["lag"] for p in w["series"]], mode="lines",
                                 name=f"lag @ {name}", legendgroup=name, line_color=colour),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=t, y=[p["poll_ms"] for p in w["series"]], mode="lines",
                                 name=f"snapshot @ {name}", legendgroup=name,
                                 line_color=colour, showlegend=False), row=2, col=1)
        offset = t[-1] if t else offset
    x = [f"{w['rate']:.0f}" for w in windows]
    fig.add_trace(go.Bar(name="produced", x=x, y=[w["produced_rate"] for w in windows],
                         marker_color="#7f7f7f"), row=1, col=2)
    fig.add_trace(go.Bar(name="committed", x=x, y=[w["committed_rate"] for w in windows],
                         marker_color="#2ca02c"), row=1, col=2)
    reps = data.get("replicas", [])
    names = [r["name"] for r in reps]
    fig.add_trace(go.Bar(name="partitions", x=names, y=[r["partitions"] for r in reps],
                         marker_color="#1f77b4"), row=2, col=2)
    fig.add_trace(go.Scatter(name="RSS MiB", x=names, y=[r["rss_mb"] for r in reps],
                             mode="markers", marker_color="#d62728"),
                  row=2, col=2, secondary_y=True)
    fig.update_xaxes(title_text="s since the first window", row=1, col=1)
    fig.update_xaxes(title_text="s since the first window", row=2, col=1)
    fig.update_xaxes(title_text="target rate msg/s", type="category", row=1, col=2)
    fig.update_yaxes(title_text="partitions", row=2, col=2)
    fig.update_yaxes(title_text="MiB", rangemode="tozero", row=2, col=2, secondary_y=True)
    fig.update_layout(barmode="group", height=760, title=_title(
        f"Scale: {a['streams']} streams / {a['partitions']} partitions / {a['replicas']} "
        f"replicas (joined in {data.get('join_s')} s)", data))
    return fig


def _upper(spreads: list[dict[str, float] | None], key: str = "median") -> dict[str, Any]:
    """Error bar from the median up to the max (rebalance/footprint report median and max)."""
    return {"type": "data", "symmetric": False,
            "array": [(s["max"] - s[key]) if s else 0 for s in spreads],
            "arrayminus": [(s[key] - s["min"]) if s and "min" in s else 0 for s in spreads]}


REBALANCE_COLUMNS = (("a_broker_s", "a: broker's new assignment", "#1f77b4"),
                     ("b_observer_s", "b: observer's snapshot shows it", "#ff7f0e"),
                     ("c_processed_s", "c: moved stream processed", "#2ca02c"))


def rebalance_figure(data: dict[str, Any]) -> go.Figure:
    """rebalance.py: seconds from kill -9 / graceful stop to a, b, c per assignor; moved."""
    rows = [r for r in data["table"] if r.get("reps")]
    events = list(dict.fromkeys(r["event"] for r in rows))
    titles = [f"after {'kill -9' if e == 'kill' else 'graceful stop' if e == 'stop' else e} "
              "(s, median, bar to max)" for e in events] + ["partitions moved (median)"]
    fig = make_subplots(rows=len(events) + 1, cols=1, vertical_spacing=0.1,
                        subplot_titles=titles)
    for i, ev in enumerate(events, start=1):
        mine = [r for r in rows if r["event"] == ev]
        x = [r["assignor"] for r in mine]
        for col, name, colour in REBALANCE_COLUMNS:
            spreads = [r.get(col) for r in mine]
            fig.add_trace(go.Bar(name=name, x=x, y=[s["median"] if s else None for s in spreads],
                                 marker_color=colour, legendgroup=col, showlegend=i == 1,
                                 error_y=_upper(spreads)), row=i, col=1)
        fig.update_yaxes(title_text="s", row=i, col=1)
    for ev, colour in zip(events, ("#9467bd", "#8c564b", "#7f7f7f"), strict=False):
        mine = [r for r in rows if r["event"] == ev]
        fig.add_trace(go.Bar(name=f"moved ({ev})", x=[r["assignor"] for r in mine],
                             y=[r["moved"]["median"] if r.get("moved") else None for r in mine],
                             marker_color=colour), row=len(events) + 1, col=1)
    fig.update_layout(barmode="group", height=330 * (len(events) + 1),
                      title=_title("Rebalance: from a replica's end to its partitions moving",
                                   data))
    return fig


def latency_figure(data: dict[str, Any]) -> go.Figure:
    """latency.py: produce → summary visible in a snapshot, p50/p90/p99 per rate, split."""
    rows = [r for r in data["results"] if r.get("latency_ms")]
    x = [f"{r['rate']:.0f} msg/s" + ("" if r.get("sustained", True) else " (not sustained)")
         for r in rows]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=["produce → visible in a snapshot (ms)",
                                        "median split: summarised, then shown (ms)"])
    for q, colour in (("p50", "#1f77b4"), ("p90", "#ff7f0e"), ("p99", "#d62728")):
        fig.add_trace(go.Bar(name=q, x=x, y=[r["latency_ms"][q] for r in rows],
                             marker_color=colour), row=1, col=1)
    for key, name, colour in (("summarised_ms", "produce → summary written", "#2ca02c"),
                              ("shown_ms", "summary written → shown", "#9467bd")):
        fig.add_trace(go.Bar(name=name, x=x,
                             y=[(r.get(key) or {}).get("p50") for r in rows],
                             marker_color=colour), row=1, col=2)
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_layout(barmode="group", height=480,
                      title=_title("Latency: a message from produce to the dashboard", data))
    return fig


def footprint_figure(data: dict[str, Any]) -> go.Figure:
    """footprint.py: start-up milestones of `groupscope up` and resident memory per role."""
    s = data["summary"]
    marks = dict(s.get("startup_s") or {})
    if s.get("start_replica_to_first_batch_s"):
        marks["start replica → first batch"] = s["start_replica_to_first_batch_s"]
    rss = {k: v for k, v in (s.get("rss_mb") or {}).items() if not k.startswith("replica:")}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.25,
                        subplot_titles=["seconds from launching `groupscope up` (median, "
                                        "min–max)", "resident memory MiB (median, bar to max)"])
    names = list(marks)
    fig.add_trace(go.Bar(name="start-up s", y=names, x=[marks[n]["median"] for n in names],
                         orientation="h", marker_color="#1f77b4",
                         error_x=_upper([marks[n] for n in names])), row=1, col=1)
    roles = list(rss)
    fig.add_trace(go.Bar(name="RSS MiB", y=roles, x=[rss[r]["median"] for r in roles],
                         orientation="h", marker_color="#2ca02c",
                         error_x=_upper([rss[r] for r in roles])), row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_layout(height=460, showlegend=False,
                      title=_title("Footprint and start-up", data))
    return fig


def _title(text: str, data: dict[str, Any]) -> str:
    load = data.get("load") or {}
    m = data.get("machine") or {}
    return (f"{text}<br><sup>{m.get('nproc', '?')} cores, load average "
            f"{load.get('min', '?')}–{load.get('max', '?')} (median {load.get('median', '?')})"
            "</sup>")


CHARTS: dict[str, tuple[str, Callable[[dict[str, Any]], go.Figure]]] = {
    "throughput": ("throughput.json", throughput_figure),
    "scale": ("scale.json", scale_figure),
    "rebalance": ("rebalance.json", rebalance_figure),
    "latency": ("latency.json", latency_figure),
    "footprint": ("footprint.json", footprint_figure),
}


def write(fig: go.Figure, out: Path, name: str, png: bool) -> list[Path]:
    """HTML that loads ./plotly.min.js (written once, by the first page), PNG if possible."""
    out.mkdir(parents=True, exist_ok=True)
    html = out / f"{name}.html"
    fig.write_html(html, include_plotlyjs="directory", full_html=True)
    written = [html]
    if png:
        fig.write_image(out / f"{name}.png", width=1100, height=fig.layout.height or 700)
        written.append(out / f"{name}.png")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--out", type=Path, default=HERE / "charts")
    ap.add_argument("--only", help="comma-separated chart names (default: all)")
    args = ap.parse_args(argv)
    png = importlib.util.find_spec("kaleido") is not None
    if not png:
        print("charts: kaleido is not installed: HTML only")
    wanted = args.only.split(",") if args.only else list(CHARTS)
    for name in wanted:
        if name not in CHARTS:
            print(f"charts: unknown chart {name!r}; known: {', '.join(CHARTS)}", file=sys.stderr)
            return 2
        source, build = CHARTS[name]
        path = args.results / source
        if not path.exists():
            print(f"charts: skip {name}: no {path}")
            continue
        try:
            fig = build(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"charts: skip {name}: {path} has an unexpected shape ({exc!r})")
            continue
        for p in write(fig, args.out, name, png):
            print(f"charts: wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
