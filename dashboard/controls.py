"""Sidebar controls: each widget calls the supervisor's control API through its typed client.

Only the presenter's sessions get them (dashboard/presenter.py decides, from the websocket's
peer or a room passcode): a viewer's page has no control widget at all, and `call_control`,
the one path to the ControlClient (every page's controls use it), asks again, so a replayed
widget event from a viewer reaches nothing.
Disabled, with a one-line reason, when the page is read-only, when no supervisor answers, or
when the group shown is not the one the supervisor manages. A refused call shows the API's
one-line message; nothing here raises into the page.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from backend.contracts import COMMIT_GUARANTEES, COMMIT_MODES
from backend.contracts.control import (
    MAX_PARTITIONS,
    MAX_RATE,
    MAX_REPLICAS,
    MAX_STREAMS,
    PROTOCOL_ASSIGNORS,
    CapacityAnswer,
    FleetState,
    PartitionChange,
    ReplayAnswer,
    ReplayPreview,
    ReplicaInfo,
    ReplicaOptions,
    ScaleAnswer,
    Status,
)
from backend.paths import data_dir
from backend.supervisor.client import ControlClient, ControlError
from dashboard import presenter
from dashboard.context import ViewContext
from dashboard.pollers import Reading, supervisor_poller
from dashboard.presenter import Role, Verdict
from dashboard.theme import PROJECTOR_KEY, PROJECTOR_QUERY

MESSAGE_S = 15.0


def supervisor_status(wait_s: float = 2.0) -> tuple[Reading | None, Status | None]:
    """The shared supervisor poller's latest reading, and the Status in it when it has one."""
    reading = supervisor_poller(str(data_dir())).latest(wait_s=wait_s)
    return reading, (reading.value if reading is not None and reading.ok else None)


def disabled_reason(ctx: ViewContext, status: Reading | None) -> str | None:
    """None when controls may act; otherwise the one line that says why not."""
    if ctx.read_only:
        return "Read-only mode: this dashboard only watches."
    if ctx.watching:
        return "Watching another cluster: controls act only on the local stack."
    if status is None:
        return "Looking for the supervisor…"
    if not status.ok or status.value is None:
        return f"No supervisor: {status.error}"
    if status.value.group != ctx.group:
        return f"Group {ctx.group} is not managed here (the supervisor runs {status.value.group})."
    return None


def call_control(label: str, action: Callable[[Any], object]) -> object | None:
    """Run one control action for a presenter session: its answer, or None when it was
    refused (the message says why) or not sent (a viewer's session)."""
    if presenter.session_role() is not Role.PRESENTER:
        presenter.log.warning("control action %r refused: viewer session (peer %s)", label,
                              presenter.session_peer() or "unknown")
        return None
    presenter.log.info("control action %r from a presenter session", label)
    result = None
    try:
        client = ControlClient.discover(data_dir(), timeout=20.0)
        result = action(client)
    except ControlError as exc:
        st.session_state["gs_ctl_msg"] = ("error", f"{label}: {exc}", time.monotonic())
    else:
        st.session_state["gs_ctl_msg"] = ("ok", f"{label}: {_summary(label, result)}",
                                          time.monotonic())
    supervisor_poller(str(data_dir())).poll_now()
    return result


def action_button(where: Any, label: str, key: str, act: Callable[[], object],
                  **kwargs: Any) -> bool:
    """A button whose action runs once per click, as its `on_click` callback; True in the run
    that follows the click (for a follow-up such as `st.rerun`, never for the action).

    Streamlit runs a click's callback again when live fragments' refreshes interrupt the run
    that had it (the click's trigger is kept for the next run): one Kill click was seen to
    kill a replica three times in 0.5 s at load 25, and "not running (killed)" was the
    answer shown. So a click on the same button within REPEAT_S of the last one taken is
    the same click (a presenter's double-click too); `act` runs for the first alone. It runs
    before the body, so it reads the other widgets from `st.session_state` (`widget`), as
    the click left them."""
    return where.button(label, key=key, on_click=_once, args=(key, act), **kwargs)


