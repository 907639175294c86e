"""Plotly figure builders: pure functions from view-model data to figures.

Every figure sets `uirevision`, so a zoom or a hidden legend entry survives the once-a-second
refresh, and takes already-bounded inputs (see live_model.MAX_POINTS). Colours of replicas
come from theme.replica_colour, so a replica looks the same in every chart.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.contracts import ClusterEventType, Snapshot
from dashboard.history_model import LagSeries, Shade
from dashboard.live_model import SMOOTH_S, SeriesPoint
from dashboard.theme import BROKER_DOWN, BROKER_UP, REBALANCE_FILL, broker_colour, replica_colour

FONT = {"size": 16}
PRODUCED_COLOUR = "#6b7280"
PROCESSED_COLOUR = "#2563eb"
RAW_OPACITY = 0.35


def _base_layout(fig: go.Figure, revision: str, height: int) -> go.Figure:
    fig.update_layout(
        uirevision=revision, height=height, font=FONT,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.08, "x": 0},
        hovermode="x unified",
    )
    return fig


def local_ms(ms: int) -> int:
    """Epoch ms shifted to the server's local time: Plotly draws epoch numbers as UTC."""
    return ms + time.localtime(ms / 1000.0).tm_gmtoff * 1000


def throughput_lag_figure(points: Sequence[SeriesPoint],
                          periods: Sequence[tuple[int, int, bool]],
                          revision: str = "live", smooth_s: float = SMOOTH_S) -> go.Figure:
    """Messages/s in and out on top, total lag below; rebalances shaded across both.

    Each rate is drawn twice: the moving average (`smooth_s`) bold, which is what the room
    reads, and the raw poll-to-poll rate thin and faint behind it, which shows the micro-batch
    rhythm without turning it into 0 / 800 msg/s spikes. A raw line shares its average's
    legend entry (one click hides both) and stays out of the hover box.

    Built in one go from plain dicts (two y-axis domains, one shape per rebalance) instead of
    make_subplots/add_vrect, which validate every step and cost ~100 ms per refresh.
    """
    xs = [local_ms(p.ts) for p in points]
    avg = f"{smooth_s:g} s avg"
    data = [
        {"type": "scatter", "x": xs, "y": [p.produced_per_s for p in points],
         "name": "produced, raw", "legendgroup": "produced", "showlegend": False,
         "hoverinfo": "skip", "mode": "lines", "opacity": RAW_OPACITY,
         "line": {"width": 1.5, "color": PRODUCED_COLOUR}},
        {"type": "scatter", "x": xs, "y": [p.consumed_per_s for p in points],
         "name": "processed, raw", "legendgroup": "processed", "showlegend": False,
         "hoverinfo": "skip", "mode": "lines", "opacity": RAW_OPACITY,
         "line": {"width": 1.5, "color": PROCESSED_COLOUR}},
        {"type": "scatter", "x": xs, "y": [p.produced_avg_per_s for p in points],
         "name": "produced", "legendgroup": "produced", "mode": "lines",
         "line": {"width": 4, "color": PRODUCED_COLOUR}},
        {"type": "scatter", "x": xs, "y": [p.consumed_avg_per_s for p in points],
         "name": "processed", "legendgroup": "processed", "mode": "lines",
         "line": {"width": 4, "color": PROCESSED_COLOUR}},
        {"type": "scatter", "x": xs, "y": [p.lag for p in points], "name": "lag",
         "mode": "lines", "fill": "tozeroy", "line": {"width": 3, "color": "#dc2626"},
         "yaxis": "y2"},
    ]
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": local_ms(a),
               "x1": local_ms(b), "y0": 0, "y1": 1, "fillcolor": REBALANCE_FILL,
               "line": {"width": 0}, "layer": "below"} for a, b, _ in periods]
    notes = [{"x": local_ms(b), "y": 1, "xref": "x", "yref": "paper", "text": "rebalancing…",
              "showarrow": False, "xanchor": "right", "font": {"color": "#ea580c"}}
             for _, b, finished in periods if not finished]
    notes += [{"text": t, "x": 0, "y": y, "xref": "paper", "yref": "paper",
               "showarrow": False, "xanchor": "left", "yanchor": "bottom"}
              for t, y in ((f"messages per second (bold: {avg}, faint: raw)", 1.0),
                           ("lag (messages)", 0.42))]
    layout = {
        "uirevision": revision, "height": 420, "font": FONT,
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "legend": {"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"},
        "hovermode": "x unified",
        "xaxis": {"type": "date", "anchor": "y2"},
        "yaxis": {"domain": [0.52, 0.98], "rangemode": "tozero"},
        "yaxis2": {"domain": [0.0, 0.40], "rangemode": "tozero"},
        "shapes": shapes, "annotations": notes,
    }
    return go.Figure(data=data, layout=layout)


