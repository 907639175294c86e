"""A seeded, reproducible plan of disruptions, decided before the run starts.

Pure: the plan only tracks how many replicas *should* be active, so the same seed gives the
same sequence of action kinds on any machine; which replica a kill or stop hits is chosen at
run time (from the same seeded generator) among those actually alive.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KILL, STOP, START, SCALE = "kill", "stop", "start", "scale"
KINDS = (KILL, STOP, START, SCALE)
BROKER_KILL, BROKER_START = "broker_kill", "broker_start"
_WEIGHTS = {KILL: 0.4, STOP: 0.2, START: 0.2, SCALE: 0.2}


@dataclass(frozen=True)
class Action:
    at_s: float  # seconds after the run started
    kind: str  # kill | stop | start | scale
    replicas: int  # active replicas the plan expects after this action


def plan(duration_s: float, seed: int, start: int = 3, low: int = 1, high: int = 5,
         every_s: tuple[float, float] = (4.0, 9.0), settle_s: float = 8.0) -> list[Action]:
    """Disruptions from `settle_s` until `duration_s`, one every `every_s` seconds (uniform).

    Never below `low` active replicas (≥ 1, so the group can always drain), never above
    `high`. Kill and stop need a victim; start needs room; scale picks a different count.
    """
    if not 1 <= low <= start <= high:
        raise ValueError(f"need 1 <= low <= start <= high, got {low}, {start}, {high}")
    if every_s[0] <= 0 or every_s[1] < every_s[0]:
        raise ValueError(f"bad interval {every_s}")
    rng = random.Random(seed)
    actions: list[Action] = []
    active = start
    t = settle_s
    while t < duration_s:
        kinds = [k for k in KINDS if _possible(k, active, low, high)]
        kind = rng.choices(kinds, weights=[_WEIGHTS[k] for k in kinds])[0]
        if kind in (KILL, STOP):
            active -= 1
        elif kind == START:
            active += 1
        else:
            active = rng.choice([n for n in range(low, high + 1) if n != active])
        actions.append(Action(round(t, 3), kind, active))
        t += rng.uniform(*every_s)
    return actions


def _possible(kind: str, active: int, low: int, high: int) -> bool:
    if kind in (KILL, STOP):
        return active > low
    if kind == START:
        return active < high
    return high > low


def broker_plan(duration_s: float, seed: int, every_s: tuple[float, float] = (10.0, 16.0),
                down_s: tuple[float, float] = (5.0, 9.0),
                settle_s: float = 10.0) -> list[Action]:
    """Broker faults: a SIGKILL of one node, then its start `down_s` later, then the next kill
    `every_s` after that. One node down at a time, so a cluster of three with two in-sync
    copies required keeps taking writes throughout; the node is chosen at run time. The last
    node killed may still be down when the run ends: the run starts it before draining.
    (`replicas` is -1: broker faults leave the replica count as the other plan has it.)"""
    if every_s[0] <= 0 or every_s[1] < every_s[0] or down_s[0] <= 0 or down_s[1] < down_s[0]:
        raise ValueError(f"bad intervals {every_s} / {down_s}")
    rng = random.Random(seed ^ 0xB0B)  # its own sequence: adding it changes no replica action
    actions: list[Action] = []
    t = settle_s
    while t < duration_s:
        actions.append(Action(round(t, 3), BROKER_KILL, -1))
        t += rng.uniform(*down_s)
        actions.append(Action(round(t, 3), BROKER_START, -1))
        t += rng.uniform(*every_s)
    return actions
