"""The Live view: one fragment per panel, each refreshing itself from the shared observer.

Used by the Live page (with controls) and the Watch page (read-only). Page code never talks
to Kafka: it reads the shared observer's latest Snapshot and history, both immutable.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from html import escape

import streamlit as st

from backend.contracts import PartitionView, Snapshot
from dashboard import live_model as lm
from dashboard.context import ViewContext
from dashboard.figures import throughput_lag_figure
from dashboard.panels import LANE_CSS, STATUS_COLOURS, cards_html, kafka_tag, lanes_html
from dashboard.pollers import Reading, cluster_poller, observer_for
from dashboard.theme import HEALTH_COLOURS, STATE_COLOURS, health_fill, member_style
from dashboard.views.brokers import brokers_panel
from dashboard.views.room import join_panel, leaderboard_panel
from dashboard.views.supervised import supervised_replicas

REFRESH_S = 1.0
# Ownership is what moves in a rebalance; the lanes are cheap to draw, so refresh them twice
# as often (matching the observer's 0.5 s poll).
LANES_REFRESH_S = 0.5
# The chart's bold lines are moving averages over lm.SMOOTH_S, so a redraw every second added
# little, yet it was the browser's dearest work on the Live page, and far less at this
# period (bench/README.md, "The Live page's cost").
CHART_REFRESH_S = 2.0


def _snapshot(ctx: ViewContext, wait_s: float = 0.0) -> Snapshot | None:
    return observer_for(ctx.target, ctx.group, ctx.topic).shown(wait_s=wait_s)


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
    proto = lm.group_type_label(snap.protocol) + (f" / {snap.assignor}" if snap.assignor else "")
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
        st.error(f"Kafka{at}: {snap.error} (retrying every second){lm.stale_note(snap)}",
                 icon=":material/cloud_off:")
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


SHARE_CSS = """
<style>
.gs-lanes .sharers { display:flex; flex-wrap:wrap; gap:0.15rem; align-items:center; }
.gs-lanes .sharers .gs-chip { margin:0; font-weight:700; }
.gs-lanes .spso { display:block; font-size:0.8rem; opacity:0.8; line-height:1.1; }
.gs-card .tasks { font-family:ui-monospace,monospace; font-size:0.9rem; }
</style>
"""
NEUTRAL_CHIP = member_style(None).css()  # a share group's streams belong to no one member
MAX_SHARE_CHIPS = 40  # stream chips per share lane, as panels caps an owned lane's


def share_lanes_html(snap: Snapshot, external: Collection[str] = ()) -> str:
    """A share group's lanes: every member a partition is delivered to, as chips in the
    members' own colours (participants in their palette), and the backlog: the broker's
    count of records not yet acknowledged where it reports one (the column then says
    "lag (broker)"), else counted from the share-partition start offset, labelled so
    rather than as a committed offset.

    Not panels.lanes_html: that lane has one owner cell, which would have to name one sharer
    and hide the rest, and its handover highlight has no meaning where nothing moves."""
    lanes = lm.share_lanes(snap)
    views: dict[int, PartitionView] = {pv.partition: pv for pv in snap.partitions}
    kafka = len(snap.brokers) > 1
    offset = lm.offset_label(snap.protocol)
    max_lag = max((lane.lag_messages for lane in lanes), default=0) or 1
    rows: list[str] = []
    for lane in lanes:
        sharers = "".join(
            f'<span class="gs-chip" style="{member_style(n, n in external).css()}">'
            f'{escape(n)}</span>' for n in lane.sharers) or '<span class="gs-muted">nobody</span>'
        start = "–" if lane.start_offset is None else f"{lane.start_offset:,}"
        spso = "" if lane.start_offset is None else str(lane.start_offset)
        shown = lane.streams[:MAX_SHARE_CHIPS]
        chips = "".join(f'<span class="gs-chip" style="{NEUTRAL_CHIP}">{escape(i)}</span>'
                        for i in shown)
        if len(lane.streams) > len(shown):
            chips += f'<span class="gs-muted"> +{len(lane.streams) - len(shown)} more</span>'
        secs = f" · {lane.lag_seconds:.1f} s" if lane.lag_seconds is not None else ""
        word = "" if lane.health == "OK" else f" · {escape(lane.health)}"
        width = 100.0 * lane.lag_messages / max_lag
        side = kafka_tag(views[lane.partition]) if kafka else ""
        span = (f"not yet acknowledged, as the broker reports it ({offset} {start}, log end "
                f"{lane.end:,})" if lane.lag_reported
                else f"from the {offset} {start} to the log end {lane.end:,}")
        rows.append(
            f'<div class="p" title="health {escape(lane.health)}">P{lane.partition}{side}</div>'
            f'<div class="sharers" data-sharers="{escape(",".join(lane.sharers))}" '
            f'title="delivered to {escape(lm.sharers_text(lane.sharers))}">{sharers}'
            f'<span class="spso" data-spso="{spso}">{offset} {start}</span></div>'
            f'<div class="chips">{chips}</div>'
            f'<div class="gs-lag" title="lag {lane.lag_messages} messages{secs} {span}, '
            f'health {escape(lane.health)}">'
            f'<span style="width:{width:.1f}%;background:{health_fill(lane.health)}"></span>'
            f'<em>{lane.lag_messages:,}{secs}{word}</em></div>'
        )
    lag = "lag (broker)" if any(lane.lag_reported for lane in lanes) else "lag"
    header = ('<div><b>part.</b></div><div><b>sharers</b></div><div><b>streams</b></div>'
              f'<div><b>{lag}</b></div>')
    grid = "gs-lanes gs-kafka" if kafka else "gs-lanes"
    return (f'{LANE_CSS}{SHARE_CSS}<div class="{grid} gs-share" data-testid="gs-lanes">'
            f'{header}{"".join(rows)}</div>')


def draw_lanes(snap: Snapshot, history: tuple = (), supervised: tuple = ()) -> None:
    """The lanes, with participants in their own palette and fresh handovers highlighted; a
    share group's lanes name every sharer instead of one owner."""
    st.markdown(f"#### Partitions of `{snap.topic or '?'}`")
    if not snap.partitions:
        st.caption("No partitions to show yet.")
        return
    if lm.is_share(snap):
        st.caption("A share group: each partition is delivered to every member listed, "
                   "record by record, and the lag is the broker's count of records not yet "
                   "acknowledged where it reports one, else from the share-partition start "
                   "offset (the first record not yet acknowledged).")
        st.html(share_lanes_html(snap, lm.external_members(snap, supervised)))
        return
    moved = lm.handovers(history, now_ms=snap.taken_ms) if history else {}
    st.html(lanes_html(snap, lm.external_members(snap, supervised), moved))


