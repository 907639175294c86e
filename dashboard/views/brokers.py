"""The brokers view: each Kafka broker up or down, what it leads, its under-replicated and
offline partitions, and -- for the presenter of a stack that runs its own brokers -- Kill,
Stop and Start buttons next to each one.

Two readers, one drawing: the Status page counts over every topic (the cluster poller's
metadata, already read for its topic list), the Live and Watch pages over the watched topic
(the observer's Snapshot, whose lanes show each partition's leader and ISR beside it). Live
and Watch show it only on a cluster of more than one broker, where there is something to
see. Nothing here talks to Kafka; the buttons go through controls._call, which checks the
presenter again before anything reaches the supervisor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from backend.contracts import BrokerView, Snapshot
from backend.contracts.control import BrokerNode
from backend.paths import data_dir
from dashboard import live_model as lm
from dashboard import presenter
from dashboard.context import ViewContext
from dashboard.controls import action_button, call_control, show_answer
from dashboard.panels import LANE_CSS, broker_card_html, brokers_html
from dashboard.pollers import Reading, broker_poller, observer_for
from dashboard.presenter import Role

if TYPE_CHECKING:
    from backend.supervisor.client import ControlClient

REFRESH_S = 1.0
PER_ROW = 5  # broker cards with buttons per row of columns
RECENT_EVENTS = 5  # Kafka's changes listed under the cards where there is no event feed


@dataclass(frozen=True)
class BrokerControls:
    """What the buttons may act on: the ids of the brokers the supervisor runs."""

    managed: frozenset[int]


def _brokers_reading(ctx: ViewContext) -> Reading | None:
    """The supervisor's brokers, for a presenter's session on the stack's own cluster only."""
    if ctx.read_only or ctx.watching or presenter.session_role() is not Role.PRESENTER:
        return None
    return broker_poller(str(data_dir())).latest(wait_s=2.0)


def broker_controls(ctx: ViewContext) -> BrokerControls | None:
    """None when this session gets no broker button at all: a viewer, a read-only page,
    another cluster, or no supervisor that has answered with brokers of its own to run."""
    return controls_in(_brokers_reading(ctx))


def controls_in(reading: Reading | None) -> BrokerControls | None:
    """`broker_controls` from a reading already taken (None: this session gets none)."""
    managed = None if reading is None else managed_in(reading)
    return None if managed is None else BrokerControls(managed)


def managed_in(reading: Reading) -> frozenset[int] | None:
    """The ids the buttons act on, from the brokers poller's reading. A probe that failed
    after a good one keeps them: the nodes a stack runs do not change, and a slow answer on
    a loaded laptop must not make the buttons flicker away."""
    nodes = reading.value if reading.ok else reading.last_ok
    return frozenset(managed_ids(nodes)) if nodes else None


def unavailable_reason(reading: Reading) -> str | None:
    """Why a presenter has no broker button when the supervisor could not say which brokers
    it runs (never when it runs none): shown, so the buttons are not silently absent."""
    return None if reading.ok or reading.last_ok else reading.error


def managed_ids(brokers: Sequence[BrokerNode]) -> list[int]:
    """The ids of the nodes the supervisor's stack runs (`GET /brokers`)."""
    return [b.id for b in brokers]


def with_managed(brokers: Sequence[BrokerView], managed: frozenset[int]) -> list[BrokerView]:
    """The brokers Kafka reports, plus any the supervisor runs that Kafka no longer names
    (every replica moved off it, or the whole cluster down): shown down, so its Start
    button stays within reach."""
    known = {b.broker_id for b in brokers}
    extra = [BrokerView(i, None, False) for i in sorted(managed - known)]
    return sorted([*brokers, *extra], key=lambda b: b.broker_id)


def _act(verb: str, broker_id: int) -> Callable[[], object]:
    """A broker button's action (its callback: action_button)."""
    def call(client: ControlClient) -> object:
        return getattr(client, f"broker_{verb}")(broker_id)
    return lambda: call_control(f"{verb} broker {broker_id}", call)


