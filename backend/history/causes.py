"""Why a group rebalanced: each rule one short pure function from what was observed to the
causes it supports, table-tested (tests/history/test_causes.py).

The tracker (`episodes.py`) gathers the `Evidence` of an episode when it ends: the settled
frames before and after, the members that came and went with what their partitions showed,
topics that grew, and the supervisor's actions on the group's replicas around it. `causes()`
runs every rule over it; a rule that sees nothing it can stand on returns nothing, so an
episode no rule explains has no cause ("cause not observed"), never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backend.contracts import CONSUMER, SHARE, STREAMS
from backend.contracts.history import (
    ASSIGNOR,
    CAUSES,
    CRASHED,
    DEPARTED,
    EPOCH,
    EXPIRED,
    JOINED,
    LEFT,
    PARTITIONS_ADDED,
    PROTOCOL,
    REJOINED,
    SUBSCRIPTION,
    Action,
    Cause,
)
from backend.history.frames import Frame, Member

# Kafka's lowest session timeout by default (group.min.session.timeout.ms): a member seen
# committing within less than this before it was gone cannot have been dead for a session
MIN_SESSION_MS = 6000


@dataclass(frozen=True)
class Departure:
    """A member gone by the end of an episode, and what its partitions showed before.

    `waiting`: records waited on a partition it owned (committed behind the log end) when the
    group was last seen with it. `last_progress_ms`: the newest commit progress on its
    partitions, None when none was ever seen. `noticed_ms`: when the group was first seen
    without it or rebalancing. `resolution_ms`: how long a pause must be to be told from the
    observer's own poll and the group's commit cadence. `listed_ms`: the last time the group
    was seen listing it (None: until it was noticed gone). `progress_after_ms`: the look
    before the one that saw that newest progress (the commit came after it)."""

    member: Member
    owned: int  # partitions it owned in the last settled description
    waiting: bool
    last_progress_ms: int | None
    noticed_ms: int
    resolution_ms: int
    listed_ms: int | None = None
    progress_after_ms: int | None = None

    @property
    def dead_ms(self) -> int | None:
        if self.last_progress_ms is None:
            return None
        return max(0, self.noticed_ms - self.last_progress_ms)

    @property
    def listed_dead_ms(self) -> int | None:
        """How long it was seen listed with its commits stopped: the sign of an expiry (a
        member that leaves is gone at once), which a starved observer may not have seen."""
        if self.last_progress_ms is None:
            return None
        listed = self.noticed_ms if self.listed_ms is None else self.listed_ms
        return max(0, listed - self.last_progress_ms)

    @property
    def dead_at_most_ms(self) -> int | None:
        """The longest it can have been silent before it was gone: from the look before its
        last commit was seen, plus a resolution for the time a look's answers take."""
        if self.last_progress_ms is None:
            return None
        after = self.last_progress_ms if self.progress_after_ms is None \
            else self.progress_after_ms
        return max(0, self.noticed_ms - after) + self.resolution_ms

    @property
    def unseen_ms(self) -> int:
        """The wait between the last look that listed it and the one that did not."""
        return 0 if self.listed_ms is None else max(0, self.noticed_ms - self.listed_ms)


@dataclass(frozen=True)
class Evidence:
    before: Frame  # the last settled frame before the episode
    after: Frame  # the first settled frame after it
    seen_as: str
    joined: tuple[Member, ...] = ()
    departed: tuple[Departure, ...] = ()
    passing: tuple[Member, ...] = ()  # joined, and gone again before the group settled
    grown: tuple[tuple[str, int, int], ...] = ()  # (topic, partitions before, after)
    actions: tuple[Action, ...] = ()  # the supervisor's, on replicas named in the episode


