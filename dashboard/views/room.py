"""The room's panels on the Live page: the join card and the leaderboard.

The join card is drawn only when the stack runs as a room (`up --room` wrote room.json); it
shows what a participant's laptop needs to join the group, as snippets that work verbatim.
The Spark token is the one secret on it: it appears only in a presenter's session, after
that session asked for it, and is read from its 0600 file at that moment only.

The leaderboard is drawn for any group with members, room or not. Its model folds the shared
observer's history; one model per watched group serves every tab (st.cache_resource), so a
member's total does not depend on when a tab was opened, and a lock keeps two tabs' fragments
from folding at once.

Imports inside functions let `presenter_session` look dashboard.presenter up when it is called,
so it fails closed whatever module stands there (tests/dashboard/test_room_view.py puts in a
stand-in, with and without is_presenter).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from html import escape
from pathlib import Path

import streamlit as st

from backend.contracts import Snapshot
from backend.contracts.room import SPARK_TOKEN_FILE, RoomInfo, read_room, read_secret
from backend.paths import data_dir
from dashboard import room_model as rm
from dashboard.context import ViewContext
from dashboard.leaderboard_model import (
    SHARING,
    SOLO,
    WAITING,
    Leaderboard,
    LeaderRow,
    duration_text,
)
from dashboard.live_model import external_members
from dashboard.pollers import observer_for
from dashboard.theme import member_style
from dashboard.views.supervised import supervised_replicas

JOIN_REFRESH_S = 5.0  # room.json changes once per `up --room`; the card need not chase it
BOARD_REFRESH_S = 1.0
REVEAL_KEY = "gs_room_reveal_token"  # this session asked to see the Spark token

BADGE_COLOURS = {SHARING: "#047857", SOLO: "#1d4ed8", WAITING: "#b45309"}
DEPARTED_COLOUR = "#6b7280"

BOARD_CSS = """
<style>
.gs-board { width:100%; border-collapse:collapse; font-size:1rem; }
.gs-board th { text-align:left; font-weight:700; padding:0.2rem 0.5rem;
               border-bottom:1px solid rgba(127,127,127,0.4); }
.gs-board td { padding:0.2rem 0.5rem; border-bottom:1px solid rgba(127,127,127,0.15); }
.gs-board td.n { text-align:right; font-variant-numeric:tabular-nums; }
.gs-board .who { font-weight:800; }
.gs-board .dot { display:inline-block; width:0.8rem; height:0.8rem; border-radius:50%;
                 margin-right:0.4rem; vertical-align:middle; }
.gs-board .badge { color:#fff; border-radius:0.6rem; padding:0 0.5rem; font-size:0.85rem;
                   font-weight:700; white-space:nowrap; }
