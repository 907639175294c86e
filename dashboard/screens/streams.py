"""Streams page: the Spark summaries per stream, sortable, with sparklines and a detail chart.

A consumer group's come from its summaries changelog; a share group's are its folded deltas
(`queue_poller`), with each car's out-of-order arrivals. Beside the stack's own consumer
group runs a share group on the same topic: each car's out-of-order count there is shown
next to the consumer group's, which reads a car's one partition in order."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard import live_model as lm
from dashboard.context import current_context
from dashboard.controls import supervisor_status
from dashboard.figures import window_figure
from dashboard.pollers import observer_for, queue_poller
from dashboard.streams_model import queue_rows, stream_rows, with_share_order
from dashboard.views.replay import replay_panel

ctx = current_context(st.session_state)
st.title("Streams")
st.caption(f"Per-stream summaries of {ctx.group}: the state its replicas computed with "
           "Spark. Duplicates and gaps prove nothing was lost or counted twice.")


def _queue(group: str) -> dict:
    """A share group's per-car summaries, {} until its deltas are read."""
    reading = queue_poller(ctx.target, group).latest(wait_s=3.0)
    return reading.value if reading is not None and reading.ok and reading.value else {}


def _share_beside() -> tuple[str, dict] | None:
    """The share group the stack runs beside its consumer group, and its summaries."""
    if ctx.read_only or ctx.watching:
        return None
    _, status = supervisor_status()
    share = status.share if status is not None else None
    return (share.group, _queue(share.group)) if share is not None else None


@st.fragment(run_every=2.0)
def _table() -> None:
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    if shared.error:
        st.error(shared.error)
        return
    snap = shared.latest(wait_s=3.0)
    now_ms = int(time.time() * 1000)
    if snap is not None and lm.is_share(snap):
        queue = _queue(ctx.group)
        summaries = {car: {"windows": [w.to_dict() for w in q.windows]}
                     for car, q in queue.items()}
        rows = queue_rows(queue, now_ms)
        order = ("A share group: any member may take any record, so a car's records arrive "
                 "out of order (a lower seq after a higher one) and some are delivered "
                 "again; gaps are seqs nobody has summarised yet, in flight or lost.")
    else:
        summaries = shared.summaries()
        rows = stream_rows(summaries, now_ms)
        order = ("Each car's records arrive in order: one partition, read by one replica at "
                 "a time (what a rebalance replays shows as duplicates).")
        beside = _share_beside() if rows else None
        if beside and beside[1]:
            rows = with_share_order(rows, beside[1])
            late = sum(r["share group: out of order"] or 0 for r in rows)
            order += (f" The share group {beside[0]} on the same topic has had {late:,} "
                      "records arrive out of order.")
    if not rows:
        st.info("No summaries yet: they appear once a replica has processed a batch "
                "(only for groups groupscope runs).")
        return
    st.caption(order)
    df = pd.DataFrame(rows)
    bad = int((df["gaps"] > 0).sum() + (df["duplicates"] > 0).sum())
    c = st.columns(4)
    c[0].metric("streams", len(df))
    c[1].metric("messages summarised", f"{int(df['count'].sum()):,}")
    c[2].metric("duplicates", int(df["duplicates"].sum()))
    c[3].metric("gaps", int(df["gaps"].sum()))
    if bad:
        st.warning(f"{bad} stream(s) show duplicates or gaps.")
    st.dataframe(
        df, hide_index=True, width="stretch", key="streams_table",
        column_config={
            "speed": st.column_config.LineChartColumn("speed (recent windows)", width="medium"),
            "mean speed": st.column_config.NumberColumn(format="%.1f"),
            "max speed": st.column_config.NumberColumn(format="%.1f"),
            "mean rpm": st.column_config.NumberColumn(format="%.0f"),
            "mean temp °C": st.column_config.NumberColumn(format="%.1f"),
            "max temp °C": st.column_config.NumberColumn(format="%.1f"),
        })
    choice = st.selectbox("detail for stream", [r["stream"] for r in rows], key="stream_pick")
    summary = summaries.get(choice) or {}
    windows = summary.get("windows") or []
    if windows:
        st.plotly_chart(window_figure(windows, ("speed_kmh", "rpm", "engine_temp_c"),
                                      revision=f"stream-{choice}"), key="stream_detail")
    else:
        st.caption("No window aggregates for this stream yet.")


_table()
replay_panel(ctx)
