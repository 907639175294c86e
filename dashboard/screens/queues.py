"""Queues page: the consumer group and the share group (KIP-932) on the same topic, side by
side, with the presenter's controls for both and each car's proof."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from backend.contracts.control import MAX_REPLICAS
from dashboard import presenter
from dashboard.context import current_context
from dashboard.controls import (
    action_button,
    call_control,
    disabled_reason,
    show_answer,
    supervisor_status,
    widget,
)
from dashboard.figures import deliveries_figure
from dashboard.live_model import feed_items
from dashboard.pollers import observer_for, queue_poller
from dashboard.presenter import Role
from dashboard.queues_model import (
    ack_rates,
    car_rows,
    consumer_rows,
    deliveries,
    rates,
    share_beats,
    share_rows,
    summarised_by,
)

ctx = current_context(st.session_state)
st.title("Queues")
st.caption(f"The consumer group {ctx.group} and a share group on the same topic "
           f"{ctx.topic}: scale both past the partitions, kill a replica in each, and "
           "compare what each car's summary proves.")

with st.container(border=True, key="queue-lesson"):
    left, right = st.columns(2)
    left.markdown(
        "**Consumer group**: each partition belongs to exactly one member. A car's records "
        "stay in order, because they live in one partition; replicas beyond the partition "
        "count sit idle. Choose it when order per key matters.")
    right.markdown(
        "**Share group** (queues, KIP-932): members take records of the same partitions "
        "and acknowledge each one. Every replica works, a dead member's records come back "
        "to another after the lock time, and order per car is gone. Choose it for "
        "parallelism beyond the partitions, one record at a time. librdkafka's share "
        "consumer is a Preview.")


def _scale_both() -> None:
    """Scale both groups to the numbers typed (the Scale button's callback)."""
    n_cg, n_sg = int(widget("q_cg_n") or 0), int(widget("q_sg_n") or 0)
    call_control(f"scale consumer group to {n_cg}", lambda c: c.scale(n_cg))
    call_control(f"scale share group to {n_sg}", lambda c: c.share_scale(n_sg))


def _kill() -> None:
    """Kill the chosen replica of either group (the Kill button's callback)."""
    kind, _, name = str(widget("q_victim") or "").partition("/")
    if kind == "share":
        call_control(f"kill {name} (share group)", lambda c: c.share_kill(name))
    elif name:
        call_control(f"kill {name}", lambda c: c.kill(name))


@st.fragment(run_every=2.0)
def _controls() -> None:
    if presenter.session_role() is not Role.PRESENTER:
        return
    reading, status = supervisor_status()
    reason = disabled_reason(ctx, reading)
    off = reason is not None
    if reason:
        st.caption(reason)
    cg = [r.name for r in status.running] if status else []
    sg = [r.name for r in status.share.running] if status and status.share else []
    cols = st.columns(4)
    cols[0].number_input("consumer replicas", 0, MAX_REPLICAS, len(cg), disabled=off,
                         key="q_cg_n")
    cols[1].number_input("share replicas", 0, MAX_REPLICAS, len(sg), disabled=off,
                         key="q_sg_n")
    action_button(cols[2], "Scale both", "q_scale", _scale_both, disabled=off)
    victims = [f"consumer/{n}" for n in cg] + [f"share/{n}" for n in sg]
    cols[3].selectbox("kill", victims or ["(none)"], disabled=off or not victims, key="q_victim")
    action_button(st, "Kill", "q_kill", _kill, disabled=off or not victims,
                  help="SIGKILL: the consumer group waits for the session timeout; the share "
                       "group's records come back after the lock time")
    show_answer()


@st.fragment(run_every=2.0)
def _side_by_side() -> None:
    _, status = supervisor_status()
    if status is None:
        st.info("No supervisor answers: the side-by-side view needs `groupscope up`.")
        return
    share = status.share
    reading = queue_poller(ctx.target, share.group).latest(wait_s=3.0) if share else None
    queue = reading.value if reading is not None and reading.ok and reading.value else {}
    now = time.monotonic()
    counts = summarised_by(queue)
    before = st.session_state.get("q_counts")
    speed = rates(before[1], counts, now - before[0]) if before else {}
    if not before or now - before[0] >= 4.0:
        st.session_state["q_counts"] = (now, counts)
    left, right = st.columns(2)
    with left.container(border=True, key="q-consumer"):
        rows = consumer_rows(status.running)
        idle = sum(not r["working"] for r in rows)
        st.subheader(f"Consumer group {status.group}")
        st.caption(f"{len(rows)} replicas on {status.partitions or '?'} partitions"
                   + (f": **{idle} idle**, no partition to own" if idle else ""))
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                         key="q_consumer_table")
    with right.container(border=True, key="q-share"):
        rows = share_rows(share.running, queue, speed) if share else []
        working = sum(r["working"] for r in rows)
        st.subheader(f"Share group {share.group if share else '?'}")
        st.caption(f"{len(rows)} replicas, {working} of them have summarised records"
                   + (f"; {share.members} members" if share else ""))
        if reading is not None and not reading.ok:
            st.caption(f"Deltas unavailable: {reading.error}")
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                         key="q_share_table")
        else:
            st.caption("No share replica runs: scale the share group above.")
    if share:
        _acknowledgements(share.group, queue)
    consumer = observer_for(ctx.target, ctx.group, ctx.topic).summaries()
    cars = car_rows(consumer, queue)
    if cars:
        box = st.container(key="q-cars")
        box.subheader("Each car's proof")
        late = sum(r["share group: out of order"] or 0 for r in cars)
        box.caption(f"The share group summarised {late:,} records after a higher seq of the "
                   "same car; the consumer group reads each car's partition in order (a "
                   "lower seq would show as a duplicate or gap). Lost or in flight: seqs "
                   "below the highest that no replica has summarised yet.")
        box.dataframe(pd.DataFrame(cars), hide_index=True, width="stretch", key="q_cars")


def _acknowledgements(group: str, queue: dict) -> None:
    """The share group's acknowledgements per replica (its heartbeats), the delivery counts
    of what was summarised (Spark's) and the latest redeliveries (its events)."""
    snap = observer_for(ctx.target, group, ctx.topic).latest()
    events = snap.events if snap is not None else ()
    with st.container(border=True, key="q-acks"):
        st.subheader("Acknowledgements")
        left, right = st.columns(2)
        beats = share_beats(events)  # the observer keeps each replica's newest only
        acks = {**st.session_state.get("q_acks", {}),
                **ack_rates(st.session_state.get("q_beats", {}), beats)}
        acks = {n: r for n, r in acks.items() if n in beats}  # a replica gone is left out
        st.session_state["q_beats"], st.session_state["q_acks"] = beats, acks
        if acks:
            left.dataframe(pd.DataFrame([{"replica": n, **{k: round(v, 1) for k, v in r.items()}}
                                         for n, r in sorted(acks.items())]),
                           hide_index=True, width="stretch", key="q_ack_table")
            left.caption("records/s each replica acknowledged: accepted once its summary is "
                         "written, released after a failed batch, rejected as malformed "
                         "(dead-lettered); redelivered: taken again after another's lock ran "
                         "out; in flight: records it held acquired but not yet acknowledged, "
                         "on average")
        counts = deliveries(queue)
        if counts:
            right.plotly_chart(deliveries_figure(counts, revision=f"deliveries-{group}"),
                               key="q_deliveries")
        again = [i for i in feed_items(events) if i.kind == "redelivered"][:8]
        for item in again:
            st.caption(item.text)


_controls()
_side_by_side()
