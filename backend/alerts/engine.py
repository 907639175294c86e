"""The alert engine: successive Overviews in, incidents starting and ending out.

Pure and single-threaded: `observe()` takes one `Overview` and returns the transitions it
caused; time is the overview's `taken_ms`, so tests drive it with plain numbers and no clock.
An incident is one (rule, group) pair. It fires once, when its bad condition has held for the
rule's `for`, and resolves once, when its good condition has held for `resolve_after`. For a
threshold the good condition is stricter than "not bad" (at or below `resolve_below`), so a
value hovering around the threshold cannot fire, resolve and fire again: that is the
hysteresis. A cycle where a value is unknown (a group not described yet) breaks both streaks
and changes nothing else.

Memory is bounded: an entry exists only while a condition is bad or an incident is firing,
groups that vanish from the listing resolve and are forgotten, and at most `max_groups` groups
are tracked. A storm rule counts the rebalances each row carries (`GroupRow.rebalance_times`,
the overview's starts of the last hour, continued from the memory across restarts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from backend.alerts.rules import (
    BaseRule,
    EmptyLagRule,
    HealthRule,
    LagMessagesRule,
    LagSecondsRule,
    RebalancesRule,
    ThresholdRule,
)
from backend.cli_common import format_duration
from backend.contracts.overview import HEALTH_MEANING, GroupRow, Overview

FIRING: Literal["firing"] = "firing"
RESOLVED: Literal["resolved"] = "resolved"
MAX_GROUPS = 10_000  # groups tracked at once; more are counted in `untracked`, not evaluated


@dataclass(frozen=True)
class Transition:
    """An incident starting (FIRING) or ending (RESOLVED); what every sink receives."""

    state: Literal["firing", "resolved"]
    rule: str  # the rule's name
    kind: str
    group: str
    cluster: str
    at_ms: int  # the overview that caused it
    since_ms: int  # firing: when the condition began; resolved: when the incident fired
    text: str  # one line: what is (or was) wrong with the group

    @property
    def headline(self) -> str:
        return f"{self.state.upper()} {self.rule}: {self.text}"


@dataclass
class _Incident:
    firing: bool = False
    bad_since: int | None = None
    good_since: int | None = None
    fired_ms: int = 0  # set when it fires
    was: str = ""  # the firing text's value, for the resolve message (e.g. the health state)


class _Reading(NamedTuple):
    bad: bool | None  # None: not known this cycle
    good: bool | None
    value: Any  # health state, lag, count: put in words only when a transition needs it


class AlertEngine:
    def __init__(self, rules: Sequence[BaseRule], max_groups: int = MAX_GROUPS) -> None:
        self.rules = tuple(rules)
        self.max_groups = max_groups
        self.untracked = 0  # groups the last overview had beyond `max_groups`
        self._incidents: dict[tuple[str, int], _Incident] = {}  # (group, rule index)
        self._tracked: set[str] = set()
        self._last_ms: int | None = None
        self._applicable: dict[str, tuple[int, ...]] = {}  # group -> rules; this cycle's groups

    def observe(self, overview: Overview) -> list[Transition]:
        """The transitions this overview causes, resolutions of vanished groups first."""
        if overview.error is not None:
            return []  # the listing failed: an empty overview says nothing about the groups
        now = overview.taken_ms
        if self._last_ms is not None and now <= self._last_ms:
            return []  # stale or repeated: durations would run backwards
        self._last_ms = now
        out: list[Transition] = []
        rows = {r.group: r for r in overview.rows}
        gone = self._tracked - rows.keys()
        if gone:
            out.extend(self._forget(gone, overview))
        self.untracked = 0
        known = self._applicable
        self._applicable = {g: known[g] if g in known else self._rules_for(g) for g in rows}
        for group in sorted(rows):
            row = rows[group]
            applicable = self._applicable[group]
            if not applicable:
                continue
            if group not in self._tracked:
                if len(self._tracked) >= self.max_groups:
                    self.untracked += 1
                    continue
                self._tracked.add(group)
            for i in applicable:
                t = self._step(i, row, overview)
                if t is not None:
                    out.append(t)
        return out

    def _rules_for(self, group: str) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.rules) if r.applies_to(group))

    # ---- one incident ---------------------------------------------------------------------

    def _step(self, i: int, row: GroupRow, ov: Overview) -> Transition | None:
        rule, now = self.rules[i], ov.taken_ms
        reading, key = self._read(rule, row, now), (row.group, i)
        inc = self._incidents.get(key)
        if inc is None:
            if not reading.bad:
                return None
            inc = self._incidents[key] = _Incident()
        if reading.bad is None:
            inc.bad_since = inc.good_since = None
            return None
        if not inc.firing:
            if not reading.bad:
                del self._incidents[key]
                return None
            inc.bad_since = now if inc.bad_since is None else inc.bad_since
            if now - inc.bad_since < rule.for_ms:
                return None
            inc.firing, inc.fired_ms, inc.was = True, now, reading.value
            return Transition(FIRING, rule.label, rule.kind, row.group, ov.cluster, now,
                              inc.bad_since, self._fire_text(rule, row, reading))
        if not reading.good:
            inc.good_since = None
            return None
        inc.good_since = now if inc.good_since is None else inc.good_since
        if now - inc.good_since < rule.resolve_ms:
            return None
        del self._incidents[key]
        return Transition(RESOLVED, rule.label, rule.kind, row.group, ov.cluster, now,
                          inc.fired_ms, self._resolve_text(rule, row, reading, inc, now))

    def _forget(self, gone: set[str], ov: Overview) -> list[Transition]:
        """Resolve the firing incidents of groups no longer listed, and drop their state."""
        keys = sorted(k for k in self._incidents if k[0] in gone)
        out = []
        for group, i in keys:
            inc = self._incidents.pop((group, i))
            if inc.firing:
                out.append(Transition(
                    RESOLVED, self.rules[i].label, self.rules[i].kind, group, ov.cluster,
                    ov.taken_ms, inc.fired_ms,
                    f"group {group} is no longer listed (deleted or expired)"))
        self._tracked -= gone
        return out

    # ---- conditions -----------------------------------------------------------------------

    def _read(self, rule: BaseRule, row: GroupRow, now: int) -> _Reading:
        if isinstance(rule, HealthRule):
            bad = row.health in rule.health
            return _Reading(bad, not bad, row.health)
        if isinstance(rule, ThresholdRule):
            value = row.max_lag_seconds if isinstance(rule, LagSecondsRule) else row.lag_messages
            if value is None:
                return _Reading(None, None, None)
            return _Reading(value > rule.above, value <= rule.resolve_at, value)
        if isinstance(rule, EmptyLagRule):
            if row.state != "Empty":
                return _Reading(False, True, row.state)
            if row.lag_messages is None:
                return _Reading(None, None, None)
            bad = row.lag_messages > 0
            return _Reading(bad, not bad, row.lag_messages)
        if isinstance(rule, RebalancesRule):
            # the row's starts of the last hour (the longest window a rule may ask for),
            # continued from the memory across restarts
            n = sum(1 for t in row.rebalance_times if t > now - rule.within_ms)
            return _Reading(n > rule.more_than, n <= rule.more_than, n)
        raise TypeError(f"no condition for rule kind {rule.kind!r}")

    def _fire_text(self, rule: BaseRule, row: GroupRow, r: _Reading) -> str:
        g, held = row.group, format_duration(rule.for_ms)
        if isinstance(rule, HealthRule):
            why = f" ({HEALTH_MEANING[row.health]})" if row.health in HEALTH_MEANING else ""
            err = f": {row.error}" if row.error else ""
            return f"group {g} is {row.health}{why}{err}, for {held}"
        if isinstance(rule, ThresholdRule):
            return (f"group {g} lags {_amount(rule, r.value)} "
                    f"(above {_amount(rule, rule.above)} for {held})")
        if isinstance(rule, EmptyLagRule):
            return (f"group {g} is Empty with {r.value:,} messages of lag: nobody consumes them "
                    f"({held})")
        assert isinstance(rule, RebalancesRule)
        return (f"group {g} rebalanced {_times(r.value)} in {format_duration(rule.within_ms)} "
                f"(more than {rule.more_than})")

    def _resolve_text(self, rule: BaseRule, row: GroupRow, r: _Reading, inc: _Incident,
                      now: int) -> str:
        g, held = row.group, format_duration(rule.resolve_ms)
        lasted = f"after {format_duration(now - inc.fired_ms)}"
        if isinstance(rule, HealthRule):
            return f"group {g} is {row.health} (was {inc.was}) for {held}, {lasted}"
        if isinstance(rule, ThresholdRule):
            return (f"group {g} lags {_amount(rule, r.value)} "
                    f"(at or below {_amount(rule, rule.resolve_at)} for {held}), {lasted}")
        if isinstance(rule, EmptyLagRule):
            state = "has no lag" if not row.lag_messages else f"is {row.state}"
            return f"group {g} {state} for {held}, {lasted}"
        assert isinstance(rule, RebalancesRule)
        return (f"group {g} rebalanced {_times(r.value)} in the last "
                f"{format_duration(rule.within_ms)} for {held}, {lasted}")


def _amount(rule: ThresholdRule, value: float) -> str:
    if isinstance(rule, LagMessagesRule):
        return f"{value:,.0f} messages"
    return f"{value:,.0f} s" if value >= 10 else f"{value:.1f} s"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


