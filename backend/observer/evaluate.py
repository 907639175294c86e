"""Stage 3b, evaluate: partition and group health from a sliding window of offsets.

The idea comes from Burrow: no lag threshold, but rules about how committed offsets and
lag *move* over a window of observations. Our rules, checked in this order:

REWIND  the committed offset went backwards inside the window and has not yet come back
        to where it was (a reset, or a replay after a lost commit).
OK      lag was zero at some point in the window (the consumer caught up), or the window
        is too short to judge.
STOP    lag > 0 throughout, the committed offset did not move, and no live member owns
        the partition: nobody is consuming it.
STALL   lag > 0 throughout and the committed offset did not move although a member owns
        the partition: the owner is stuck (or stopped committing).
WARN    the committed offset moves but lag never shrinks from one point to the next:
        the consumer works but falls behind.
OK      otherwise.

Group health is the worst partition health (`contracts.overview.worst`: STOP > STALL >
REWIND > WARN > OK).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from backend.contracts.overview import OK, REWIND, STALL, STOP, WARN


class OffsetPoint(NamedTuple):
    """One observation of a partition (a tuple: the overview makes 100 000 per cycle)."""

    ts_ms: int
    committed: int | None
    lag: int


@dataclass(frozen=True)
class Rules:
    window: int = 10  # points kept per partition (one per poll)
    min_points: int = 3  # fewer than this: not enough evidence, OK
    min_span_ms: int = 2000  # a window shorter than this cannot show a stall


DEFAULT_RULES = Rules()


def evaluate_partition(window: Sequence[OffsetPoint], owned: bool,
                       rules: Rules = DEFAULT_RULES) -> str:
    if not window:
        return OK
    offsets = [p.committed for p in window]
    known = [o for o in offsets if o is not None]
    # REWIND: a decrease not yet recovered
    for i in range(1, len(known)):
        if known[i] < known[i - 1] and known[-1] < max(known[:i]):
            return REWIND
    if any(p.lag == 0 for p in window):
        return OK
    if len(window) < rules.min_points:
        return OK
    span = window[-1].ts_ms - window[0].ts_ms
    if len(set(offsets)) == 1:  # never moved (or never committed) across the window
        if span < rules.min_span_ms:
            return OK
        return STALL if owned else STOP
    lags = [p.lag for p in window]
    if all(b >= a for a, b in itertools.pairwise(lags)):
        return WARN
    return OK


def steady_health(first_ts_ms: int, last_ts_ms: int, points: int, lag: int, owned: bool,
                  rules: Rules = DEFAULT_RULES) -> str:
    """`evaluate_partition` of a window of `points` points that all share one committed offset
    and one lag, in constant time: nothing moved, so no REWIND and no WARN can hold."""
    if lag == 0 or points < rules.min_points or last_ts_ms - first_ts_ms < rules.min_span_ms:
        return OK
    return STALL if owned else STOP


REPEATED, REJUDGED = 1, 2  # what `OffsetWindows.repeat_all` did (0: nothing)


class OffsetWindows:
    """Per-partition sliding windows, fed once per poll (the evaluator's storage). A key is a
    partition number (one group, one topic) or a (topic, partition) pair (the overview).

    The overview keeps a window for every partition of every group (650 000 at 65 000
    groups), so a window is small. It is one flat tuple `(times, committed, lag, committed,
    lag, …)`, replaced at each point, where `times` is the tuple of its points' times:
    every partition fed at the same polls shares one (the `_clock`, the last `window` poll
    times), and one fed at other times has its own. A window whose points all repeat one
    (committed, lag) keeps that pair once, `(times, committed, lag)`: most partitions of a
    large cluster do not move between polls. Such a window is judged in constant time
    (`steady_health`), as is one whose trailing repeats (`_repeats`) cover it; points are
    made again only to judge a window that moved.

    When every window is such a one over the whole clock (`_uniform`), a poll that repeats
    every partition's last point changes nothing but the clock: `repeat_all` advances it
    alone, and the windows take its times when next read (`_ticks`, `_catch_up`)."""

    def __init__(self, rules: Rules = DEFAULT_RULES) -> None:
        self.rules = rules
        self._windows: dict[Hashable, tuple] = {}
        self._repeats: dict[Hashable, int] = {}
        self._clock: tuple[int, ...] = ()  # the last `window` poll times, oldest first
        self._clock_before: tuple[int, ...] = ()  # the clock before its newest time
        # every window one repeated pair over the whole clock (None: not known since the
        # last point added); and the repeats `repeat_all` added that the windows have not
        # taken yet (their times are then the clock, their repeats that many more)
        self._uniform: bool | None = None
        self._ticks = 0

    def _times(self, before: tuple[int, ...] | None, ts: int) -> tuple[int, ...]:
        """The times of a window whose points were at `before` once a point at `ts` is
        added: a tail of the shared clock when it was fed at every poll since its first (the
        clock itself once as long), else a tuple of its own."""
        size = self.rules.window
        clock = self._clock
        if not clock or ts > clock[-1]:
            self._clock_before, self._clock = clock, (*clock, ts)[-size:]
            clock = self._clock
        if ts == clock[-1] and (before is None or before is self._clock_before
                                or before == self._clock_before[-len(before):]):
            return clock[-min(size, 1 + len(before or ())):]
        return (*(before or ()), ts)[-size:]

    def add(self, partition: Hashable, point: OffsetPoint) -> None:
        self._add(partition, *point)

    def feed(self, partition: Hashable, ts: int, committed: int | None, lag: int,
             owned: bool) -> str:
        """`add` a point, then `evaluate` the window: one call instead of two lookups of it
        and a point made, for the overview's every partition at every poll."""
        w, repeats = self._add(partition, ts, committed, lag)
        return self._judge(w, repeats, owned)

    def _add(self, partition: Hashable, ts: int, committed: int | None, lag: int
             ) -> tuple[tuple, int]:
        """The partition's window and trailing repeats once the point is in."""
        if self._ticks:
            self._catch_up()
        self._uniform = None
        w = self._windows.get(partition)
        if w is None:
            w = self._windows[partition] = (self._times(None, ts), committed, lag)
            self._repeats[partition] = 1
            return w, 1
        before = w[0]
        times = self._times(before, ts)
        if w[-2] == committed and w[-1] == lag:
            repeats = self._repeats[partition] = self._repeats[partition] + 1
            if repeats >= len(times):  # every point the same: the pair once
                w = self._windows[partition] = (times, w[-2], w[-1])
                return w, repeats
            committed, lag = w[-2], w[-1]  # the numbers already kept: one pair per run
        else:
            repeats = self._repeats[partition] = 1
        values = w[1:] * len(before) if len(w) == 3 and len(before) > 1 else w[1:]
        w = self._windows[partition] = (times, *(*values, committed, lag)[-2 * len(times):])
        return w, repeats

    def repeat_all(self, ts: int) -> int:
        """`add` to every window a point at `ts` repeating its last one, in constant time,
        when every window is one repeated (committed, lag) over the whole clock: REPEATED when
        no window's verdict changes, REJUDGED when lagging windows' do (read each with
        `steady_verdict`); 0, with nothing added, when the windows are not all so. A verdict
        of such a window is `steady_health`'s: it can change only where the clock's points or
        span cross `min_points` or `min_span_ms` (the fold of a group whose readings repeat
        while its windows fill: bench/README.md, "The overview at 65 000 groups: windows
        filling, taken whole")."""
        clock = self._clock
        if not clock or ts <= clock[-1] or not self._windows:
            return 0
        if self._uniform is None:
            self._uniform = all(len(w) == 3 and (w[0] is clock or w[0] == clock)
                                for w in self._windows.values())
        if not self._uniform:
            return 0
        after = (*clock, ts)[-self.rules.window:]
        # a lagging window's verdict, owned say, before and after: the same or not for all
        stood = steady_health(clock[0], clock[-1], len(clock), 1, True, self.rules) \
            == steady_health(after[0], after[-1], len(after), 1, True, self.rules) \
            or not any(w[-1] for w in self._windows.values())
        self._clock_before, self._clock = clock, after
        self._ticks += 1
        return REPEATED if stood else REJUDGED

    def steady_verdict(self, lag: int, owned: bool) -> str:
        """The verdict of a window holding `lag`, while every window is one repeated point
        over the whole clock (after `repeat_all` took a point)."""
        clock = self._clock
        return steady_health(clock[0], clock[-1], len(clock), lag, owned, self.rules)

    def all_settled(self) -> bool:
        """Every window is one repeated point over the whole clock and `settled`: known
        without catching up, where `repeat_all` last found them all so."""
        return self._uniform is True and self._full(self._clock)

    def _full(self, times: tuple[int, ...]) -> bool:
        """A window's times that `settled` asks for: all `window` points, over `min_span_ms`."""
        return len(times) == self.rules.window and times[-1] - times[0] >= self.rules.min_span_ms

    def _catch_up(self) -> None:
        """Give every window the points `repeat_all` added: the clock's times, and as many
        more repeats."""
        clock, ticks = self._clock, self._ticks
        self._ticks = 0
        for partition, w in self._windows.items():
            self._windows[partition] = (clock, w[1], w[2])
            self._repeats[partition] += ticks

    def evaluate(self, partition: Hashable, owned: bool) -> str:
        if self._ticks:
            self._catch_up()
        w = self._windows.get(partition)
        if not w:
            return OK
        return self._judge(w, self._repeats[partition], owned)

    def _judge(self, w: tuple, repeats: int, owned: bool) -> str:
        times = w[0]
        points = len(times)
        if len(w) == 3 or repeats >= points:
            return steady_health(times[0], times[-1], points, w[-1], owned, self.rules)
        return evaluate_partition([OffsetPoint(times[i], w[1 + 2 * i], w[2 + 2 * i])
                                   for i in range(points)], owned, self.rules)

    def settled(self, partition: Hashable) -> bool:
        """The window is full of one repeated (committed, lag) over at least `min_span_ms`:
        another such point changes neither its verdict nor any later one (only its times,
        which then matter to no rule), so a caller whose readings repeat may skip feeding
        it. Its next different point then lands after the last one it was fed."""
        if self._ticks:
            self._catch_up()
        w = self._windows.get(partition)
        if w is None or len(w) != 3:
            return False
        return self._full(w[0])

    def reset(self) -> None:
        self._windows.clear()
        self._repeats.clear()
        self._clock = self._clock_before = ()
        self._uniform, self._ticks = None, 0