H = TypeVar("H")  # who holds a partition in a swimlane: a replica's name, a broker's id


def _lanes(history: Sequence[Snapshot], holders: Callable[[Snapshot], Iterable[tuple[int, H]]],
           ) -> dict[H, list[tuple[int, int, int]]]:
    """holder -> its (partition, from ms, to ms) spans over `history`, from what `holders`
    says of each snapshot ((partition, holder) pairs; a partition it leaves out keeps its
    span going). A span ends where its partition's holder changes, the last one at the
    newest snapshot; a failed snapshot changes nothing."""
    segments: dict[H, list[tuple[int, int, int]]] = {}
    open_: dict[int, tuple[H, int]] = {}
    last_ts = history[-1].taken_ms if history else 0
    for s in history:
        if s.error:
            continue
        for p, holder in holders(s):
            cur = open_.get(p)
            if cur is None:
                open_[p] = (holder, s.taken_ms)
            elif cur[0] != holder:
                segments.setdefault(cur[0], []).append((p, cur[1], s.taken_ms))
                open_[p] = (holder, s.taken_ms)
    for p, (holder, since) in open_.items():
        segments.setdefault(holder, []).append((p, since, last_ts))
    return segments


def ownership_figure(history: Sequence[Snapshot], revision: str = "timeline") -> go.Figure:
    """Swimlanes: one row per partition, coloured by owner over time, rebalances shaded."""
    segments = _lanes(history, lambda s: [(pv.partition, pv.owner) for pv in s.partitions])
    fig = go.Figure()
    for owner in sorted(segments, key=lambda o: (o is None, o or "")):
        segs = segments[owner]
        fig.add_trace(go.Bar(
            y=[f"P{p}" for p, _, _ in segs], x=[max(1, b - a) for _, a, b in segs],
            base=[local_ms(a) for _, a, _ in segs], orientation="h",
            name=owner or "unowned", marker_color=replica_colour(owner),
            hovertemplate=f"{owner or 'unowned'}<extra></extra>",
        ))
    if history:
        for r in history[-1].rebalances:
            end = r.end_ms if r.end_ms is not None else history[-1].taken_ms
            fig.add_vrect(x0=local_ms(r.start_ms), x1=local_ms(end),
                          fillcolor=REBALANCE_FILL, line_width=0, layer="above")
    parts = sorted({pv.partition for s in history[-1:] for pv in s.partitions})
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(type="date")
    fig.update_yaxes(categoryorder="array", categoryarray=[f"P{p}" for p in reversed(parts)])
    return _base_layout(fig, revision, max(250, 34 * len(parts) + 80))