REPEAT_S = 2.5
_LAST_CLICK = "gs_last_click"


def _once(key: str, act: Callable[[], object]) -> object | None:
    now = time.monotonic()
    last = st.session_state.get(_LAST_CLICK)
    if last is not None and last[0] == key and now - last[1] < REPEAT_S:
        presenter.log.info("click on %r again within %.1f s: taken once", key, REPEAT_S)
        return None
    st.session_state[_LAST_CLICK] = (key, now)
    return act()


def widget(key: str) -> Any:
    """A widget's value as the last interaction left it (in an action's callback, before the
    widget is drawn again)."""
    return st.session_state.get(key)


def show_answer(about: str = "") -> None:
    """The last control action's answer (one whose label contains `about`), for MESSAGE_S
    from the run that first shows it: counted from the action instead, an answer could expire
    unseen while the rest of that run waited on a cluster that had just lost a node."""
    msg = st.session_state.get("gs_ctl_msg")
    if not msg or about not in msg[1]:
        return
    if len(msg) == 3:  # (kind, text, when answered) until first shown
        msg = st.session_state["gs_ctl_msg"] = (*msg[:2], time.monotonic(), True)
    if time.monotonic() - msg[2] < MESSAGE_S:  # long enough to read, then gone
        (st.success if msg[0] == "ok" else st.error)(msg[1])


def _summary(label: str, result: object) -> str:
    # kill and stop answer before the process has exited, so say what was sent
    if isinstance(result, ReplicaInfo):
        if label.startswith("kill") and "(share group)" in label:
            return (f"SIGKILL sent (pid {result.pid}); the records it held come back to the "
                    f"others after the lock time")
        if label.startswith("kill"):
            return (f"SIGKILL sent (pid {result.pid}); the group notices within its session "
                    f"timeout")
        if label.startswith("stop"):
            return f"SIGTERM sent (pid {result.pid}); it finishes its batch and leaves the group"
        return f"{result.name} is {result.state}"
    if isinstance(result, ScaleAnswer):
        return (f"started {', '.join(result.started) or 'none'}; stopping "
                f"{', '.join(result.stopping) or 'none'}")
    if isinstance(result, FleetState):
        return f"{'running' if result.running else 'stopped'}, {result.streams} streams, " \
               f"target {result.target_rate or 'unlimited'} msg/s"
    if isinstance(result, PartitionChange):
        return (f"{result.before} → {result.after} partitions; "
                f"{len(result.moved)} of {result.streams_checked} streams moved")
    if isinstance(result, CapacityAnswer):
        cap = result.options.max_rate
        return (f"capacity {'off' if cap is None else f'{cap:g} msg/s per replica'}; "
                f"restarting {', '.join(result.restarting) or 'none'}")
    if isinstance(result, ReplayPreview):
        return (f"replays {result.replays:,} records, skips {result.skips:,} (nothing "
                f"changed yet)")
    if isinstance(result, ReplayAnswer):
        return (f"moved to {result.applied.target}: {result.applied.replays:,} records to "
                f"read again, {result.applied.skips:,} skipped; replicas "
                f"{', '.join(result.started) or 'none'} started again"
                + ("" if result.read_back_matches else "; READ BACK DIFFERS"))
    if isinstance(result, ReplicaOptions):
        return (f"new replicas join with {result.protocol}/{result.assignor}, commit "
                f"{result.commit} ({COMMIT_GUARANTEES[result.commit]})")
    return "done"


def render_controls(ctx: ViewContext) -> None:
    """Draw the controls panel for the presenter, the passcode box or nothing for a viewer
    (call inside `with st.sidebar:`); the projector theme's switch for everyone."""
    _projector_switch()
    if ctx.read_only:
        st.caption("Read-only mode: this dashboard only watches.")
        return
    if presenter.session_role() is Role.PRESENTER:
        _controls_panel(ctx)
    else:
        _viewer_panel()


