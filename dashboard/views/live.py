"""The Live view: one fragment per panel, each refreshing itself from the shared observer.

Used by the Live page (with controls) and the Watch page (read-only). Page code never talks
to Kafka: it reads the shared observer's latest Snapshot and history, both immutable.
"""

from __future__ import annotations

import time

import streamlit as st

from backend.contracts import Snapshot
from dashboard import live_model as lm
from dashboard.context import ViewContext
from dashboard.figures import throughput_lag_figure
from dashboard.panels import cards_html, lanes_html
from dashboard.pollers import Reading, cluster_poller, observer_for
from dashboard.theme import HEALTH_COLOURS, STATE_COLOURS
from dashboard.views.brokers import brokers_panel
from dashboard.views.room import join_panel, leaderboard_panel
from dashboard.views.supervised import supervised_replicas

REFRESH_S = 1.0
# Ownership is what moves in a rebalance; the lanes are cheap to draw, so refresh them twice
# as often (matching the observer's 0.5 s poll).
LANES_REFRESH_S = 0.5
# The chart's bold lines are moving averages over lm.SMOOTH_S, so a redraw every second added
# little, yet it was the browser's dearest work: Plotly took ~0.2 s of Chromium's CPU per
# second on the Live page (a CDP profile), 0.09 s at this period.
CHART_REFRESH_S = 2.0


def _snapshot(ctx: ViewContext, wait_s: float = 0.0) -> Snapshot | None:
    return observer_for(ctx.target, ctx.group, ctx.topic).latest(wait_s=wait_s)


def _own(ctx: ViewContext, snap: Snapshot) -> bool:
    """Is this a groupscope group, whose members are replicas with heartbeats and dead
    letters? The Live page's group is the stack's own; another is if its replicas' events
    topic exists (the cluster poller's topic list, already read for the Watch page)."""
    if not ctx.read_only and not ctx.watching:
        return True
    if snap.events:
        return True
    reading: Reading | None = cluster_poller(ctx.target).latest()
    cluster = (reading.value or reading.last_ok) if reading is not None else None
    return lm.is_own_group(ctx.group, (t.name for t in cluster.topics) if cluster else ())


def _waiting(ctx: ViewContext) -> None:
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    if shared.error:
        st.error(shared.error, icon=":material/cloud_off:")
    else:
        st.info(f"Waiting for the first snapshot of {ctx.group}…")


def header_badges(snap: Snapshot) -> str:
    state = snap.state or "Unknown"
    proto = snap.protocol + (f" / {snap.assignor}" if snap.assignor else "")
    gen = "–" if snap.generation is None else str(snap.generation)
    return (f":{STATE_COLOURS.get(state, 'gray')}-badge[{state}] "
            f":blue-badge[{proto}] "
            f":{HEALTH_COLOURS.get(snap.health, 'gray')}-badge[health {snap.health}]"
            f" {lm.generation_label(snap.protocol)} **{gen}**"
            + ("" if snap.target_epoch is None else f" · target epoch **{snap.target_epoch}**"))


# ---- drawing from data (no I/O): also what bench/dashboard_refresh.py times -------------

def draw_header(snap: Snapshot, where: str = "", own: bool = True) -> None:
    """Badges and tiles. Only a groupscope group (`own`) has replicas and a dead-letter
    topic; any other group has members and no dead-letter tile."""
    st.markdown(f"### {snap.group} {header_badges(snap)}")
    if snap.error:
        at = f" at {where}" if where else ""
        st.error(f"Kafka{at}: {snap.error} (retrying every second)", icon=":material/cloud_off:")
    live = [m for m in snap.members if m.alive]
    noun = lm.member_noun(own)
    c = st.columns(6 if own else 5)
    c[0].metric(f"{noun}s", len(live))
    c[1].metric("partitions", snap.partition_count or len(snap.partitions))
    c[2].metric("streams", len(snap.streams))
    c[3].metric("rebalances", len(snap.rebalances))
    c[4].metric("total lag", f"{snap.total_lag:,}")
    if own:
        c[5].metric("dead letters", f"{lm.dead_letter_total(snap):,}",
                    help="Malformed input records set aside on the dead-letter topic, as "
                         "counted by the live replicas' latest heartbeats (a restarted "
                         "replica counts anew).")
    warning = lm.idle_warning(snap, noun)
    if warning:
        st.warning(warning, icon=":material/bedtime:")


def draw_lanes(snap: Snapshot, history: tuple = (), supervised: tuple = ()) -> None:
    """The lanes, with participants in their own palette and fresh handovers highlighted."""
    st.markdown(f"#### Partitions of `{snap.topic or '?'}`")
    if not snap.partitions:
        st.caption("No partitions to show yet.")
        return
    moved = lm.handovers(history, now_ms=snap.taken_ms) if history else {}
    st.html(lanes_html(snap, lm.external_members(snap, supervised), moved))


def draw_cards(snap: Snapshot, supervised: tuple, own: bool = True) -> None:
    noun = lm.member_noun(own)
    st.markdown(f"#### {noun.capitalize()}s")
    cards = lm.replica_cards(snap, supervised)
    if not cards:
        st.caption(f"No {noun} is in the group.")
        return
    st.html(cards_html(cards, own=own))