def leadership_figure(history: Sequence[Snapshot], revision: str = "leaders") -> go.Figure:
    """Swimlanes of Kafka's side: one row per partition, coloured by its leader broker over
    time (grey: no leader), with brokers going down (red) and up (green) as vertical lines.

    Built from plain dicts, like the throughput figure: one bar trace per broker."""
    # a partition without replicas was not read in that poll: its leader is not known
    segments = _lanes(history, lambda s: [(pv.partition, pv.leader) for pv in s.partitions
                                          if pv.replicas])
    data = []
    for leader in sorted(segments, key=lambda b: (b is None, b or 0)):
        segs = segments[leader]
        name = "no leader" if leader is None else f"broker {leader}"
        data.append({"type": "bar", "orientation": "h", "name": name,
                     "y": [f"P{p}" for p, _, _ in segs],
                     "x": [max(1, b - a) for _, a, b in segs],
                     "base": [local_ms(a) for _, a, _ in segs],
                     "marker": {"color": broker_colour(leader)},
                     "hovertemplate": f"leader: {name}<extra></extra>"})
    shapes, notes = [], []
    for ev in history[-1].cluster_events if history else ():
        down = ev.type == ClusterEventType.BROKER_DOWN
        if not (down or ev.type == ClusterEventType.BROKER_UP) or ev.ts < history[0].taken_ms:
            continue
        colour = BROKER_DOWN if down else BROKER_UP
        x = local_ms(ev.ts)
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x,
                       "y0": 0, "y1": 1, "line": {"color": colour, "width": 2, "dash": "dash"}})
        notes.append({"x": x, "y": 1, "xref": "x", "yref": "paper", "showarrow": False,
                      "yanchor": "bottom", "font": {"color": colour},
                      "text": f"broker {','.join(map(str, ev.brokers))} "
                              f"{'down' if down else 'up'}"})
    parts = sorted({pv.partition for s in history[-1:] for pv in s.partitions})
    layout = {
        "uirevision": revision, "height": max(250, 34 * len(parts) + 80), "font": FONT,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "barmode": "overlay", "bargap": 0.25,
        "legend": {"orientation": "h", "y": 1.12, "x": 0}, "hovermode": "closest",
        "xaxis": {"type": "date"},
        "yaxis": {"categoryorder": "array",
                  "categoryarray": [f"P{p}" for p in reversed(parts)]},
        "shapes": shapes, "annotations": notes,
    }
    return go.Figure(data=data, layout=layout)


def moves_figure(moved: Sequence[tuple[int, str | None, str | None]],
                 revision: str = "moves") -> go.Figure:
    """Sankey of one rebalance: replica before → replica after, one unit per partition."""
    left = sorted({a or "unowned" for _, a, _ in moved})
    right = sorted({b or "unowned" for _, _, b in moved})
    labels = [f"{n} (before)" for n in left] + [f"{n} (after)" for n in right]
    colours = [replica_colour(None if n == "unowned" else n) for n in left + right]
    flows: dict[tuple[int, int], list[int]] = {}
    for p, a, b in moved:
        key = (left.index(a or "unowned"), len(left) + right.index(b or "unowned"))
        flows.setdefault(key, []).append(p)
    fig = go.Figure(go.Sankey(
        node={"label": labels, "color": colours, "pad": 18, "thickness": 22},
        link={"source": [k[0] for k in flows], "target": [k[1] for k in flows],
              "value": [len(v) for v in flows.values()],
              "label": [", ".join(f"P{p}" for p in v) for v in flows.values()]},
    ))
    return _base_layout(fig, revision, 320)


MIN_SHADE_FRACTION = 1 / 200  # of the span: a rebalance of a second still shows in a week