def _projector_switch() -> None:
    """The projector theme for this browser session. The widget's own state is dropped on
    pages that do not draw it, so the choice is kept under a key of its own, which app.py
    reads on every page."""
    def keep() -> None:  # a forged or replayed message can call this with no such widget
        st.session_state[PROJECTOR_KEY] = bool(st.session_state.get("gs_projector_switch"))

    st.toggle("Projector theme", value=bool(st.session_state.get(PROJECTOR_KEY)),
              key="gs_projector_switch", on_change=keep,
              help="black on white, heavier type: for the back of a room; or add "
                   f"?{PROJECTOR_QUERY[0]}={PROJECTOR_QUERY[1]} to a page's address")


PASSCODE_SAID = "gs_passcode_said"  # what the last wrong passcode was told, until the next try


def _viewer_panel() -> None:
    """A viewer's sidebar: no control widget; in room mode, the presenter passcode box."""
    st.caption("Viewing: the presenter has the controls.")
    if presenter.room_passcode() is None:
        return
    with st.form("gs_passcode_form", clear_on_submit=True, border=False):
        given = st.text_input("Presenter passcode", type="password", key="gs_passcode",
                              help="unlocks the controls in this browser tab only")
        submitted = st.form_submit_button("Unlock", key="gs_unlock")
    outcome = presenter.try_passcode(given) if submitted else None
    if outcome is not None:
        st.session_state.pop(PASSCODE_SAID, None)
        if outcome.verdict is Verdict.ACCEPTED:
            st.rerun()  # draw the page again, now with the controls
        if outcome.verdict is Verdict.WRONG:
            # kept until the next try: the page reruns every few seconds, and a warning drawn
            # on the submitting run alone was gone before a reader (or a test) saw it
            left = outcome.tries_left
            st.session_state[PASSCODE_SAID] = (
                f"Wrong passcode: {left} more {'try' if left == 1 else 'tries'} before this "
                f"address is locked out.")
    locked = presenter.passcode_locked_for()
    if locked > 0:
        st.session_state.pop(PASSCODE_SAID, None)  # its count starts again after the lock
        st.error(f"Too many wrong passcodes from this address: locked for {locked:.0f} s.")
    elif PASSCODE_SAID in st.session_state:
        st.warning(st.session_state[PASSCODE_SAID])


