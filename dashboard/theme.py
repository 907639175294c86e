"""Colours and type sizes shared by pages and figures.

Replica colours must be stable: the same replica keeps its colour across refreshes, tabs and
restarts, so the room can follow "the orange one". They are the supervisor's
(`backend.pool.names.colour_for`, a fixed function of the name, never of its position
in a list, which changes when a replica leaves), so the dashboard, the CLI and the charts
paint a replica alike.

Members this supervisor did not start (participants' laptops in a workshop room, a replica
started by hand) get a second palette: light tints with dark text and a dashed outline, a
family no supervisor colour comes near (every tint is at least twice as luminous as any
colour of names.PALETTE), so the room tells "ours" from "theirs" at a glance, even on a projector.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from backend.pool.names import colour_for

UNOWNED = "#9ca3af"  # a partition nobody owns (mid-rebalance or empty group)
REBALANCE_FILL = "rgba(234, 88, 12, 0.18)"

STATE_COLOURS: dict[str, str] = {  # st.badge colours for a group state
    "Stable": "green",
    "Empty": "gray",
    "Dead": "red",
    "PreparingRebalance": "orange",
    "CompletingRebalance": "orange",
    "Reconciling": "orange",
    "Assigning": "orange",
    "Unknown": "gray",
}

HEALTH_COLOURS: dict[str, str] = {
    "OK": "green", "WARN": "orange", "STALL": "red", "STOP": "red", "REWIND": "violet",
}
# The same health as fills for HTML (lag bars): green is healthy, so a lagging but progressing
# partition no longer reads as an alarm; STOP is darker than STALL, and the bar names it too.
HEALTH_FILLS: dict[str, str] = {
    "OK": "#16a34a", "WARN": "#d97706", "STALL": "#dc2626", "STOP": "#7f1d1d",
    "REWIND": "#7c3aed",
}
UNKNOWN_HEALTH_FILL = "#6b7280"

# Kafka's side of a partition: an ISR short of its replicas (amber, dark text) and a partition
# with no leader (red): the same words as health, so the room reads them the same way.
UNDER_REPLICATED_FILL = "#fcd34d"
OFFLINE_FILL = "#b91c1c"
BROKER_UP = "#047857"
BROKER_DOWN = "#991b1b"
# Brokers are told apart by id, in a palette of their own (dark slate-family tones with a hue
# each), stable by id, so "broker 2" is the same colour in every chart and never looks like
# a replica.
BROKER_PALETTE: tuple[str, ...] = (
    "#334155", "#7c2d12", "#064e3b", "#312e81", "#713f12", "#4c1d95", "#134e4a", "#831843",
)


def broker_colour(broker_id: int | None) -> str:
    """A stable colour for a broker id; grey for none (a partition without a leader)."""
    if broker_id is None:
        return UNOWNED
    return BROKER_PALETTE[(broker_id - 1) % len(BROKER_PALETTE)]

# Participants' palette: (fill, outline) pairs, Tailwind 200 tints and 700 tones of the same
# hue. Dark text on every fill has a contrast ratio above 12.
PARTICIPANT_PALETTE: tuple[tuple[str, str], ...] = (
    ("#fde68a", "#b45309"), ("#a7f3d0", "#047857"), ("#bfdbfe", "#1d4ed8"),
    ("#fbcfe8", "#be185d"), ("#ddd6fe", "#6d28d9"), ("#a5f3fc", "#0e7490"),
    ("#d9f99d", "#4d7c0f"), ("#fecaca", "#b91c1c"), ("#fed7aa", "#c2410c"),
    ("#e9d5ff", "#7e22ce"), ("#99f6e4", "#0f766e"), ("#f5d0fe", "#a21caf"),
)
PARTICIPANT_TEXT = "#111827"
REPLICA_TEXT = "#ffffff"


def health_fill(health: str) -> str:
    """Fill of a lag bar for a partition's health (grey for a word this page does not know)."""
    return HEALTH_FILLS.get(health, UNKNOWN_HEALTH_FILL)


def replica_colour(name: str | None) -> str:
    """A stable colour for a replica name (client id); grey when nobody owns it."""
    return colour_for(name) if name else UNOWNED


@dataclass(frozen=True)
class MemberStyle:
    """How a member is drawn: fill, text and outline colours, and a dashed outline or not."""

    fill: str
    text: str
    outline: str
    dashed: bool

    def css(self) -> str:
        """Inline CSS for a chip or owner cell: replicas get a border of their own fill, so
        both kinds are the same size and only the look differs."""
        line = "dashed" if self.dashed else "solid"
        return (f"background:{self.fill};color:{self.text};"
                f"border:0.14rem {line} {self.outline}")


def _stable_index(name: str, size: int) -> int:
    return int.from_bytes(hashlib.blake2s(name.encode(), digest_size=4).digest(), "big") % size


def member_style(name: str | None, external: bool = False) -> MemberStyle:
    """A member's look: the replica palette for our replicas, light tints for everyone else.

    Both are functions of the client id alone, so a participant keeps their colour across
    refreshes and rejoins; nobody (None) is grey.
    """
    if not name:
        return MemberStyle(UNOWNED, REPLICA_TEXT, UNOWNED, False)
    if external:
        fill, outline = PARTICIPANT_PALETTE[_stable_index(name, len(PARTICIPANT_PALETTE))]
        return MemberStyle(fill, PARTICIPANT_TEXT, outline, True)
    colour = replica_colour(name)
    return MemberStyle(colour, REPLICA_TEXT, colour, False)


# Bigger type and compact lanes; Streamlit's theme handles colours for light and dark.
CSS = """
<style>
div[data-testid="stMetricValue"] { font-size: 2.2rem; }
.gs-chip { display:inline-block; padding:0.05rem 0.45rem; margin:0.1rem; border-radius:0.6rem;
           font-size:0.85rem; font-family: ui-monospace, monospace; color:#fff;
           white-space:nowrap; }
.gs-card { border-left: 0.5rem solid var(--gs-c); padding: 0.3rem 0.7rem; margin-bottom: 0.4rem;
           border-radius: 0.4rem; background: rgba(127,127,127,0.08); }
.gs-card b { font-size: 1.15rem; }
.gs-muted { opacity: 0.7; }
</style>
"""


# The projector theme: what a room at the back of a hall reads. Black on white whatever the
# browser's own theme, no faded text, heavier type and outlines, type a size up. Switched on
# per browser session (the Live page's sidebar) or by `?theme=projector` in any page's address,
# the way a presenter bookmarks the projector's tab.
PROJECTOR_QUERY = ("theme", "projector")
PROJECTOR_KEY = "gs_projector"
PROJECTOR_CSS = """
<style>
html { font-size: 17px; }
.stApp, .stApp header { background:#ffffff !important; color:#000000 !important; }
.stApp p, .stApp span, .stApp label, .stApp h1, .stApp h2, .stApp h3 { color:#000000; }
.gs-muted { opacity:1 !important; }
.gs-lanes { font-weight:600; }
.gs-chip, .gs-lanes .own { font-weight:800; border-width:0.2rem !important; }
.gs-lag { background:rgba(0,0,0,0.16); }
.gs-lag em { background:#ffffff; color:#000000; border:0.1rem solid #000000; }
.gs-card, .gs-broker { background:rgba(0,0,0,0.06); }
</style>
"""

