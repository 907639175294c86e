"""Streams page: the Spark summaries per stream, sortable, with sparklines and a detail chart."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard.context import current_context
from dashboard.figures import window_figure
from dashboard.pollers import observer_for
from dashboard.streams_model import stream_rows

ctx = current_context(st.session_state)
st.title("Streams")
st.caption(f"Per-stream summaries from the changelog of {ctx.group}: the state the replicas "
           f"computed with Spark. Duplicates and gaps prove nothing was lost or counted twice.")


@st.fragment(run_every=2.0)
def _table() -> None:
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    if shared.error:
        st.error(shared.error)
        return
    summaries = shared.summaries()
    if not summaries:
        st.info("No summaries yet: they appear once a replica has processed a batch "
                "(only for groups groupscope runs).")
        return
    rows = stream_rows(summaries, int(time.time() * 1000))
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