@st.fragment(run_every=2.0)
def _controls_panel(ctx: ViewContext) -> None:
    if presenter.session_role() is not Role.PRESENTER:  # asked again at every refresh
        return
    reading, status = supervisor_status()
    reason = disabled_reason(ctx, reading)
    off = reason is not None
    st.subheader("Controls")
    if reason:
        st.caption(reason)
    slot = st.container()  # the outcome of an action goes here, filled at the end

    running = [r.name for r in status.running] if status else []
    st.selectbox("replica", running or ["(none)"], disabled=off or not running, key="ctl_replica")
    row = st.container(horizontal=True, wrap=True, gap="small")  # wraps where columns cut
    action_button(row, "Kill", "ctl_kill", _on_replica("kill"), disabled=off or not running,
                  help="SIGKILL: the group notices after the session timeout")
    action_button(row, "Stop", "ctl_stop", _on_replica("stop"), disabled=off or not running,
                  help="SIGTERM: finish the batch, commit, leave at once")
    action_button(row, "Start", "ctl_start", lambda: call_control("start", lambda c: c.start()),
                  disabled=off, help="start one more replica")

    st.number_input("replicas", min_value=0,
                    max_value=max(1, status.max_replicas) if status else MAX_REPLICAS,
                    value=len(running), step=1, disabled=off, key="ctl_scale_n")
    action_button(st, "Scale", "ctl_scale", _scale, disabled=off)

    opts = status.options if status else None
    protocols = list(PROTOCOL_ASSIGNORS)
    protocol = st.selectbox("protocol for new replicas", protocols, disabled=off,
                            index=protocols.index(opts.protocol)
                            if opts and opts.protocol in protocols else 0, key="ctl_protocol")
    assignors = PROTOCOL_ASSIGNORS[protocol]
    st.selectbox("assignor", assignors, disabled=off,
                 index=assignors.index(opts.assignor)
                 if opts and opts.assignor in assignors else 0, key="ctl_assignor")
    modes = list(COMMIT_MODES)
    st.selectbox("commit mode", modes, disabled=off, key="ctl_commit",
                 index=modes.index(opts.commit) if opts and opts.commit in modes else 0,
                 format_func=lambda m: f"{m} ({COMMIT_GUARANTEES[m]})",
                 help="  \n".join(f"**{m}**: {t}" for m, t in COMMIT_MODES.items())
                 + "  \nKill a replica under each and compare the Streams page's "
                   "duplicates and gaps.")
    st.toggle("static membership", value=bool(opts.static) if opts else False,
              disabled=off, key="ctl_static",
              help="group.instance.id = the replica's name: a quick restart moves nothing")
    action_button(st, "Apply to new replicas", "ctl_options", _options, disabled=off)

    st.number_input("capacity per replica (msg/s, 0 = no cap)", min_value=0.0,
                    max_value=MAX_RATE, step=10.0, disabled=off, key="ctl_capacity",
                    value=float(opts.max_rate or 0.0) if opts else 0.0,
                    help="each replica takes at most this many messages a second, so "
                         "adding replicas visibly lowers the lag; running replicas "
                         "restart to take it")
    action_button(st, "Set capacity", "ctl_set_capacity", _capacity, disabled=off)

    fleet = status.fleet if status else None
    st.number_input("producer rate (msg/s)", min_value=0.0, max_value=MAX_RATE,
                    value=float(fleet.target_rate or 200.0) if fleet else 200.0,
                    step=50.0, disabled=off or not fleet, key="ctl_rate")
    st.number_input("streams (cars)", min_value=1, max_value=MAX_STREAMS,
                    value=fleet.streams if fleet else 12, step=1,
                    disabled=off or not fleet, key="ctl_streams")
    f1, f2 = st.columns(2)
    action_button(f1, "Set rate", "ctl_set_rate", lambda: call_control(
        "rate", lambda c: c.set_rate(float(widget("ctl_rate")))), disabled=off or not fleet)
    action_button(f2, "Set streams", "ctl_set_streams", lambda: call_control(
        "streams", lambda c: c.set_streams(int(widget("ctl_streams")))),
        disabled=off or not fleet)

    current = (status.partitions or 1) if status else 1
    total = st.number_input("partitions (total)", min_value=current,
                            max_value=max(current, MAX_PARTITIONS), value=current, step=1,
                            disabled=off, key="ctl_partitions")
    action_button(st, "Add partitions", "ctl_add_parts", lambda: call_control(
        "partitions", lambda c: c.add_partitions(int(widget("ctl_partitions")))),
        disabled=off or int(total) <= current,
        help="moves some keys to new partitions: per-key order breaks across the change")
    with slot:
        show_answer()


# ---- the panel's actions, as its buttons' callbacks (action_button) -----------------------

def _on_replica(verb: str) -> Callable[[], object]:
    def act() -> object:
        name = widget("ctl_replica")
        return call_control(f"{verb} {name}", lambda c: getattr(c, verb)(name))
    return act


def _scale() -> object:
    count = int(widget("ctl_scale_n") or 0)
    return call_control(f"scale to {count}", lambda c: c.scale(count))


def _options() -> object:
    return call_control("options", lambda c: c.set_options(
        widget("ctl_protocol"), widget("ctl_assignor"), static=bool(widget("ctl_static")),
        commit=widget("ctl_commit")))


def _capacity() -> object:
    cap = float(widget("ctl_capacity") or 0.0)
    return call_control("capacity", lambda c: c.set_capacity(cap if cap > 0 else None))

