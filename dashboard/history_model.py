"""Pure view-model of the Timeline page's memory: a group's rebalance episodes over a span of
time, as cards, a table and a lag chart's data.

No Streamlit and no I/O: the page reads the memory (`dashboard/pollers.py` `group_memory`)
and hands the episodes and the lag block here. Every word about a cause comes from
`backend.contracts.history.CAUSES`, every number from the `Episode` and its `Impact`, so the
page, `groupscope history` and /metrics say the same thing.

The worst episode of a span is the one that cost the most, read in this order: partition-
seconds without an owner (nobody consumed), then the processing gap (how long the moved
partitions made no progress), then how far the lag rose (peak − before); the newest wins a
tie. `WORST_RULE` says so on the page.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.contracts import CLASSIC, SHARE
from backend.contracts.history import CAUSES, NOT_OBSERVED, Episode, Moved
from backend.history.chunks import LagBlock
from dashboard.groups_model import NONE, duration_text

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

# ---- the span ------------------------------------------------------------------------------

SPANS: dict[str, int] = {"last 1 h": HOUR_MS, "last 6 h": 6 * HOUR_MS,
                         "last 24 h": DAY_MS, "last 7 d": 7 * DAY_MS}
CUSTOM = "custom"
SPAN_CHOICES: tuple[str, ...] = (*SPANS, CUSTOM)
DEFAULT_SPAN = "last 24 h"
MAX_EPISODES = 500  # the newest episodes of a span the page reads, lists and charts
MAX_POINTS = 1200  # lag points a chart sends to the browser, whatever the span


@dataclass(frozen=True)
class Span:
    since_ms: int
    until_ms: int
    label: str  # "last 6 h", or "from … to …"

    @property
    def length_ms(self) -> int:
        return self.until_ms - self.since_ms


def clock(ms: int) -> str:
    """A moment as the page shows it, in the server's local time with the day: the memory
    goes back a week, so a bare time of day would be ambiguous."""
    return time.strftime("%a %d %b %H:%M:%S", time.localtime(ms / 1000))


def span(choice: str, now_ms: int, start_ms: int | None = None,
         end_ms: int | None = None) -> Span:
    """A preset ending now, or the custom from/to (either order); an unknown choice or a
    custom one without both ends is the default preset."""
    if choice == CUSTOM and start_ms is not None and end_ms is not None:
        a, b = sorted((start_ms, end_ms))
        return Span(a, b, f"from {clock(a)} to {clock(b)}")
    if choice not in SPANS:
        choice = DEFAULT_SPAN
    return Span(now_ms - SPANS[choice], now_ms, choice)


# ---- words ---------------------------------------------------------------------------------

REBALANCING = "still rebalancing"  # an open episode: its causes are named once it ends


def took(ms: int) -> str:
    """"0.5 s", "6.2 s", then groups_model's "3 m 20 s": a rebalance often lasts under a
    second, which whole seconds would round to nothing."""
    return f"{ms / 1000:.1f} s" if ms < 60_000 else duration_text(ms / 1000)


def cause_of(e: Episode) -> str:
    """The episode's main cause, or REBALANCING while it is open (no cause is named before
    the episode ends, so "not observed" would be wrong there)."""
    return REBALANCING if e.end_ms is None else e.cause


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


MOVES_LISTED = 6  # partitions named per from → to before "+N"


def moves_text(moved: Sequence[Moved], protocol: str) -> str:
    """"3 partitions moved: a → b (t-0, t-1); a → nobody (t-2)", one clause per from → to."""
    if not moved:
        return ("partitions are shared, not owned: none moves" if protocol == SHARE
                else "no partition changed owner")
    flows: dict[tuple[str | None, str | None], list[str]] = {}
    for m in moved:
        flows.setdefault((m.source, m.target), []).append(f"{m.topic}-{m.partition}")
    clauses = []
    for (source, target), parts in flows.items():
        shown = ", ".join(parts[:MOVES_LISTED])
        more = f" +{len(parts) - MOVES_LISTED}" if len(parts) > MOVES_LISTED else ""
        clauses.append(f"{source or 'nobody'} → {target or 'nobody'} ({shown}{more})")
    return f"{_count(len(moved), 'partition')} moved: " + "; ".join(clauses)


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def lag_text(e: Episode) -> str | None:
    """"lag 114 → peak 134 → 3, back to 114 0.5 s after it ended"; None: no lag known."""
    i = e.impact
    if i.lag_before is None and i.lag_peak is None:
        return None
    after = _n(i.lag_after) if i.lag_after is not None else ("?" if e.final else "… so far")
    text = f"lag {_n(i.lag_before)} → peak {_n(i.lag_peak)} → {after}"
    if i.recovered_ms is not None and i.lag_before is not None:
        text += f", back to {i.lag_before:,} {took(i.recovered_ms)} after it ended"
    return text


def epochs_text(e: Episode) -> list[str]:
    """The generation (classic) or group epoch before → after, and KIP-848's target
    assignment epoch, where the memory has them."""
    out = []
    word = "generation" if e.protocol == CLASSIC else "group epoch"
    if e.generation_before is not None or e.generation_after is not None:
        out.append(f"{word} {_n(e.generation_before)} → {_n(e.generation_after)}")
    if e.target_epoch_before is not None or e.target_epoch_after is not None:
        out.append(f"target assignment epoch {_n(e.target_epoch_before)} → "
                   f"{_n(e.target_epoch_after)}")
    return out


def impact_lines(e: Episode) -> list[str]:
    """What the episode cost, in words, one fact a line; a fact not known is left out."""
    i = e.impact
    lines = [moves_text(i.moved, e.protocol)]
    if i.unowned_partition_seconds:
        lines.append(f"{i.unowned_partition_seconds:,.1f} partition-seconds without an owner")
    if i.gap_ms is not None:
        lines.append(f"processing gap {took(i.gap_ms)}")
    elif i.moved and not e.final:
        lines.append("processing gap still open: a moved partition has not progressed yet")
    lag = lag_text(e)
    if lag is not None:
        lines.append(lag)
    if i.reprocessed:
        lines.append(f"{_count(i.reprocessed, 'record')} committed again")
    lines += epochs_text(e)
    lines += [f"{who} reconciled for {took(ms)}" for who, ms in i.reconciling]
    if e.joined:
        lines.append("joined: " + ", ".join(e.joined))
    if e.left:
        lines.append("left: " + ", ".join(e.left))
    if not e.final:
        lines.append("still measuring: the memory updates this until the lag is back")
    return lines


def evidence_lines(e: Episode) -> list[str]:
    """Each cause with what shows it; "cause not observed" said plainly when none."""
    if e.end_ms is None:
        return [f"{REBALANCING}: its causes are named once it ends"]
    if not e.causes:
        return [f"{NOT_OBSERVED}: {CAUSES[NOT_OBSERVED]}"]
    return [f"{c.kind}: {c.evidence}" for c in e.causes]


@dataclass(frozen=True)
class Card:
    """One episode as the page shows it."""

    start_ms: int
    title: str  # when · main cause · how long
    cause: str  # the main cause, or REBALANCING
    meaning: str  # what the main cause means (CAUSES), "" while rebalancing
    evidence: tuple[str, ...]
    impact: tuple[str, ...]


def card(e: Episode) -> Card:
    cause = cause_of(e)
    length = REBALANCING if e.end_ms is None else took(e.end_ms - e.start_ms)
    title = f"{clock(e.start_ms)} · {cause}" + ("" if e.end_ms is None else f" · {length}")
    return Card(e.start_ms, title, cause, CAUSES.get(cause, ""), tuple(evidence_lines(e)),
                tuple(impact_lines(e)))


# ---- navigation ----------------------------------------------------------------------------

WORST_RULE = ("the most partition-seconds without an owner, then the longest processing "
              "gap, then the largest lag rise (peak − before); the newest among equals")


def worst_score(e: Episode) -> tuple[float, int, int, int]:
    """Larger is worse; see the module's docstring and WORST_RULE."""
    i = e.impact
    rise = (i.lag_peak or 0) - (i.lag_before or 0)
    return i.unowned_partition_seconds, i.gap_ms or 0, max(0, rise), e.start_ms


