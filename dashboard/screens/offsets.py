"""Offsets page: reset a group's committed offsets from `groupscope watch`, preview first.

Only with `watch --allow-offset-writes`, and only for this machine's browser (the presenter
role: a session from loopback), or with `--sign-in` for the operators it lets in (a viewer may
preview, and is refused the write); app.py registers the page only then, and this script
asks again before reading or writing anything. The preview and the change are `groupscope
offsets reset`'s (backend/offsets: one plan, so what is applied is what was shown): per
partition the committed and the new offset, what it replays or skips, and a note where a
time finds no record ("set to the log end", never silently). Applying takes the preview of
the very choice on screen, the group's name typed again, and a group that is Empty now; a
relative time goes as the instant the preview read it as. Every applied change is logged
(who, group, partition, before → after), kept in the memory's audit, and read back.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from backend.cli_common import UserError
from backend.kafka.javaadmin.reader import KafkaReader
from backend.offsets.audit import entry, keep
from backend.offsets.plan import (
    Plan,
    Target,
    change_lines,
    choose_target,
    differences,
    format_ms,
    merge_specs,
    parse_topic_spec,
    summary,
)
from backend.offsets.reset import Group, apply, plan_reset_now, refuse_other_types
from dashboard import presenter, signin
from dashboard.context import ENV_GROUP, env_context, offset_writes_env
from dashboard.logs import dashboard_log
from dashboard.pollers import memory_file
from dashboard.presenter import Role

log = dashboard_log("groupscope.offsets", "offsets")
TARGETS = {"earliest": "the beginning", "latest": "the end", "datetime": "a time",
           "offset": "an offset", "shift": "back or forward by N"}

st.title("Reset offsets")
admission = signin.account()  # None without sign-in: then this machine's browser only
if not offset_writes_env() or (admission is None
                               and presenter.session_role() is not Role.PRESENTER):
    st.info("Read-only: this dashboard changes nothing (offset writes need `groupscope watch "
            "--allow-offset-writes`, from this machine's browser).")
    st.stop()
if admission is not None and not signin.may_write(admission):
    st.info(f"You ({admission.user}) are a viewer: you can preview a reset; applying it needs "
            f"the operator role.")

ctx = env_context()
st.caption(f"Move a consumer group's committed offsets on {ctx.target.describe()}, the way "
           "`groupscope offsets reset` does: preview first, then type the group's name to "
           "apply. Kafka takes offsets from outside a group only while it is Empty.")


def _reader():
    return KafkaReader.shared(ctx.target.settings(), "groupscope-offsets-page")


def _target(kind: str, value: str, now: datetime) -> Target:
    return choose_target(kind if kind in ("earliest", "latest") else None,
                         value if kind == "datetime" else None,
                         int(value) if kind == "offset" else None,
                         int(value) if kind == "shift" else None, now)


def _plan(group: str, target: Target, topics: str) -> tuple[Plan, str]:
    """The plan as the cluster stands now, and the group's state."""
    reader = _reader()
    try:
        g = Group(reader, ctx.target.settings(), group)
        return _plan_for(reader, g, target, topics), g.state
    finally:
        reader.close()


def _plan_for(reader: KafkaReader, g: Group, target: Target, topics: str) -> Plan:
    """`g`'s plan (offsets.reset.Group) read through `reader`: one reader per action."""
    specs = merge_specs([parse_topic_spec(t) for t in topics.split() if t.strip()])
    refuse_other_types(g, "reset", executing=True)
    return plan_reset_now(reader, g, target, specs)


def _rows(plan: Plan) -> pd.DataFrame:
    return pd.DataFrame([{"topic": r.topic, "partition": r.partition, "committed": r.current,
                          "new": r.new, "log start": r.start, "log end": r.end,
                          "replays": r.replays, "skips": r.skips, "note": r.note}
                         for r in plan.rows])


