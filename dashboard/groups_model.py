"""Pure view-model of the Groups page: which overview rows to show, in what order, as text.

No Streamlit and no I/O: the page feeds it the overview watcher's latest `Overview` and draws
the result as one `st.dataframe`, so a cluster of thousands of groups costs one table build per
refresh (milliseconds) and no widget per row. Every cell is text the page shows as is:
a pending row (listed, not described yet) reads "…", never a zero that would pass for a
healthy group; an ERR row shows its error instead of stale numbers.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from backend.contracts.overview import ERR, HEALTH_WORST_FIRST, GroupRow, Overview
from dashboard.theme import STATE_COLOURS, UNKNOWN_HEALTH_FILL, health_fill

PENDING = "…"  # listed, not described yet
NONE = "–"  # known to be unknown (no rate yet, no rebalance seen, an ERR row's numbers)
# rows sent to the browser; a filter or another order shows the rest (why this many:
# bench/README.md, the Groups page at 65 000 groups)
MAX_ROWS = 1000
PRIORITY_ROWS = 100  # the first rows shown are refreshed first (watcher.prioritise)
MAX_TOPICS_SHOWN = 3
FLAT_RATE = 0.05  # msg/s: a slope this small is a steady lag, shown "0 msg/s" and "steady"

STATES: tuple[str, ...] = tuple(STATE_COLOURS)  # Kafka's group states the filter offers
HEALTHS: tuple[str, ...] = HEALTH_WORST_FIRST  # ERR, STOP, STALL, REWIND, WARN, OK

# The health cell is a one-label list drawn as a coloured pill (a multiselect column), in the
# fills the Live page's lag bars use: colour without per-cell styling, which (a pandas
# Styler) costs seconds at thousands of rows. ERR is "unknown", grey; pending lighter still.
HEALTH_OPTIONS: tuple[str, ...] = (*HEALTH_WORST_FIRST, PENDING)
PENDING_FILL = "#d1d5db"
HEALTH_OPTION_FILLS: tuple[str, ...] = tuple(
    PENDING_FILL if h == PENDING else UNKNOWN_HEALTH_FILL if h == ERR else health_fill(h)
    for h in HEALTH_OPTIONS)


# ---- filter and sort --------------------------------------------------------------------

@dataclass(frozen=True)
class GroupFilter:
    """Name substring (any case), states and health states to keep; empty keeps all."""

    name: str = ""
    states: frozenset[str] = frozenset()
    health: frozenset[str] = frozenset()

    def matches(self, row: GroupRow) -> bool:
        if self.name and self.name.strip().lower() not in row.group.lower():
            return False
        if self.states and row.state not in self.states:
            return False
        # a pending row has no health yet: it matches no health filter
        return not self.health or (not row.pending and row.health in self.health)


_HEALTH_RANK = {h: i for i, h in enumerate(HEALTH_WORST_FIRST)}


def _described(row: GroupRow) -> bool:
    return not row.pending and row.error is None


def _by_health(row: GroupRow) -> tuple:
    rank = len(HEALTH_WORST_FIRST) if row.pending else _HEALTH_RANK.get(row.health, 0)
    return rank, -(row.lag_messages or 0) if _described(row) else 0, row.group


def _by_number(value: Callable[[GroupRow], float | int | None]) -> Callable[[GroupRow], tuple]:
    """Largest first; rows without the number (pending, ERR, not known yet) after, by name."""
    def key(row: GroupRow) -> tuple:
        v = value(row) if _described(row) else None
        return (1, 0.0, row.group) if v is None else (0, -float(v), row.group)
    return key


SORTS: dict[str, Callable[[GroupRow], tuple]] = {
    "health, worst first": _by_health,
    "lag (messages)": _by_number(lambda r: r.lag_messages),
    "lag (seconds)": _by_number(lambda r: r.max_lag_seconds),
    "falling behind fastest": _by_number(lambda r: r.lag_rate),
    "rebalances last hour": _by_number(lambda r: r.rebalances_last_hour),
    "rebalances last 24 h": _by_number(lambda r: r.rebalances_24h),
    "members": _by_number(lambda r: r.members),
    "name": lambda r: (r.group,),
}
DEFAULT_SORT = "health, worst first"


def visible(rows: Iterable[GroupRow], filt: GroupFilter = GroupFilter(),
            sort: str = DEFAULT_SORT) -> list[GroupRow]:
    """The rows the filter keeps, in the chosen order (unknown sort: the default)."""
    return top(rows, filt, sort, limit=None)[0]


def top(rows: Iterable[GroupRow], filt: GroupFilter = GroupFilter(), sort: str = DEFAULT_SORT,
        limit: int | None = MAX_ROWS) -> tuple[list[GroupRow], int]:
    """The first `limit` rows (all with None) the filter keeps in the chosen order, and how
    many it keeps. The page shows a bounded table, so only the rows it shows are ordered,
    which at a large cluster's size is far cheaper than ordering them all."""
    kept = [r for r in rows if filt.matches(r)]
    key = SORTS.get(sort, SORTS[DEFAULT_SORT])
    ordered = sorted(kept, key=key) if limit is None else heapq.nsmallest(limit, kept, key=key)
    return ordered, len(kept)


def priority(rows: Sequence[GroupRow], n: int = PRIORITY_ROWS) -> list[str]:
    """The groups the watcher should refresh first: the top of what the page shows."""
    return [r.group for r in rows[:n]]


# ---- cells --------------------------------------------------------------------------------