def worst(episodes: Sequence[Episode]) -> Episode | None:
    return max(episodes, key=worst_score, default=None)


def shown_index(episodes: Sequence[Episode], start_ms: int | None) -> int | None:
    """Which episode (oldest first) the card shows: the one chosen, while it is in the
    span; else the newest; None when there is none."""
    if not episodes:
        return None
    for i, e in enumerate(episodes):
        if e.start_ms == start_ms:
            return i
    return len(episodes) - 1


def neighbour(episodes: Sequence[Episode], index: int | None, step: int) -> int | None:
    """The start of the episode `step` places from `index` (-1: the one before), None past
    either end."""
    if index is None or not 0 <= index + step < len(episodes):
        return None
    return episodes[index + step].start_ms


# ---- the table -----------------------------------------------------------------------------

SHOWN_MARK = "▶"
TABLE_COLUMNS: tuple[str, ...] = ("shown", "time", "cause", "duration", "moved", "unowned",
                                  "gap", "lag_peak")


@dataclass(frozen=True)
class Table:
    cells: dict[str, list[str]]  # column -> cells, newest episode first
    starts: list[int]  # each row's episode start: which episode a selected row means


def table(episodes: Sequence[Episode], shown_start: int | None) -> Table:
    """Every episode of the span, newest first, each cell text; the one the card shows is
    marked (a button may have moved the card away from the row last selected)."""
    cells: dict[str, list[str]] = {c: [] for c in TABLE_COLUMNS}
    rows = list(reversed(episodes))
    for e in rows:
        i = e.impact
        cells["shown"].append(SHOWN_MARK if e.start_ms == shown_start else "")
        cells["time"].append(clock(e.start_ms))
        cells["cause"].append(cause_of(e))
        cells["duration"].append(REBALANCING if e.end_ms is None else took(e.end_ms - e.start_ms))
        cells["moved"].append(str(len(i.moved)))
        cells["unowned"].append(f"{i.unowned_partition_seconds:,.1f}")
        cells["gap"].append(took(i.gap_ms) if i.gap_ms is not None else
                            ("…" if i.moved and not e.final else NONE))
        cells["lag_peak"].append(NONE if i.lag_peak is None else f"{i.lag_peak:,}")
    return Table(cells, [e.start_ms for e in rows])


