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
from collections import deque
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


def steady_health(window: Sequence[OffsetPoint], owned: bool,
                  rules: Rules = DEFAULT_RULES) -> str:
    """`evaluate_partition` of a window whose points all share one committed offset and one
    lag, in constant time: nothing moved, so no REWIND and no WARN can hold."""
    if not window or window[-1].lag == 0 or len(window) < rules.min_points:
        return OK
    if window[-1].ts_ms - window[0].ts_ms < rules.min_span_ms:
        return OK
    return STALL if owned else STOP


class OffsetWindows:
    """Per-partition sliding windows, fed once per poll (the evaluator's storage). A key is a
    partition number (one group, one topic) or a (topic, partition) pair (the overview).

    Most partitions of a large cluster do not move between polls; a count of the trailing
    points that repeat the last (committed, lag) lets those be judged without reading their
    window (`steady_health`)."""

    def __init__(self, rules: Rules = DEFAULT_RULES) -> None:
        self.rules = rules
        self._windows: dict[Hashable, deque[OffsetPoint]] = {}
        self._repeats: dict[Hashable, int] = {}

    def add(self, partition: Hashable, point: OffsetPoint) -> None:
        w = self._windows.get(partition)
        if w is None:
            w = self._windows[partition] = deque(maxlen=self.rules.window)
        if w and w[-1].committed == point.committed and w[-1].lag == point.lag:
            self._repeats[partition] += 1
        else:
            self._repeats[partition] = 1
        w.append(point)

    def evaluate(self, partition: Hashable, owned: bool) -> str:
        w = self._windows.get(partition)
        if not w:
            return OK
        if self._repeats[partition] >= len(w):
            return steady_health(w, owned, self.rules)
        return evaluate_partition(w, owned, self.rules)

    def reset(self) -> None:
        self._windows.clear()
        self._repeats.clear()