def duration_text(seconds: float) -> str:
    """"45 s", "3 m 20 s", "2 h 05 m", "3 d 4 h": two units at most, as people read a lag."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} m {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} m"
    return f"{s // 86400} d {s % 86400 // 3600} h"


V = TypeVar("V")


def _cell(row: GroupRow, value: V | None, show: Callable[[V], str]) -> str:
    """`show(value)`, or PENDING while the row is not described yet and NONE when it could
    not be or the value is not known, so that every number of such a row says the same."""
    if row.pending:
        return PENDING
    if row.error is not None or value is None:
        return NONE
    return show(value)


def rate_text(row: GroupRow) -> str:
    """How fast the total lag changes: "-12.5 msg/s" shrinking, "+3.0 msg/s" growing."""
    return _cell(row, row.lag_rate,
                 lambda rate: "0 msg/s" if abs(rate) < FLAT_RATE else f"{rate:+,.1f} msg/s")


def catch_up_text(row: GroupRow) -> str:
    """Time to zero lag at the current rate, or that the group is falling behind."""
    return _cell(row, row.lag_messages, lambda lag: _catch_up(row, lag))


def _catch_up(row: GroupRow, lag: int) -> str:
    """catch_up_text of a row whose lag is known."""
    if lag == 0:
        return "caught up"
    if row.lag_rate is not None and abs(row.lag_rate) < FLAT_RATE:
        return "steady"  # as much consumed as produced: the lag neither grows nor shrinks
    if row.falling_behind:
        assert row.lag_rate is not None
        return f"falling behind +{row.lag_rate:,.1f} msg/s"
    if row.catch_up_seconds is not None:
        return duration_text(row.catch_up_seconds)
    return NONE  # lag, but no rate yet


def ago_text(at_ms: int | None, now_ms: int) -> str:
    if at_ms is None:
        return NONE
    return f"{duration_text(max(0, now_ms - at_ms) / 1000)} ago"


def topics_text(topics: Sequence[str]) -> str:
    shown = ", ".join(topics[:MAX_TOPICS_SHOWN])
    more = len(topics) - MAX_TOPICS_SHOWN
    return f"{shown} +{more}" if more > 0 else shown


@dataclass(frozen=True)
class GroupLine:
    """One table row, every cell ready to show (the trend is the sparkline's points)."""

    group: str
    health: list[str]  # one of HEALTH_OPTIONS
    state: str
    protocol: str
    members: str
    topics: str
    lag: str
    lag_seconds: str
    trend: list[int]
    rate: str
    catch_up: str
    rebalances: str  # in the last hour
    rebalances_24h: str
    last_cause: str  # the main cause of the last rebalance that ended (contracts.history)
    last_rebalance: str
    note: str  # the error of an ERR row, "not described yet" of a pending one


def line(row: GroupRow, now_ms: int) -> GroupLine:
    protocol = row.protocol + (f" / {row.assignor}" if row.assignor else "")
    if row.pending:
        return GroupLine(row.group, [PENDING], row.state, protocol, PENDING, PENDING, PENDING,
                         PENDING, [], PENDING, PENDING, PENDING, PENDING, PENDING, PENDING,
                         "not described yet")
    err = row.error is not None
    health = [ERR if err else row.health]
    lag = _cell(row, row.lag_messages, "{:,}".format)
    secs = _cell(row, row.max_lag_seconds, duration_text)
    return GroupLine(
        group=row.group, health=health, state=row.state, protocol=protocol,
        members=NONE if err else str(row.members),
        topics=NONE if err else topics_text(row.topics),
        lag=lag, lag_seconds=secs, trend=list(row.lag_trend), rate=rate_text(row),
        catch_up=catch_up_text(row), rebalances=str(row.rebalances_last_hour),
        rebalances_24h=str(row.rebalances_24h), last_cause=row.last_cause or NONE,
        last_rebalance=ago_text(row.last_rebalance_ms, now_ms), note=row.error or "")


# Rebalancing first, after who the group is: at 1280×720 the table shows about its first
# nine columns without scrolling inside itself.
COLUMNS: tuple[str, ...] = ("group", "health", "state", "protocol", "members", "rebalances",
                            "rebalances_24h", "last_cause", "lag", "lag_seconds", "trend",
                            "rate", "catch_up", "topics", "last_rebalance", "note")


def table(rows: Sequence[GroupRow], now_ms: int) -> dict[str, list]:
    """Column name -> cells, at most MAX_ROWS rows: what the page hands to one dataframe.
    The note column is left out when no row has one."""
    out: dict[str, list] = {c: [] for c in COLUMNS}
    for row in rows[:MAX_ROWS]:
        cells = line(row, now_ms)
        for c in COLUMNS:
            out[c].append(getattr(cells, c))
    if not any(out["note"]) or all(n == "not described yet" for n in out["note"]):
        del out["note"]
    return out


# ---- footer -------------------------------------------------------------------------------

def footer(overview: Overview, shown: int, now_ms: int | None = None) -> str:
    """Listed / described / shown counts, what the last complete cycle cost, the cluster's
    release and the group types it cannot have (said here, once, not as an error)."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    parts = [f"{overview.listed:,} groups listed", f"{overview.described:,} described",
             f"{shown:,} shown" + (f" (first {MAX_ROWS:,})" if shown > MAX_ROWS else "")]
    c = overview.cycle
    if c is None:
        parts.append("first cycle running")
    else:
        errors = f", {c.errors} errors" if c.errors else ""
        parts.append(f"last cycle {c.seconds:.1f} s, {c.requests:,} requests{errors}")
    parts.append(f"updated {duration_text((now_ms - overview.taken_ms) / 1000)} ago")
    if overview.kafka_release:
        parts.append(f"Kafka {overview.kafka_release}")
    return " · ".join(parts + [line[0].upper() + line[1:] for line in overview.lacks])