.gs-board tr.gone { opacity:0.5; }
</style>
"""


# ---- presenter check ----------------------------------------------------------------------

def presenter_session() -> bool:
    """Whether this session is the presenter's, per dashboard/presenter.py's is_presenter().

    Fails closed: without that function (not built yet), or if it raises, nobody is the
    presenter and the Spark token cannot be revealed.
    """
    try:
        from dashboard.presenter import is_presenter  # type: ignore[attr-defined]
    except ImportError:
        return False
    try:
        return bool(callable(is_presenter) and is_presenter())
    except Exception:
        return False


# ---- join card ----------------------------------------------------------------------------

def _set_reveal(value: bool) -> None:
    st.session_state[REVEAL_KEY] = value


def _replica_tab(room: RoomInfo, root: Path) -> None:
    wheel = rm.wheel_path(root, room)
    if wheel is not None:
        st.download_button(f"Download {wheel.name}", data=wheel.read_bytes, file_name=wheel.name,
                           mime="application/octet-stream", on_click="ignore",
                           icon=":material/download:", key="room_wheel")
    presenter = presenter_session()
    token = None
    if presenter and st.session_state.get(REVEAL_KEY):
        token = read_secret(root, SPARK_TOKEN_FILE)
        st.button("Hide Spark token", key="room_hide_token", on_click=_set_reveal,
                  args=(False,), icon=":material/visibility_off:")
        if token is None:
            st.warning("No Spark token file in the data directory: is the stack a room?")
    elif presenter:
        st.button("Reveal Spark token", key="room_reveal_token", on_click=_set_reveal,
                  args=(True,), icon=":material/key:",
                  help="Shows the token in this snippet, in this browser tab only. Whoever "
                       "sees the screen can then use the Spark engine.")
    st.caption("A groupscope replica of the presenter's own version: it summarises its "
               "streams on the presenter's Spark engine. Needs Python 3.11+.")
    st.code(rm.replica_commands(room, token, wheel_ready=wheel is not None), language="bash")


def draw_join_card(room: RoomInfo, root: Path) -> None:
    with st.expander("Join this room", expanded=True, icon=":material/qr_code_2:"):
        qr, info = st.columns([1, 3], gap="medium")
        qr.image(rm.qr_png(room.dashboard_url), width=200,
                 caption="this dashboard on your phone or laptop")
        info.markdown(f"Dashboard: **{room.dashboard_url}**  \n"
                      f"Kafka bootstrap: `{room.bootstrap}`  \n"
                      f"Topic: `{room.topic}` · consumer group: `{room.group}`")
        info.caption("Join the group with any consumer below; put your own name in NAME: it "
                     "is your client.id, the name the leaderboard and the lanes show.")
        python, console, replica = info.tabs(
            ["Python (confluent-kafka)", "Kafka console consumer", "groupscope replica"])
        with python:
            st.caption("Save as join.py, then `pip install confluent-kafka` and "
                       "`python3 join.py`. Ctrl-C leaves the group.")
            st.code(rm.python_consumer(room), language="python")
        with console:
            st.caption("From a Kafka download's bin/ directory (needs Java).")
            st.code(rm.console_consumer(room), language="bash")
        with replica:
            _replica_tab(room, root)


@st.fragment(run_every=JOIN_REFRESH_S)
def join_panel() -> None:
    """The join card when the stack runs as a room; nothing otherwise."""
    root = data_dir()
    room = read_room(root)
    if room is not None:
        draw_join_card(room, root)


# ---- leaderboard --------------------------------------------------------------------------

class SharedBoard:
    """One Leaderboard per watched group, folded under a lock by whichever tab comes first."""

    def __init__(self) -> None:
        self.board = Leaderboard()
        self.lock = threading.Lock()

    def update(self, history: Callable[..., tuple[Snapshot, ...]],
               supervised: tuple = ()) -> list[LeaderRow]:
        """Fold what the observer recorded since the last fold; `history` is its history()."""
        with self.lock:
            self.board.fold(history(since_ms=self.board.last_ms), supervised)
            return self.board.rows()


@st.cache_resource(show_spinner=False, max_entries=8)
def _board_for(target: object, group: str, topic: str | None) -> SharedBoard:
    return SharedBoard()


def _badge(row: LeaderRow) -> str:
    colour = DEPARTED_COLOUR if row.departed else BADGE_COLOURS.get(row.badge, DEPARTED_COLOUR)
    return f'<span class="badge" style="background:{colour}">{escape(row.badge)}</span>'


def leaderboard_html(rows: list[LeaderRow], now_ms: int,
                     external: frozenset[str] = frozenset()) -> str:
    """The table: names and hosts come from clients' own settings, so all is escaped.
    `external` members (participants) get the participants' palette, as in the lanes."""
    body = []
    for rank, r in enumerate(rows, 1):
        parts = ", ".join(f"P{p}" for p in r.partitions) or "–"
        since = "≥ " if r.seen_at_start else ""  # a member before the page began watching
        rate = "–" if r.departed else f"{r.rate:,.1f}"
        if r.departed and r.left_ms is not None:
            at = time.strftime("%H:%M:%S", time.localtime(r.left_ms / 1000))
            status = f"{_badge(r)} at {at}"
        else:
            status = _badge(r)
        body.append(
            f'<tr class="{"gone" if r.departed else "here"}">'
            f'<td class="n">{rank}</td>'
            f'<td class="who">{_dot(r.name, r.name in external)}{escape(r.name)}</td>'
            f"<td>{status}</td><td>{escape(r.host)}</td><td>{parts}</td>"
            f'<td class="n">{r.streams:,}</td><td class="n">{rate}</td>'
            f'<td class="n">{r.processed:,}</td>'
            f'<td class="n">{since}{duration_text(r.in_group_ms(now_ms))}</td></tr>')
    head = ("<tr><th>#</th><th>member</th><th></th><th>host</th><th>partitions</th>"
            "<th>streams</th><th>msg/s</th><th>processed</th><th>in group</th></tr>")
    return (f'{BOARD_CSS}<table class="gs-board" data-testid="gs-leaderboard">'
            f'<thead>{head}</thead><tbody>{"".join(body)}</tbody></table>')


def _dot(name: str, external: bool) -> str:
    look = member_style(name, external)
    border = "dashed" if look.dashed else "solid"
    return (f'<span class="dot" style="background:{look.fill};'
            f'border:1px {border} {look.outline}"></span>')


def draw_leaderboard(rows: list[LeaderRow], now_ms: int,
                     external: frozenset[str] = frozenset()) -> None:
    st.markdown("#### Leaderboard")
    st.caption("Messages processed, counted from each member's committed offsets while it "
               "owned the partitions; members that left stay, greyed.")
    st.html(leaderboard_html(rows, now_ms, external))


@st.fragment(run_every=BOARD_REFRESH_S)
def leaderboard_panel(ctx: ViewContext) -> None:
    """Every member of the group, present and departed, once it has had any."""
    shared = observer_for(ctx.target, ctx.group, ctx.topic)
    supervised = supervised_replicas(ctx)
    rows = _board_for(ctx.target, ctx.group, ctx.topic).update(shared.history, supervised)
    snap = shared.latest()
    external = external_members(snap, supervised) if snap is not None else frozenset()
    if rows:
        draw_leaderboard(rows, int(time.time() * 1000), external)