def _s(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def _who(m: Member) -> str:
    where = f" on {m.host}" if m.host else ""
    static = f", instance {m.instance_id}" if m.instance_id else ""
    return f"{m.client_id} ({m.member_id[:12]}{where}{static})"


def _cause(kind: str, evidence: str, m: Member | None = None, **facts: object) -> Cause:
    if m is None:
        return Cause(kind, evidence, **facts)  # type: ignore[arg-type]
    return Cause(kind, evidence, member=m.client_id, member_id=m.member_id,
                 host=m.host or None, instance_id=m.instance_id, **facts)  # type: ignore[arg-type]


# ---- the rules -----------------------------------------------------------------------------

def supervisor_actions(ev: Evidence) -> list[Cause]:
    """groupscope's own replicas: what the supervisor did to one named in the episode."""
    out = []
    for a in ev.actions:
        if a.action == "crash":
            text = f"replica {a.replica} crashed with exit code {a.exit_code}"
        else:
            verb = {"kill": "killed (SIGKILL)", "stop": "stopped", "restart": "restarted",
                    "scale-up": "started to scale up", "scale-down": "stopped to scale down",
                    "start": "started"}[a.action]
            who = {"presenter": "by the presenter", "up": "at the demo's start-up",
                   "up-restart": "after `groupscope up` restarted the crashed backend"}.get(
                a.by, f"by the {a.by}")
            text = f"replica {a.replica} {verb} {who}"
        out.append(Cause(a.cause, text, member=a.replica,
                         exit_code=a.exit_code if a.cause == CRASHED else None))
    return out


def departures(ev: Evidence) -> list[Cause]:
    """Left (its partitions were committed until it went), expired (their commits stopped
    with records waiting, long before it went), or gone without telling which."""
    out = []
    for d in ev.departed:
        m, dead = d.member, d.dead_ms
        at_most = d.dead_at_most_ms
        if dead is not None and at_most is not None and at_most < MIN_SESSION_MS:
            # a session expires no sooner than the broker's minimum after the last sign of
            # life, and a commit is one: gone sooner, the member left (a starved member that
            # stalled, committed once more and closed, among others)
            out.append(_cause(LEFT, f"{_who(m)} committed until {_s(dead)} before it was gone, "
                              f"sooner than any session expires ({_s(MIN_SESSION_MS)}): it "
                              f"left the group", m, dead_ms=dead))
        elif dead is not None and dead <= d.resolution_ms < MIN_SESSION_MS:
            out.append(_cause(LEFT, f"{_who(m)} committed until {_s(dead)} before it was gone: "
                              f"it left the group", m, dead_ms=dead))
        elif dead is not None and dead <= d.resolution_ms:
            out.append(_cause(DEPARTED, f"{_who(m)} committed until {_s(dead)} before it was "
                              f"gone: it left, or expired with a session timeout under "
                              f"{_s(d.resolution_ms)} (the group was seen too seldom to tell)",
                              m, dead_ms=dead))
        elif dead is not None and d.waiting and (d.listed_dead_ms or 0) > d.resolution_ms:
            out.append(_cause(EXPIRED, f"{_who(m)} stopped committing with records waiting "
                              f"and stayed listed {_s(dead)} until the group noticed",
                              m, dead_ms=dead))
        elif dead is not None and d.waiting:
            out.append(_cause(DEPARTED, f"{_who(m)} committed until {_s(dead)} before it was "
                              f"gone, but the group went unseen for {_s(d.unseen_ms)} of "
                              f"that: left or expired cannot be told", m, dead_ms=dead))
        else:
            why = ("it owned no partition" if not d.owned
                   else "its partitions were never seen committing" if dead is None
                   else "no records waited on its partitions")
            out.append(_cause(DEPARTED, f"{_who(m)} is gone; left or expired cannot be told: "
                              f"{why}", m))
    return out


def joins(ev: Evidence) -> list[Cause]:
    return [*(_cause(JOINED, f"{_who(m)} joined", m) for m in ev.joined),
            *(_cause(JOINED, f"{_who(m)} joined and was gone again before the group settled",
                     m) for m in ev.passing)]


def static_rejoin(ev: Evidence) -> list[Cause]:
    """The same instance ids, new member ids, the same owners by client: no rebalance."""
    if ev.seen_as != "rejoin":
        return []
    before = {m.instance_id: m for m in ev.before.members.values() if m.instance_id}
    out = []
    for m in ev.after.members.values():
        old = before.get(m.instance_id) if m.instance_id else None
        if old is not None and old.member_id != m.member_id:
            out.append(_cause(REJOINED, f"{_who(m)} restarted within its session (instance "
                              f"{m.instance_id}): nothing moved", m,
                              before=old.member_id, after=m.member_id))
    return out


def partitions_added(ev: Evidence) -> list[Cause]:
    return [Cause(PARTITIONS_ADDED, f"{topic} grew from {a} to {b} partitions", topic=topic,
                  before=str(a), after=str(b)) for topic, a, b in ev.grown]


def subscription(ev: Evidence) -> list[Cause]:
    """The topics owned changed with nobody coming or going and no topic growing."""
    if ev.joined or ev.departed or not ev.before.members or not ev.after.members:
        return []
    a, b = ev.before.owned_topics(), ev.after.owned_topics()
    if a == b or not a or not b:
        return []
    added, removed = sorted(b - a), sorted(a - b)
    words = ", ".join([*(f"+{t}" for t in added), *(f"-{t}" for t in removed)])
    return [Cause(SUBSCRIPTION, f"the members' topics changed: {words}",
                  before=",".join(sorted(a)), after=",".join(sorted(b)))]


def protocol_change(ev: Evidence) -> list[Cause]:
    a, b = ev.before.protocol, ev.after.protocol
    if a == b or not ev.before.members:
        return []
    return [Cause(PROTOCOL, f"the group went from the {a} to the {b} protocol",
                  before=a, after=b)]


def assignor_change(ev: Evidence) -> list[Cause]:
    a, b = ev.before.assignor, ev.after.assignor
    if not a or not b or a == b or ev.before.protocol != ev.after.protocol:
        return []
    return [Cause(ASSIGNOR, f"the assignor went from {a} to {b}", before=a, after=b)]


def epoch_bump(ev: Evidence) -> list[Cause]:
    """KIP-848 and its kin: an epoch that moved with nothing else seen (called last)."""
    b, a = ev.before, ev.after
    if a.protocol not in (CONSUMER, SHARE, STREAMS) or a.generation == b.generation \
            or a.generation is None or b.generation is None:
        return []
    targets = ("" if a.target_epoch is None
               else f", target assignment epoch {b.target_epoch} -> {a.target_epoch}")
    return [Cause(EPOCH, f"group epoch {b.generation} -> {a.generation}{targets}",
                  before=str(b.generation), after=str(a.generation))]


RULES: tuple[Callable[[Evidence], list[Cause]], ...] = (
    supervisor_actions, departures, joins, static_rejoin, partitions_added, subscription,
    protocol_change, assignor_change)
# only when no rule above found anything: the epoch is then all there is to say
FALLBACK: tuple[Callable[[Evidence], list[Cause]], ...] = (epoch_bump,)


_RANK = {kind: i for i, kind in enumerate(CAUSES)}


def causes(ev: Evidence, rules: Sequence[Callable[[Evidence], list[Cause]]] = RULES
           ) -> tuple[Cause, ...]:
    """Every rule's causes, the main one first (CAUSES' order; a rule's own order within)."""
    found = [c for rule in rules for c in rule(ev)]
    if not found:
        found = [c for rule in FALLBACK for c in rule(ev)]
    return tuple(sorted(found, key=lambda c: _RANK.get(c.kind, len(_RANK))))