# ---- the lag chart -------------------------------------------------------------------------

# Okabe & Ito's colour-blind-safe palette (black left out: it is the lag line's tone); a
# cause takes the next colour in CAUSES order, so colours repeat after seven causes: the
# legend and the hover name the cause, never the colour alone.
OKABE_ITO: tuple[str, ...] = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2",
                              "#D55E00", "#CC79A7")
NOT_OBSERVED_COLOUR = "#999999"
REBALANCING_COLOUR = "#000000"
CAUSE_COLOURS: dict[str, str] = {
    **{kind: OKABE_ITO[i % len(OKABE_ITO)]
       for i, kind in enumerate(k for k in CAUSES if k != NOT_OBSERVED)},
    NOT_OBSERVED: NOT_OBSERVED_COLOUR, REBALANCING: REBALANCING_COLOUR}


@dataclass(frozen=True)
class Shade:
    """One episode's band on the lag chart."""

    start_ms: int
    end_ms: int  # the episode's end; an open one's: `open_until_ms`
    cause: str
    colour: str
    hover: tuple[str, ...]  # lines: cause, when and how long, the evidence


def shades(episodes: Sequence[Episode], open_until_ms: int) -> list[Shade]:
    """A band per episode, coloured by its main cause; an open one runs to `open_until_ms`
    (now, or the span's end if that is earlier)."""
    out = []
    for e in episodes:
        c = card(e)
        end = e.end_ms if e.end_ms is not None else max(e.start_ms, open_until_ms)
        out.append(Shade(e.start_ms, end, c.cause, CAUSE_COLOURS.get(c.cause, "#999999"),
                         (c.title, *c.evidence)))
    return out


@dataclass(frozen=True)
class LagSeries:
    """A group's total lag, bounded for the browser; None breaks the line where nothing was
    recorded (no watcher ran), so a flat line never bridges a hole in the memory."""

    times: list[int]
    lags: list[int | None]


CHART_MARGIN = 0.05  # of the drawn time, left before the memory's first record


def chart_since(since_ms: int, until_ms: int, series: LagSeries,
                episodes: Sequence[Episode]) -> int:
    """Where the lag chart starts: the span's start, or shortly before the memory's first
    record in it when that is later, so a memory minutes old is not a sliver at the right
    edge of a 24-hour axis (the span's picker still says what was asked)."""
    firsts = [t for t in (series.times[:1] + [e.start_ms for e in episodes]) if t >= since_ms]
    if not firsts:
        return since_ms
    first = min(firsts)
    return max(since_ms, first - int((until_ms - first) * CHART_MARGIN))


BREAK_STEPS = 6  # a silence of this many typical steps (and at least MIN_BREAK_MS) breaks
MIN_BREAK_MS = 60_000


def lag_series(block: LagBlock, max_points: int = MAX_POINTS) -> LagSeries:
    """At most `max_points` points (breaks included). Past half of them, the points are
    bucketed by time and each bucket keeps its lowest and highest point, in time order, so
    a spike of one cycle survives a week's chart."""
    t = np.asarray(block.times, dtype=np.int64)
    v = np.asarray(block.lags, dtype=np.int64)
    if t.size == 0:
        return LagSeries([], [])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    typical = int(np.median(np.diff(t))) if t.size > 1 else 0
    width = 0
    if t.size > max_points // 2:
        # two points a bucket, and a break needs three empty buckets: within max_points
        buckets = max(1, max_points // 3)
        width = -(-int(t[-1] - t[0] + 1) // buckets)
        ids = (t - t[0]) // width
        firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        lasts = np.r_[firsts[1:], t.size]
        keep: list[int] = []
        for a, b in zip(firsts.tolist(), lasts.tolist(), strict=True):
            lo, hi = a + int(v[a:b].argmin()), a + int(v[a:b].argmax())
            keep += sorted({lo, hi})
        t, v = t[keep], v[keep]
    gap = max(MIN_BREAK_MS, BREAK_STEPS * typical, 3 * width)
    times: list[int] = []
    lags: list[int | None] = []
    for i, (ts, lag) in enumerate(zip(t.tolist(), v.tolist(), strict=True)):
        if i and ts - times[-1] > gap:
            times.append((ts + times[-1]) // 2)
            lags.append(None)
        times.append(ts)
        lags.append(lag)
    return LagSeries(times, lags)