def _buttons(b: BrokerView, controls: BrokerControls, key: str) -> None:
    off = b.broker_id not in controls.managed
    i = b.broker_id
    # a row that wraps, not three columns: a button is as wide as its word on any screen
    row = st.container(horizontal=True, wrap=True, gap="small")
    action_button(row, "Kill", f"{key}_kill_{i}", _act("kill", i), disabled=off or not b.up,
                  help="SIGKILL: the controller notices after the broker's session timeout, "
                       "then moves its leaders and shrinks the ISRs")
    action_button(row, "Stop", f"{key}_stop_{i}", _act("stop", i), disabled=off or not b.up,
                  help="SIGTERM: a controlled shutdown moves its leaders away first")
    action_button(row, "Start", f"{key}_start_{i}", _act("start", i), disabled=off or b.up,
                  help="start it again: it catches up, then rejoins the ISRs")


def draw_brokers(brokers: Sequence[BrokerView], under: int, offline: int, scope: str,
                 controls: BrokerControls | None = None, key: str = "brokers") -> None:
    """Summary line, then the cards: in one grid, or one column each with its buttons."""
    if controls is not None:
        brokers = with_managed(brokers, controls.managed)
    st.markdown(f"#### Brokers · {lm.brokers_summary(brokers, under, offline)}")
    st.caption(scope)
    if not brokers:
        st.caption("No broker answered yet.")
        return
    if controls is None:
        st.html(brokers_html(brokers))
        return
    st.html(LANE_CSS)
    with st.container(key=f"{key}_cards"):
        for start in range(0, len(brokers), PER_ROW):
            row = brokers[start:start + PER_ROW]
            for col, b in zip(st.columns(PER_ROW), row, strict=False):
                with col:
                    st.html(broker_card_html(b))
                    _buttons(b, controls, key)

    show_answer("broker")


def recent_cluster_events(snap: Snapshot, n: int = RECENT_EVENTS) -> None:
    """Kafka's latest changes, for pages without the replicas' event feed (Watch)."""
    items = sorted(lm.cluster_feed_items(snap.cluster_events), key=lambda i: i.ts,
                   reverse=True)[:n]
    if items:
        st.markdown("  \n".join(
            f"`{time.strftime('%H:%M:%S', time.localtime(i.ts / 1000))}` {i.text}"
            for i in items))


@st.fragment(run_every=REFRESH_S)
def brokers_panel(ctx: ViewContext, feed: bool = True) -> None:
    """Live and Watch: the watched topic's brokers, on a cluster of more than one broker.
    `feed`: the page shows Kafka's changes in its event feed; otherwise they are listed
    here."""
    snap = observer_for(ctx.target, ctx.group, ctx.topic).latest()
    if snap is None:
        return
    controls = broker_controls(ctx)
    if not lm.multi_broker(snap.brokers) and (controls is None or len(controls.managed) < 2):
        return
    draw_brokers(snap.brokers, snap.under_replicated, snap.offline_partitions,
                 f"partitions of `{snap.topic or '?'}`: leaders and in-sync replicas are on "
                 f"each lane", controls, key="live_brokers")
    if not feed:
        recent_cluster_events(snap)


def status_section(ctx: ViewContext, cluster: Reading | None) -> None:
    """The Status page's brokers, counted over every topic (the cluster poller's
    checks.ClusterOverview, or its last good one); drawn inside the page's refreshing
    fragment."""
    overview = None if cluster is None else (cluster.value if cluster.ok else cluster.last_ok)
    views = tuple(getattr(overview, "broker_views", ()) or ())
    reading = _brokers_reading(ctx)  # read once: the buttons and the reason they are missing
    controls = controls_in(reading)
    if not views and controls is None:
        return
    with st.container(border=True, key="brokers-status"):
        if cluster is not None and not cluster.ok and views:
            st.caption("From the last successful check.")
        if controls is None and reading is not None and (why := unavailable_reason(reading)):
            st.caption(f"No Kill, Stop or Start buttons yet: the supervisor did not say "
                       f"which brokers it runs ({why}); asking again every second.")
        draw_brokers(views, int(getattr(overview, "under_replicated", 0)),
                     int(getattr(overview, "offline_partitions", 0)),
                     "partitions of every topic, internal ones included", controls,
                     key="status_brokers")
