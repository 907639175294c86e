"""Groups page: every consumer group of the cluster at a glance, worst health first.

The first page of `groupscope watch`. It reads the cluster's one shared overview watcher
(dashboard/pollers.py `overview_for`, or the process's always-on watcher) and draws one
dataframe whatever the number of groups; the rows it shows are the ones the watcher
refreshes first. Selecting a row opens that group's page (the Watch page's Live view, or the
Live page for the stack's own group).
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from backend.contracts.overview import HEALTH_MEANING
from dashboard import groups_model as gm
from dashboard.context import WATCH_KEY, ViewContext, env_context, read_only_env
from dashboard.pollers import overview_for
from dashboard.presenter import Role, session_role

REFRESH_S = 3.0
ROW_PX = 35
MAX_TABLE_PX = 720
TABLE_KEY = "groups_table"
SHOWN_KEY = "groups_shown"  # the group ids of the last table drawn, in its order

base = env_context()
target = base.target
st.title("Consumer groups")
st.caption(f"{target.describe()} · read-only: listed, described and offset-fetched every "
           f"few seconds, never joined. Select a row to open the group.")

f1, f2, f3, f4 = st.columns([3, 2, 2, 2])
name = f1.text_input("group name contains", key="groups_name", placeholder="e.g. billing")
states = f2.multiselect("state", gm.STATES, key="groups_states", placeholder="all states")
healths = f3.multiselect("health", gm.HEALTHS, key="groups_health", placeholder="any health")
sort = f4.selectbox("sort by", list(gm.SORTS), key="groups_sort")
FILTER = gm.GroupFilter(name, frozenset(states), frozenset(healths))

COLUMN_CONFIG = {
    "group": st.column_config.TextColumn("group", pinned=True, width=190),
    "health": st.column_config.MultiselectColumn(
        "health", options=gm.HEALTH_OPTIONS, color=list(gm.HEALTH_OPTION_FILLS), width=75,
        help="Worst partition's: " + "; ".join(f"{h} {m}" for h, m in HEALTH_MEANING.items())),
    "state": st.column_config.TextColumn("state", width=95),
    "protocol": st.column_config.TextColumn("protocol / assignor", width=150),
    "members": st.column_config.TextColumn("members", width=80),
    "topics": st.column_config.TextColumn("topics", width=130),
    "lag": st.column_config.TextColumn("lag (msg)", width=85,
                                       help="Total over all its partitions"),
    "lag_seconds": st.column_config.TextColumn(
        "max lag", width=75,
        help="Age of the oldest unprocessed record, from the broker's timestamps"),
    "trend": st.column_config.LineChartColumn("lag trend", y_min=0, width=90),
    "rate": st.column_config.TextColumn(
        "lag rate", width=100, help="How fast the total lag changes; negative: catching up"),
    "catch_up": st.column_config.TextColumn("catch up", width=150,
                                            help="Time to zero lag at the current rate"),
    "rebalances": st.column_config.TextColumn("rebalances 1 h", width=115),
    "rebalances_24h": st.column_config.TextColumn("24 h", width=50,
                                                  help="Rebalances in the last 24 hours"),
    "last_cause": st.column_config.TextColumn(
        "last cause", width=130,
        help="Why the last rebalance that ended happened (the Timeline page has the evidence)"),
    "last_rebalance": st.column_config.TextColumn("last rebalance", width=110),
    "note": st.column_config.TextColumn("note", width="large"),
}


def _can_open_others() -> bool:
    """The Watch page exists for this session (`groupscope watch`, or the presenter)."""
    return read_only_env() or session_role() is Role.PRESENTER


def _open(group: str) -> None:
    """Go to the group's page: the Live page for the stack's own group, else Watch."""
    if not read_only_env() and group == base.group:
        st.switch_page("screens/live.py")
    if not _can_open_others():
        st.info(f"Only the presenter can open {group}: the Watch page is theirs.")
        return
    st.session_state[WATCH_KEY] = ViewContext(target, group, None, read_only=True,
                                              watching=False)
    st.switch_page("screens/watch.py")


def _selected() -> str | None:
    """The group of the row just selected, by the order of the table the user clicked: the
    refresh that follows may have reordered the rows."""
    state = st.session_state.get(TABLE_KEY)
    rows = getattr(getattr(state, "selection", None), "rows", None)
    if rows is None and isinstance(state, dict):
        rows = state.get("selection", {}).get("rows")
    shown: list[str] = st.session_state.get(SHOWN_KEY, [])
    return shown[rows[0]] if rows and rows[0] < len(shown) else None


@st.fragment(run_every=REFRESH_S)
def groups_table(filt: gm.GroupFilter, sort: str) -> None:
    picked = _selected()
    if picked is not None:
        _open(picked)
    shared = overview_for(target)
    overview = shared.latest(wait_s=5.0)
    if overview is None:
        if shared.error:
            st.error(shared.error, icon=":material/cloud_off:")
        else:
            st.info("Listing the consumer groups…")
        return
    if overview.error:
        st.error(f"Kafka at {target.bootstrap or 'the configured cluster'}: {overview.error} "
                 f"(retrying)", icon=":material/cloud_off:")
    rows, matched = gm.top(overview.rows, filt, sort)
    shared.prioritise(gm.priority(rows))
    if not overview.rows:
        st.info("No consumer groups on this cluster yet." if overview.error is None
                else "No groups to show.")
        return
    now_ms = int(time.time() * 1000)
    if not rows:
        st.info("No group matches the filter.")
        st.caption(gm.footer(overview, 0, now_ms))
        return
    cells = gm.table(rows, now_ms)
    st.session_state[SHOWN_KEY] = cells["group"]
    st.dataframe(pd.DataFrame(cells), key=TABLE_KEY, hide_index=True,
                 column_config=COLUMN_CONFIG, on_select="rerun", selection_mode="single-row",
                 row_height=ROW_PX,
                 height=min(ROW_PX * (len(cells["group"]) + 1) + 3, MAX_TABLE_PX))
    st.caption(gm.footer(overview, matched, now_ms))


groups_table(FILTER, sort)