def tasks_cards_html(cards: Sequence[lm.ReplicaCard], own: bool = True) -> str:
    """A streams group's member cards: panels.cards_html's card with the member's tasks by
    kind, which is what a streams member is given (often with no partitions at all)."""
    out: list[str] = []
    for c in cards:
        look = member_style(c.name, c.external)
        parts = ", ".join(str(p) for p in c.partitions)
        owned = f'<div class="d">partitions <b>{parts}</b></div>' if parts else ""
        detail = f'<div class="d gs-muted">{escape(c.detail)}</div>' if c.detail else ""
        rate = f"{c.rate:,.0f} msg/s" if c.rate is not None else "– msg/s"
        batch = f"batch {c.last_batch_ms:,.0f} ms" if c.last_batch_ms is not None else "batch –"
        stats = f'<div class="d">{rate} · {batch}</div>' if own else ""
        out.append(
            f'<div class="gs-card {c.status}{" ext" if c.external else ""}" '
            f'style="--c:{look.fill};--o:{look.outline}" data-replica="{escape(c.name)}">'
            f'<span class="s" style="background:{STATUS_COLOURS.get(c.status, "#475569")}">'
            f'{c.status}</span><div class="n">{escape(c.name)}</div>'
            f'<div class="d tasks" data-tasks="{escape(",".join(c.tasks))}">tasks '
            f'<b>{escape(lm.tasks_text(c.tasks))}</b></div>{owned}{stats}{detail}</div>'
        )
    return f'{LANE_CSS}{SHARE_CSS}<div class="gs-cards">{"".join(out)}</div>'


def draw_cards(snap: Snapshot, supervised: tuple, own: bool = True) -> None:
    noun = lm.member_noun(own)
    st.markdown(f"#### {noun.capitalize()}s")
    cards = lm.replica_cards(snap, supervised)
    if not cards:
        st.caption(f"No {noun} is in the group.")
        return
    if snap.protocol == lm.STREAMS:
        st.html(tasks_cards_html(cards, own=own))
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
    who = (f"shared by **{lm.sharers_text(loc.sharers)}**" if loc.shared
           else f"owner now **{loc.owner or 'nobody'}**")
    st.markdown(f"`{loc.key}` → partition **P{loc.partition}** of {loc.partitions} "
                f"(murmur2) → {who}{seen}")
    if loc.history:
        steps = " → ".join(
            f"{o or 'nobody'} ({time.strftime('%H:%M:%S', time.localtime(t / 1000))})"
            for t, o in loc.history)
        whom = "sharers" if loc.shared else "owners"
        st.caption(f"{whom} since the page started watching: {steps}")


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
