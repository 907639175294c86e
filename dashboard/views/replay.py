"""The presenter's replay, on the Streams page: send the group back (or forward) in its
topic, preview first.

The preview is the supervisor's (`POST /replay/preview`): per partition the committed and
the new offset and what lies between, per car the records it replays or skips. "Apply"
appears only under a preview of the very choice on screen, and sends a relative time as the
instant the preview read it as, so what is applied is what was shown. Only a presenter's
session draws it, and `controls._call` checks again before anything is sent.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.contracts.control import REPLAY_TARGETS, ReplayPreview
from backend.paths import data_dir
from dashboard import presenter
from dashboard.context import ViewContext
from dashboard.controls import call_control, disabled_reason, show_answer
from dashboard.pollers import supervisor_poller
from dashboard.presenter import Role

TARGET_WORDS = {
    "earliest": "the beginning (replay all it keeps)",
    "latest": "the end (skip what is unread)",
    "datetime": "a time",
    "offset": "an offset",
    "shift": "back or forward by N",
}
BY = "the presenter"  # how the event feed names who moved the offsets from this page


def preview_tables(p: ReplayPreview) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The preview as two tables: per partition, and per car."""
    parts = pd.DataFrame([{"partition": m.partition, "committed": m.committed, "new": m.new,
                           "log start": m.log_start, "log end": m.log_end,
                           "replays": m.replays, "skips": m.skips, "note": m.note}
                          for m in p.partitions])
    cars = pd.DataFrame([{"car": c.car, "partition": c.partition, "replays": c.replays,
                          "skips": c.skips} for c in p.cars])
    return parts, cars


@st.fragment
def replay_panel(ctx: ViewContext) -> None:
    if presenter.session_role() is not Role.PRESENTER:
        return
    reading = supervisor_poller(str(data_dir())).latest(wait_s=2.0)
    reason = disabled_reason(ctx, reading)
    with st.expander("Replay: send the group back in time", key="replay"):
        if reason:
            st.caption(reason)
            return
        st.caption("The topic keeps its records, so a group can read them again: preview "
                   "what a move replays or skips, then apply it. The replicas stop (Kafka "
                   "moves a group's offsets only while it is Empty), the offsets move, the "
                   "replicas start again, and the table above counts what is read again as "
                   "duplicates, with nothing lost.")
        status = reading.value if reading is not None else None
        count = (status.partitions or 0) if status is not None else 0
        cols = st.columns(3)
        to = cols[0].selectbox("to", REPLAY_TARGETS, format_func=TARGET_WORDS.get,
                               key="rp_to")
        at: str | None = None
        offset: int | None = None
        if to == "datetime":
            at = cols[1].text_input("time", "2m ago", key="rp_at",
                                    help="ISO 8601 (2026-11-27T10:00:00Z) or '10m ago'")
        elif to in ("offset", "shift"):
            offset = int(cols[1].number_input("offset" if to == "offset" else "by", step=100,
                                              value=0 if to == "offset" else -500,
                                              key=f"rp_{to}"))
        parts = cols[2].multiselect("partitions", list(range(count)), key="rp_parts",
                                    placeholder="every partition")
        chosen = (to, at, offset, tuple(sorted(parts)))
        if st.button("Preview", key="rp_preview"):
            answer = call_control("replay preview", lambda c: c.replay_preview(
                to, at, offset, sorted(parts) or None, by=BY))
            if isinstance(answer, ReplayPreview):
                st.session_state["rp_plan"] = (chosen, answer)
        plan = st.session_state.get("rp_plan")
        if plan is not None and plan[0] == chosen:
            preview: ReplayPreview = plan[1]
            pinned = f" ({preview.pinned_at})" if preview.pinned_at else ""
            st.markdown(f"**To {preview.target}{pinned}**: replays **{preview.replays:,}** "
                        f"records, skips **{preview.skips:,}**; the group is "
                        f"{preview.group_state}.")
            by_partition, by_car = preview_tables(preview)
            left, right = st.columns(2)
            left.dataframe(by_partition, hide_index=True, width="stretch", key="rp_parts_tbl")
            if not by_car.empty:
                right.dataframe(by_car, hide_index=True, width="stretch", key="rp_cars_tbl")
            if not preview.cars_complete:
                right.caption("Per car: counted over the first records only; the totals "
                              "are exact.")
            if st.button("Apply: stop the replicas, move the offsets, start them again",
                         key="rp_apply", type="primary"):
                when = preview.pinned_at or at
                if call_control("replay", lambda c: c.replay(
                        to, when, offset, sorted(parts) or None, by=BY)) is not None:
                    st.session_state.pop("rp_plan", None)
        elif plan is not None:
            st.caption("The choice changed since the preview: preview it again.")
        show_answer("replay")