def draw_chart(snap: Snapshot, history: tuple, revision: str) -> None:
    points = lm.series(history)
    since = points[0].ts if points else snap.taken_ms
    fig = throughput_lag_figure(points, lm.rebalance_periods(snap, since), revision=revision)
    st.markdown("#### Throughput and lag (rebalances shaded)")
    st.plotly_chart(fig, key="live_chart", config={"displayModeBar": False})


def draw_feed(snap: Snapshot, supervised: tuple) -> None:
    st.markdown("#### Events")
    items = lm.feed_items(snap.events, supervised, snap.cluster_events)
    names = sorted({i.replica for i in items})
    f1, f2 = st.columns(2)
    chosen = f1.multiselect("replica", names, key="feed_replicas", placeholder="all replicas")
    stream = f2.text_input("stream", key="feed_stream", placeholder="e.g. car-04")
    shown = lm.filter_feed(items, chosen, stream)[:60]
    if not shown:
        st.caption("No events yet." if not items else "No event matches the filter.")
        return
    lines = []
    for i in shown:
        t = time.strftime("%H:%M:%S", time.localtime(i.ts / 1000))
        named = i.stream or i.kind in lm.CLUSTER_KINDS  # Kafka's lines say "kafka ·"
        lines.append(f"`{t}` **{i.replica}** · {i.text}" if named else f"`{t}` {i.text}")
    with st.container(height=360, key="feed_box"):
        st.markdown("  \n".join(lines))


def draw_locator(snap: Snapshot | None, history: tuple) -> None:
    st.markdown("#### Stream locator")
    key = st.text_input("stream key", key="locator_key", placeholder="e.g. car-04")
    if not key or snap is None:
        return
    loc = lm.locate(key.strip(), snap, history)
    if loc is None:
        st.caption("The topic has no partitions yet.")
        return
    seen = "" if loc.known else " (not seen on the topic yet)"
    st.markdown(f"`{loc.key}` → partition **P{loc.partition}** of {loc.partitions} "
                f"(murmur2) → owner now **{loc.owner or 'nobody'}**{seen}")
    if loc.history:
        steps = " → ".join(
            f"{o or 'nobody'} ({time.strftime('%H:%M:%S', time.localtime(t / 1000))})"
            for t, o in loc.history)
        st.caption(f"owners since the page started watching: {steps}")


# ---- one fragment per panel, each reading the shared observer ---------------------------

@st.fragment(run_every=REFRESH_S)
def header_panel(ctx: ViewContext) -> None:
    snap = _snapshot(ctx, wait_s=5.0)
    if snap is None:
        _waiting(ctx)
        return
    draw_header(snap, ctx.target.bootstrap, own=_own(ctx, snap))


@st.fragment(run_every=LANES_REFRESH_S)
def lanes_panel(ctx: ViewContext) -> None:
    snap = _snapshot(ctx)
    if snap is not None:
        # only the last couple of minutes: enough to name a partition's previous owner
        since = snap.taken_ms - int(lm.HANDOVER_LOOKBACK_S * 1000)
        history = observer_for(ctx.target, ctx.group, ctx.topic).history(since_ms=since)
        draw_lanes(snap, history, supervised_replicas(ctx))


@st.fragment(run_every=REFRESH_S)
def members_panel(ctx: ViewContext) -> None:
    """Member cards and, for a groupscope group, its replicas' event feed: one panel, so the
    supervisor is read once a refresh."""
    snap = _snapshot(ctx)
    if snap is not None:
        supervised = supervised_replicas(ctx)
        own = _own(ctx, snap)
        draw_cards(snap, supervised, own=own)
        if own:  # the feed is the events topic's: no other group has one
            draw_feed(snap, supervised)


@st.fragment(run_every=CHART_REFRESH_S)
def chart_panel(ctx: ViewContext) -> None:
    snap = _snapshot(ctx)
    if snap is not None:
        history = observer_for(ctx.target, ctx.group, ctx.topic).history()
        draw_chart(snap, history, revision=f"live-{ctx.group}")


@st.fragment(run_every=REFRESH_S)
def locator_panel(ctx: ViewContext) -> None:
    snap = _snapshot(ctx)
    history = observer_for(ctx.target, ctx.group, ctx.topic).history() if snap else ()
    draw_locator(snap, history)


def render_live(ctx: ViewContext) -> None:
    """The whole Live view; controls are drawn by the caller (hidden in read-only mode)."""
    header_panel(ctx)
    if not ctx.read_only and not ctx.watching:  # the Live page, i.e. this stack's own group
        join_panel()
    # Kafka's changes go to the Live page's event feed; Watch lists them with the brokers
    brokers_panel(ctx, feed=not ctx.read_only and not ctx.watching)
    left, right = st.columns([3, 2], gap="medium")
    with left:
        lanes_panel(ctx)
    with right:
        members_panel(ctx)
    chart_panel(ctx)
    leaderboard_panel(ctx)
    locator_panel(ctx)
