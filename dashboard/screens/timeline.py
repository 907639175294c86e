"""Timeline page: a group's rebalances from the memory, back days (a card per episode with its
cause, evidence and impact; previous / next / worst; every episode of the span in a table; the
lag over the span with each rebalance shaded by cause), then the live view from the observer:
ownership over time, Kafka's changes, and a scrubber back through its recent snapshots.

The memory is read through `dashboard/pollers.py` (`group_memory`), the words come from
`dashboard/history_model.py`; a memory that cannot be read is one warning line and the live
panels below go on without it.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

import pandas as pd
import streamlit as st

from backend.contracts.history import Episode
from dashboard import history_model as hm
from dashboard import live_model as lm
from dashboard.context import current_context
from dashboard.figures import leadership_figure, memory_lag_figure, moves_figure, ownership_figure
from dashboard.panels import lanes_html
from dashboard.pollers import GroupMemory, group_memory, observer_for
from dashboard.views.live import header_badges

MEMORY_REFRESH_S = 5.0  # the memory's writer adds a cycle every few seconds
LIVE_REFRESH_S = 2.0
SPAN_KEY, FROM_KEY, TO_KEY = "timeline_span", "timeline_from", "timeline_to"
SHOWN_KEY = "timeline_episode"  # the start (ms) of the episode the card shows
TABLE_KEY = "timeline_episodes"
ROWS_KEY = "timeline_rows"  # the episode starts of the table last drawn, in its order
ROW_PX = 35
MAX_TABLE_PX = 420

ctx = current_context(st.session_state)
st.title("Timeline")


def _t(ms: int | None) -> str:
    return "…" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|$~])")


def _md(text: str) -> str:
    """Text shown as is in markdown: member ids, hosts and topics may carry `_`, `*`, `$`…"""
    return _MARKDOWN.sub(r"\\\1", text)


# ---- the memory ------------------------------------------------------------------------------

def _show(start_ms: int | None) -> None:
    if start_ms is not None:
        st.session_state[SHOWN_KEY] = start_ms


def _row_selected() -> None:
    """A row of the table was selected: show its episode (by the order of the table the user
    clicked, since a refresh may have added a newer row on top)."""
    state = st.session_state.get(TABLE_KEY)
    rows = getattr(getattr(state, "selection", None), "rows", None)
    if rows is None and isinstance(state, dict):
        rows = state.get("selection", {}).get("rows")
    starts: list[int] = st.session_state.get(ROWS_KEY, [])
    if rows and rows[0] < len(starts):
        _show(starts[rows[0]])


def _span_picker() -> tuple[str, int | None, int | None]:
    """The preset, or custom and its two ends (epoch ms, the server's local time)."""
    left, mid, right = st.columns([3, 2, 2], vertical_alignment="bottom")
    choice = left.segmented_control("span", hm.SPAN_CHOICES, key=SPAN_KEY,
                                    default=hm.DEFAULT_SPAN, required=True) or hm.DEFAULT_SPAN
    if choice != hm.CUSTOM:
        return choice, None, None
    now = datetime.now().replace(microsecond=0)
    st.session_state.setdefault(FROM_KEY, now - timedelta(days=1))
    st.session_state.setdefault(TO_KEY, now)
    start = mid.datetime_input("from", key=FROM_KEY, step=timedelta(minutes=5))
    end = right.datetime_input("to", key=TO_KEY, step=timedelta(minutes=5))
    return (choice, None if start is None else int(start.timestamp() * 1000),
            None if end is None else int(end.timestamp() * 1000))


def _card(e: Episode) -> None:
    """The episode in words; beside them, when its partitions moved within one topic, who
    handed which to whom."""
    card = hm.card(e)
    moved = e.impact.moved
    sankey = bool(moved) and len({m.topic for m in moved}) == 1
    with st.container(border=True, key="timeline_card"):
        words, flows = st.columns([3, 2]) if sankey else (st.container(), None)
        words.markdown(f"**{_md(card.title)}**")
        if card.meaning:
            words.caption(_md(card.meaning))
        words.markdown("**Why**\n" + "\n".join(f"- {_md(line)}" for line in card.evidence))
        words.markdown("**Impact**\n" + "\n".join(f"- {_md(line)}" for line in card.impact))
        if flows is not None:
            flows.plotly_chart(moves_figure([(m.partition, m.source, m.target) for m in moved],
                                            revision=f"moves-{e.start_ms}"),
                               key="timeline_moves", config={"displayModeBar": False})


def _table(episodes: tuple[Episode, ...], shown: int | None) -> None:
    table = hm.table(episodes, shown)
    st.session_state[ROWS_KEY] = table.starts
    st.dataframe(
        pd.DataFrame(table.cells), key=TABLE_KEY, hide_index=True, on_select=_row_selected,
        selection_mode="single-row", row_height=ROW_PX,
        height=min(ROW_PX * (len(table.starts) + 1) + 3, MAX_TABLE_PX),
        column_config={
            "shown": st.column_config.TextColumn("", width=30, help="the episode shown above"),
            "time": st.column_config.TextColumn("time", width=150),
            "cause": st.column_config.TextColumn("cause", width=150),
            "duration": st.column_config.TextColumn("duration", width=110),
            "moved": st.column_config.TextColumn("moved", width=70,
                                                 help="partitions that changed owner"),
            "unowned": st.column_config.TextColumn(
                "unowned p·s", width=100, help="partition-seconds without an owner"),
            "gap": st.column_config.TextColumn(
                "gap", width=80, help="processing gap of the moved partitions"),
            "lag_peak": st.column_config.TextColumn("lag peak", width=90),
        })


def _chart(memory: GroupMemory, episodes: tuple[Episode, ...], span: hm.Span,
           shown: int | None, revision: str) -> None:
    series = hm.lag_series(memory.lag) if memory.lag is not None else hm.LagSeries([], [])
    if not series.times and not episodes:
        st.caption(f"No lag of {ctx.group} recorded {span.label}.")
        return
    open_until = min(span.until_ms, int(time.time() * 1000))
    since = hm.chart_since(span.since_ms, open_until, series, episodes)
    st.plotly_chart(memory_lag_figure(series, hm.shades(episodes, open_until), since,
                                      span.until_ms, shown, revision=revision),
                    key="timeline_lag", config={"displayModeBar": False})


@st.fragment(run_every=MEMORY_REFRESH_S)
def _memory(choice: str, start_ms: int | None, end_ms: int | None) -> None:
    span = hm.span(choice, int(time.time() * 1000), start_ms, end_ms)
    memory = group_memory(ctx.target.bootstrap, ctx.group, span.since_ms, span.until_ms,
                          hm.MAX_EPISODES)
    if memory.error:
        st.warning(memory.error, icon=":material/history:")
    if memory.cluster is None:
        if memory.error is None:
            kept = "; ".join(memory.kept) or "none"
            st.info(f"The memory at {memory.path} keeps nothing of {ctx.target.bootstrap} yet "
                    f"(it keeps: {kept}).")
        return
    episodes = memory.episodes
    index = hm.shown_index(episodes, st.session_state.get(SHOWN_KEY))
    shown = None if index is None else episodes[index].start_ms
    worst = hm.worst(episodes)
    st.caption(f"{len(episodes)} rebalance{'' if len(episodes) == 1 else 's'} {span.label}"
               f"{' (the newest shown)' if len(episodes) >= hm.MAX_EPISODES else ''} · "
               f"the worst episode: {hm.WORST_RULE}.")
    prev_, next_, worst_ = st.columns(3)
    earlier = hm.neighbour(episodes, index, -1)
    later = hm.neighbour(episodes, index, +1)
    prev_.button("previous episode", key="timeline_previous", icon=":material/chevron_left:",
                 disabled=earlier is None, on_click=_show, args=(earlier,), width="stretch")
    next_.button("next episode", key="timeline_next", icon=":material/chevron_right:",
                 disabled=later is None, on_click=_show, args=(later,), width="stretch")
    worst_.button("worst episode", key="timeline_worst", icon=":material/priority_high:",
                  disabled=worst is None, on_click=_show,
                  args=(None if worst is None else worst.start_ms,), width="stretch")
    if index is None:
        st.info(f"No rebalance of {ctx.group} {span.label}.")
    else:
        _card(episodes[index])
    _chart(memory, episodes, span, shown,
           revision=f"memory-{ctx.group}-{choice}-{start_ms}-{end_ms}")
    if episodes:
        _table(episodes, shown)


st.markdown(f"#### Rebalances of {ctx.group}")
_memory(*_span_picker())


# ---- live, from the observer -------------------------------------------------------------------

@st.fragment(run_every=LIVE_REFRESH_S)
def _ownership() -> None:
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    snap = shared.latest(wait_s=5.0)
    if snap is None:
        if shared.error:
            st.error(shared.error)
        else:
            st.info("Waiting for the observer…")
        return
    history = shared.history()
    st.markdown(f"#### Ownership of `{snap.topic or '?'}` over time (live)")
    if history:
        st.plotly_chart(ownership_figure(history, revision=f"own-{ctx.group}"),
                        key="ownership", config={"displayModeBar": False})


_ownership()


@st.fragment(run_every=LIVE_REFRESH_S)
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

st.markdown("#### Scrub back through the last snapshots")
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