def _apply(group: str, target: Target, topics: str) -> None:
    """Refuse a viewer or a group that is not Empty; write the plan worked out now, log and
    audit it, read it back."""
    if admission is not None and not signin.may_write(admission):
        log.warning("offsets page: refused %s (a viewer) a reset of group %s", admission.user,
                    group)
        st.error(f"Refused: resetting offsets needs the operator role, and {admission.user} "
                 f"is a viewer. Nothing was changed.")
        return
    settings = ctx.target.settings()
    reader = _reader()
    try:
        g = Group(reader, settings, group)
        g.refuse_unless_empty()
        plan = _plan_for(reader, g, target, topics)
        if not plan.changed:
            st.info("Nothing to change: every offset is already as planned.")
            return
        who = admission.user if admission is not None else (presenter.session_peer()
                                                             or "this machine")
        refused = apply(settings, plan)
        applied = Plan(plan.group, plan.action, plan.target,
                       tuple(r for r in plan.rows if r.tp not in refused), plan.group_type)
        for line in change_lines(applied):  # logged before anything else can fail
            log.warning("offsets page (%s): %s", who, line)
        for (t, p), why in sorted(refused.items()):
            log.warning("offsets page (%s): %s-%d was NOT changed: %s", who, t, p, why)
        unaudited = keep(memory_file()[0], entry(applied, refused, user=who, via="offsets page",
                                                 cluster=ctx.target.describe()))
        if unaudited:
            log.warning("offsets page (%s): %s", who, unaudited)
            st.warning(f"The change is {unaudited}.")
        read_back = g.committed()
    finally:
        reader.close()
    wrong = differences(applied, read_back)
    if refused or wrong:
        st.error(f"Not as planned: {len(refused)} partition(s) refused, {len(wrong)} read "
                 f"back differently: {'; '.join([*refused.values(), *wrong][:3])}")
    else:
        st.success(f"Applied: {summary(plan, done=True)}; every offset reads back as "
                   "previewed.")


c = st.columns(3)
group = c[0].text_input("group", value=os.environ.get(ENV_GROUP, ""), key="off_group",
                        placeholder="e.g. invoicer")
kind = c[1].selectbox("to", list(TARGETS), format_func=TARGETS.get, key="off_to")
value = ""
if kind == "datetime":
    value = c[2].text_input("time", "10m ago", key="off_at",
                            help="ISO 8601 (2026-11-27T10:00:00Z) or '10m ago'")
elif kind in ("offset", "shift"):
    value = str(int(c[2].number_input("offset" if kind == "offset" else "by", step=100,
                                      value=0, key=f"off_{kind}")))
topics = st.text_input("topics (optional)", key="off_topics",
                       placeholder="orders or orders:0,2 (space-separated); empty: every "
                                   "partition the group has committed")
choice = (group.strip(), kind, value, topics.strip())
if st.button("Preview", key="off_preview", disabled=not group.strip()):
    try:
        target = _target(kind, value, datetime.now(UTC))
        plan, state = _plan(group.strip(), target, topics)
    except (UserError, ValueError) as exc:
        st.session_state.pop("off_plan", None)
        st.error(str(exc))
    else:
        st.session_state["off_plan"] = (choice, target, plan, state)

held = st.session_state.get("off_plan")
if held is not None and held[0] == choice:
    _, target, plan, state = held
    pinned = f" (the time pinned: {format_ms(target.value)})" if target.kind == "datetime" \
        else ""
    st.markdown(f"**Preview, nothing changed**: group `{plan.group}` to {plan.target}{pinned}. "
                f"{summary(plan)}. The group is **{state}**.")
    st.dataframe(_rows(plan), hide_index=True, width="stretch", key="off_rows")
    typed = st.text_input("type the group's name to apply", key="off_confirm")
    if st.button("Apply", key="off_apply", type="primary",
                 disabled=typed.strip() != plan.group or not plan.changed):
        try:
            _apply(plan.group, target, topics)
        except UserError as exc:
            st.error(str(exc))
        st.session_state.pop("off_plan", None)
elif held is not None:
    st.caption("The choice changed since the preview: preview it again.")
