"""Colours and type sizes shared by pages and figures.

Replica colours must be stable: the same replica keeps its colour across refreshes, tabs and
restarts, so the room can follow "the orange one". The supervisor's palette (names.py) is used
when it exists; otherwise the colour is derived from a hash of the name, never from its
position in a list (positions change when a replica leaves).
"""

from __future__ import annotations

import hashlib

# Distinct on both white and near-black backgrounds; ordered so neighbours differ strongly.
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#6b7280", "#0d9488", "#f59e0b", "#6366f1", "#84cc16",
    "#ec4899", "#0ea5e9",
)
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


def health_fill(health: str) -> str:
    """Fill of a lag bar for a partition's health (grey for a word this page does not know)."""
    return HEALTH_FILLS.get(health, UNKNOWN_HEALTH_FILL)




def _supervisor_colour(name: str) -> str | None:
    try:
        from backend.supervisor import names  # type: ignore[attr-defined]
    except ImportError:
        return None
    for attr in ("colour_for", "color_for", "replica_colour", "replica_color"):
        func = getattr(names, attr, None)
        if callable(func):
            try:
                return str(func(name))
            except Exception:
                return None
    return None


_cache: dict[str, str] = {}


def replica_colour(name: str | None) -> str:
    """A stable colour for a replica name (client id); grey when nobody owns it."""
    if not name:
        return UNOWNED
    colour = _cache.get(name)
    if colour is None:
        colour = _supervisor_colour(name) or PALETTE[
            int.from_bytes(hashlib.blake2s(name.encode(), digest_size=4).digest(), "big")
            % len(PALETTE)
        ]
        if len(_cache) < 4096:
            _cache[name] = colour
    return colour


# Bigger type and compact lanes; Streamlit's theme handles colours for light and dark.
CSS = """
<style>
div[data-testid="stMetricValue"] { font-size: 2.2rem; }
.gs-chip { display:inline-block; padding:0.05rem 0.45rem; margin:0.1rem; border-radius:0.6rem;
           font-size:0.85rem; font-family: ui-monospace, monospace; color:#fff; }
.gs-card { border-left: 0.5rem solid var(--gs-c); padding: 0.3rem 0.7rem; margin-bottom: 0.4rem;
           border-radius: 0.4rem; background: rgba(127,127,127,0.08); }
.gs-card b { font-size: 1.15rem; }
.gs-muted { opacity: 0.7; }
</style>
"""
