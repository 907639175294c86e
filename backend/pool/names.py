"""Stable human names and colours for replicas.

The name is also the replica's Kafka `client.id`, so the broker, the observer, the dashboard
and the CLI all show the same word. Every name starts with a different letter, so a one-letter
label in a crowded chart is still unambiguous. Colours are a fixed function of the name, so a
tool that only sees a client id (the observer watching a production group) paints it the same.
"""

from __future__ import annotations

import re
import zlib

# a..z, one name per initial; the 27th replica is "ada-2", and so on.
NAMES: tuple[str, ...] = (
    "ada", "bruno", "chloe", "dmitri", "elif", "farah", "gus", "hana", "ivo", "jun",
    "kofi", "lena", "mateo", "nia", "omar", "priya", "quinn", "rosa", "sven", "tariq",
    "uma", "vera", "wen", "xavi", "yara", "zane",
)

# The first eight, the colours of a small fleet, stay far apart (CIE76 distance > 20) for
# everyone: in normal vision and simulated protanopia, deuteranopia and tritanopia, and from
# the unowned grey; chosen by a search over mid-tones, not by eye. The next eight are far
# apart in normal vision (> 18); the rest only differ from those sixteen. All are mid-tones:
# white text reads on each (WCAG AA for large text), and each stands out on white and on
# Streamlit's dark background (tests/supervisor/test_names.py). No fact rests on colour
# alone: every lane, chip and card also carries the member's name.
PALETTE: tuple[str, ...] = (
    "#f26100",  # orange
    "#5700d9",  # violet
    "#733434",  # maroon
    "#0098d9",  # sky
    "#bf8056",  # tan
    "#a60074",  # magenta
    "#6d19a6",  # purple
    "#a61100",  # brick
    "#65a30d",  # lime
    "#059669",  # emerald
    "#475569",  # slate
    "#2563eb",  # blue
    "#be123c",  # rose
    "#0f766e",  # teal
    "#c026d3",  # fuchsia
    "#92400e",  # brown
    "#7c3aed",  # lavender
    "#d97706",  # amber
    "#db2777",  # pink
    "#0891b2",  # cyan
    "#dc2626",  # red
    "#4338ca",  # indigo
    "#ea580c",  # tangerine
    "#0369a1",  # ocean
    "#a16207",  # ochre
    "#15803d",  # green
    "#6d28d9",  # grape
    "#4d7c0f",  # olive
    "#0e7490",  # petrol
    "#b45309",  # copper
    "#9d174d",  # wine
    "#1d4ed8",  # royal
)

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


def name_at(ordinal: int) -> str:
    """The ordinal-th name (0-based): ada, bruno, ..., zane, ada-2, bruno-2, ..."""
    if ordinal < 0:
        raise ValueError("ordinal must be >= 0")
    lap, index = divmod(ordinal, len(NAMES))
    return NAMES[index] if lap == 0 else f"{NAMES[index]}-{lap + 1}"


def ordinal_of(name: str) -> int | None:
    """Inverse of name_at; None for a name this module did not hand out."""
    base, _, lap = name.partition("-")
    if base not in NAMES:
        return None
    if not lap:
        return NAMES.index(base)
    if not lap.isdigit() or int(lap) < 2 or lap != str(int(lap)):
        return None
    return (int(lap) - 1) * len(NAMES) + NAMES.index(base)


def next_free_name(taken: set[str] | frozenset[str]) -> str:
    """The first name in order that is not in `taken`: small fleets keep small names."""
    ordinal = 0
    while name_at(ordinal) in taken:
        ordinal += 1
    return name_at(ordinal)


def colour_for(name: str) -> str:
    """Fixed colour per name; names we did not hand out get a stable hashed one."""
    ordinal = ordinal_of(name)
    if ordinal is None:
        ordinal = zlib.crc32(name.encode("utf-8"))
    return PALETTE[ordinal % len(PALETTE)]


# ---- colour arithmetic, for legible labels and for the palette tests ----------------------

def _channel(c: float) -> float:
    c /= 255.0
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(hex_colour: str) -> float:
    """WCAG relative luminance of '#rrggbb'."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast_ratio(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_colour_on(background: str) -> str:
    """Black or white, whichever reads better on `background`."""
    return "#ffffff" if contrast_ratio(background, "#ffffff") >= contrast_ratio(
        background, "#000000") else "#000000"
