"""Lab page: eager, cooperative, static and KIP-848 groups side by side on one topic, one
event applied to all of them at the same instant, each rebalance measured live from the
records its replicas processed. The supervisor runs the groups (`backend/lab/session.py`);
this page starts them, applies events and draws what `Status.lab` says."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.contracts.control import MAX_LAB_PARTITIONS, MAX_LAB_REPLICAS, LabState
from backend.contracts.lab import (
    DEFAULT_LAB_PROTOCOLS,
    LAB_EVENTS,
    LAB_PROTOCOLS,
    MAX_LAB_GROUPS,
    STALL_RULE,
)
from dashboard import presenter
from dashboard.context import env_context
from dashboard.controls import (
    action_button,
    call_control,
    disabled_reason,
    show_answer,
    supervisor_status,
    widget,
)
from dashboard.lab_model import (
    EVENT_BUTTONS,
    LAB_CSS,
    card_markdown,
    headline,
    lanes_html,
    machine_line,
    replicas_line,
    score_rows,
    stopwatch_html,
)
from dashboard.presenter import Role

REFRESH_S = 1.0

ctx = env_context()
st.title("Lab")
st.caption("Kafka's answers to a rebalance, side by side: the same cars on one topic, a group "
           "per protocol, each group's replicas real PySpark replicas. Apply one event to "
           "every group at once and watch which partitions stop, and for how long.")
st.html(LAB_CSS)


def _lab() -> tuple[object, LabState | None]:
    reading, status = supervisor_status()
    return reading, (status.lab if status is not None else None)


def _start() -> object:
    """Start the lab with the form's choices (the Start button's callback)."""
    return call_control("start the lab", lambda c: c.lab_start(
        list(widget("lab_protocols") or ()), int(widget("lab_replicas")),
        int(widget("lab_partitions"))))


@st.fragment(run_every=2.0)
def _controls() -> None:
    if presenter.session_role() is not Role.PRESENTER:
        return
    reading, lab = _lab()
    reason = disabled_reason(ctx, reading)
    off = reason is not None
    if reason:
        st.caption(reason)
    if lab is None:
        with st.container(border=True, key="lab-start"):
            cols = st.columns([3, 1, 1, 1])
            chosen = cols[0].multiselect(
                "groups, one protocol each", list(LAB_PROTOCOLS),
                default=list(DEFAULT_LAB_PROTOCOLS), max_selections=MAX_LAB_GROUPS,
                format_func=lambda name: LAB_PROTOCOLS[name].title, key="lab_protocols",
                disabled=off)
            cols[1].number_input("replicas a group", 1, MAX_LAB_REPLICAS, 2,
                                 key="lab_replicas", disabled=off)
            cols[2].number_input("partitions", 1, MAX_LAB_PARTITIONS, 6,
                                 key="lab_partitions", disabled=off)
            if action_button(cols[3], "Start the lab", "lab_start", _start, type="primary",
                             disabled=off or not chosen):
                st.rerun(scope="fragment")
    else:
        ready = lab.phase == "ready"
        cols = st.columns(len(LAB_EVENTS) + 1)
        for col, event in zip(cols, LAB_EVENTS, strict=False):
            action_button(col, EVENT_BUTTONS[event], f"lab_event_{event}",
                          lambda e=event: call_control(f"lab {e}", lambda c: c.lab_event(e)),
                          disabled=off or not ready, help=LAB_EVENTS[event], width="stretch")
        if action_button(cols[-1], "Stop the lab", "lab_stop",
                         lambda: call_control("stop the lab", lambda c: c.lab_stop()),
                         disabled=off, width="stretch"):
            st.rerun(scope="fragment")
    show_answer("lab")


@st.fragment(run_every=REFRESH_S)
def _groups() -> None:
    reading, lab = _lab()
    if lab is None:
        if reading is None or not reading.ok:
            st.info("No supervisor answers: the Lab needs `groupscope up`.")
        else:
            st.info("No lab runs. A presenter starts one above: four groups of two replicas "
                    "each fit a 2-core laptop beside the demo.")
        return
    st.markdown(headline(lab))
    st.caption(machine_line(lab))
    if lab.error:
        st.warning(lab.error)
    for group in lab.groups:  # one compact row each: who, the lanes, the stopwatch
        with st.container(border=True, key=f"lab-group-{group.lab}"):
            name, lanes, watch = st.columns([2.2, 6, 1.3], vertical_alignment="center")
            name.markdown(f"**{LAB_PROTOCOLS[group.lab].title}**  \n{replicas_line(group)}")
            lanes.html(lanes_html(group))
            watch.html(stopwatch_html(group, lab.phase))
    rows = score_rows(lab)
    if rows:
        st.subheader("Scoreboard")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="lab_scores")
        if lab.notes:
            st.caption("; ".join(lab.notes))
    with st.expander("How a stall is measured"):
        st.markdown(STALL_RULE)
    scored = {g.lab: g.score for g in lab.groups}
    cols = st.columns(len(lab.groups))
    for col, group in zip(cols, lab.groups, strict=True):
        col.container(border=True).markdown(card_markdown(group.lab, scored[group.lab]))


_controls()
_groups()
