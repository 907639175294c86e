"""Timeline page: every rebalance (duration, who joined and left, which partitions moved, the
processing gap), ownership over time as swimlanes, and a scrubber back through snapshots."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard import live_model as lm
from dashboard.context import current_context
from dashboard.figures import leadership_figure, moves_figure, ownership_figure
from dashboard.panels import lanes_html
from dashboard.pollers import observer_for
from dashboard.views.live import header_badges

ctx = current_context(st.session_state)
st.title("Timeline")


def _t(ms: int | None) -> str:
    return "…" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


@st.fragment(run_every=2.0)
def _rebalances() -> None:
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    snap = shared.latest(wait_s=5.0)
    if snap is None:
        if shared.error:
            st.error(shared.error)
        else:
            st.info("Waiting for the observer…")
        return
    history = shared.history()
    st.markdown(f"#### Ownership of `{snap.topic or '?'}` over time")
    if history:
        st.plotly_chart(ownership_figure(history, revision=f"own-{ctx.group}"),
                        key="ownership", config={"displayModeBar": False})
    st.markdown(f"#### Rebalances of {ctx.group} ({len(snap.rebalances)})")
    if not snap.rebalances:
        st.caption("No rebalance seen since the dashboard started watching.")
        return
    rows = [{
        "start": _t(r.start_ms), "end": _t(r.end_ms),
        "duration s": None if r.end_ms is None else round((r.end_ms - r.start_ms) / 1000, 1),
        "generation": r.generation, "joined": ", ".join(r.joined), "left": ", ".join(r.left),
        "partitions moved": len(r.moved),
        "processing gap s": None if r.gap_ms is None else round(r.gap_ms / 1000, 1),
        "seen as": r.reason,
    } for r in reversed(snap.rebalances)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="rebalance_table")
    if any(r.reason == "rejoin" for r in snap.rebalances):
        st.caption("rejoin: a static member (group.instance.id) restarted within its session "
                   "and came back in the same generation with the same partitions: no "
                   "rebalance, nothing moved.")
    labels = [f"{row['start']} gen {row['generation']}" for row in rows]
    pick = st.selectbox("rebalance", range(len(labels)), format_func=lambda i: labels[i],
                        key="rebalance_pick")
    r = list(reversed(snap.rebalances))[pick]
    if r.moved:
        st.plotly_chart(moves_figure(r.moved, revision=f"moves-{r.start_ms}"), key="moves")
        st.caption(" · ".join(f"P{p}: {a or 'nobody'} → {b or 'nobody'}" for p, a, b in r.moved))
    else:
        st.caption("No partition changed owner in this rebalance.")


_rebalances()


@st.fragment(run_every=2.0)
def _kafka() -> None:
    """Leaders over time and Kafka's changes, on a cluster of more than one broker."""
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    snap = shared.latest()
    if snap is None or not lm.multi_broker(snap.brokers):
        return
    st.markdown(f"#### Leaders of `{snap.topic or '?'}` over time")
    st.plotly_chart(leadership_figure(shared.history(), revision=f"leaders-{ctx.group}"),
                    key="leaders", config={"displayModeBar": False})
    items = sorted(lm.cluster_feed_items(snap.cluster_events), key=lambda i: i.ts,
                   reverse=True)
    st.markdown(f"#### Kafka changes ({len(items)})")
    if not items:
        st.caption("No broker, leader or ISR change seen since the dashboard started watching.")
        return
    st.dataframe(pd.DataFrame([{"time": _t(i.ts), "change": i.text} for i in items]),
                 hide_index=True, width="stretch", key="kafka_changes")


_kafka()

st.markdown("#### Scrub back")
shared = observer_for(ctx.target, ctx.group, ctx.topic)
history = shared.history()
if len(history) < 2:
    st.caption("Not enough snapshots stored yet.")
else:
    idx = st.slider("snapshot", 0, len(history) - 1, len(history) - 1, key="scrub",
                    format="%d", help="the observer keeps the last snapshots in memory")
    old = history[idx]
    age = (history[-1].taken_ms - old.taken_ms) / 1000
    st.markdown(f"**{_t(old.taken_ms)}** ({age:.0f} s before the newest) · "
                f"{header_badges(old)} · lag {old.total_lag:,}")
    if old.partitions:
        st.html(lanes_html(old))