def memory_lag_figure(series: LagSeries, bands: Sequence[Shade], since_ms: int, until_ms: int,
                      shown_start: int | None = None, revision: str = "memory") -> go.Figure:
    """A group's lag over the span from the memory, each rebalance a band in its cause's
    colour (one legend entry per cause, its words and evidence on hover), the episode the
    card shows outlined.

    Bands are bars on a hidden 0..1 axis under the lag's, so they cover the chart's height
    and answer hover like any trace (a layout shape cannot). The span's ends are an
    invisible trace rather than an axis range: a range in the figure would undo the user's
    zoom at every refresh, which `uirevision` otherwise keeps."""
    least = max(1, int((until_ms - since_ms) * MIN_SHADE_FRACTION))
    data: list[dict] = []
    by_cause: dict[str, list[Shade]] = {}
    for band in bands:
        by_cause.setdefault(band.cause, []).append(band)
    for cause, group in by_cause.items():
        widths = [max(least, b.end_ms - b.start_ms) for b in group]
        data.append({
            "type": "bar", "name": cause, "yaxis": "y", "opacity": 0.35,
            "x": [local_ms(b.start_ms) + w // 2 for b, w in zip(group, widths, strict=True)],
            "width": widths, "y": [1] * len(group), "base": 0,
            "marker": {"color": group[0].colour, "line": {"width": 0}},
            "hovertext": ["<br>".join(html.escape(line) for line in b.hover) for b in group],
            "hovertemplate": "%{hovertext}<extra></extra>"})
    data.append({"type": "scatter", "x": [local_ms(since_ms), local_ms(until_ms)], "y": [0, 0],
                 "yaxis": "y2", "mode": "markers", "marker": {"opacity": 0},
                 "hoverinfo": "skip", "showlegend": False})
    data.append({"type": "scatter", "name": "lag", "yaxis": "y2", "mode": "lines",
                 "x": [local_ms(t) for t in series.times], "y": series.lags,
                 "connectgaps": False, "line": {"width": 2, "color": "#1f2937"},
                 "hovertemplate": "lag %{y:,}<extra></extra>"})
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1,
               "x0": local_ms(b.start_ms),
               "x1": local_ms(b.start_ms + max(least, b.end_ms - b.start_ms)),
               "line": {"width": 2, "dash": "dot", "color": "#111827"}}
              for b in bands if b.start_ms == shown_start]
    layout = {
        "uirevision": revision, "height": 340, "font": FONT,
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10}, "barmode": "overlay",
        "legend": {"orientation": "h", "y": 1.12, "x": 0}, "hovermode": "closest",
        "xaxis": {"type": "date"},
        "yaxis": {"range": [0, 1], "visible": False, "fixedrange": True},
        "yaxis2": {"overlaying": "y", "side": "left", "rangemode": "tozero",
                   "title": {"text": "lag (messages)"}},
        "shapes": shapes,
    }
    return go.Figure(data=data, layout=layout)


def deliveries_figure(counts: dict[int, int], revision: str = "deliveries") -> go.Figure:
    """Records summarised per Kafka delivery count (1: first delivery; 2 and up: came back
    after a member died or its lock ran out)."""
    fig = go.Figure(go.Bar(x=[str(k) for k in counts], y=list(counts.values()),
                           marker_color=PROCESSED_COLOUR, text=list(counts.values()),
                           textposition="outside"))
    fig.update_xaxes(title="delivery count", type="category")
    fig.update_yaxes(title="records", rangemode="tozero")
    return _base_layout(fig, revision, 260)


def window_figure(windows: Sequence[dict], fields: Sequence[str],
                  revision: str = "stream") -> go.Figure:
    """One stream's tumbling-window aggregates: a line per field (mean per window)."""
    fig = make_subplots(rows=len(fields), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=list(fields))
    xs = [local_ms(int(w.get("start_ms") or w.get("start") or 0)) for w in windows]
    for i, name in enumerate(fields, start=1):
        ys = [_window_mean(w, name) for w in windows]
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers"), row=i, col=1)
    fig.update_layout(showlegend=False)
    fig.update_xaxes(type="date")
    return _base_layout(fig, revision, 180 * len(fields) + 40)


def _window_mean(window: dict, name: str) -> float | None:
    stats = window.get(name) or (window.get("fields") or {}).get(name)
    if isinstance(stats, dict):
        count = stats.get("count") or stats.get("n")
        total = stats.get("sum")
        if count and total is not None:
            return float(total) / float(count)
        return stats.get("mean")
    return stats if isinstance(stats, int | float) else None
