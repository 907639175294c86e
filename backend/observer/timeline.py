"""Stage 3a, the rebalance timeline, built from successive observations (pure, no I/O).

A rebalance is an *episode*: it starts with the first poll that finds the group unsettled
(classic: not Stable; KIP-848: some member's assignment differs from its target) and ends
with the first poll that finds it settled again. Movements are the difference between the
last settled assignment before and the first one after, so a partition that travelled
through several intermediate owners is reported once, from -> to.

A rebalance can also finish between two polls. It is caught when two settled polls in a row
disagree on the generation / epoch (when a source for it exists) or on the members and
their assignment; its start and end are then the two poll times, i.e. a bound. A static
member (group.instance.id) that restarts within its session comes back under a new member
id in the same generation, owning the same partitions: that is recorded as a "rejoin", with
nothing moved and nobody joined or left, since no rebalance happened.

The processing gap of a rebalance is, over its moved partitions, the longest time from the
last committed-offset progress before the episode to the first progress after it.

A share group's partitions are shared, not owned: they gain and lose sharers instead of
moving. Its frames carry the sharers (`shared`) and no single owner, so a change of sharers
or members is still an episode, but nothing is reported as moved from one member to another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.contracts import RebalanceView
from backend.observer.collect import RawObservation
from backend.observer.derive import assignment_diff, assignment_map, is_shared, share_map

SETTLED_STATES = {"Stable", "Empty", "Dead"}


def _by_client(f: GroupFrame) -> tuple[tuple[str, ...], dict[int, str],
                                        dict[int, tuple[str, ...]]]:
    """Members, ownership and sharers by client id: what a static member's rejoin leaves
    unchanged."""
    return (tuple(sorted(f.members.values())),
            {p: f.members.get(m, m) for p, m in f.assignment.items()},
            {p: tuple(sorted(f.members.get(m, m) for m in ms)) for p, ms in f.shared.items()})


@dataclass(frozen=True)
class GroupFrame:
    """The part of an observation the timeline needs, for one topic."""

    taken_ms: int
    state: str
    generation: int | None
    members: Mapping[str, str]  # member id -> client id
    assignment: Mapping[int, str]  # partition -> member id
    targets_met: bool  # KIP-848: every member owns exactly its target (classic: True)
    committed: Mapping[int, int]  # partition -> committed offset
    # a share group's: partition -> member ids of its sharers (then `assignment` is empty)
    shared: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def settled(self) -> bool:
        return self.state in SETTLED_STATES and self.targets_met


def frame(obs: RawObservation, topic: str) -> GroupFrame:
    shared = is_shared(obs.protocol)
    targets_met = all(
        m.target is None or {tp for tp in m.target if tp[0] == topic}
        == {tp for tp in m.assignment if tp[0] == topic}
        for m in obs.members
    )
    return GroupFrame(
        taken_ms=obs.taken_ms,
        state=obs.state,
        generation=obs.generation,
        members={m.member_id: m.client_id for m in obs.members},
        assignment={} if shared else assignment_map(obs.members, topic),
        targets_met=targets_met,
        committed={p: o for (t, p), o in obs.committed.items() if t == topic},
        shared=share_map(obs.members, topic) if shared else {},
    )


@dataclass
class _Episode:
    start_ms: int
    before: GroupFrame
    reason: str
    progress_before: dict[int, int]  # partition -> last commit progress before it started
    end_ms: int | None = None
    after: GroupFrame | None = None
    clients: dict[str, str] = field(default_factory=dict)  # every member id seen -> client id
    first_after: dict[int, int] = field(default_factory=dict)  # first progress since start
    gaps_pending: set[int] = field(default_factory=set)
    gap_ms: int | None = None


class Timeline:
    """Feed frames in time order with `observe`; read `rebalances()` (newest last)."""

    def __init__(self, keep: int = 50) -> None:
        self.keep = keep
        self._episodes: list[_Episode] = []
        self._open: _Episode | None = None
        self._settled: GroupFrame | None = None  # last settled frame
        self._prev: GroupFrame | None = None
        self._progress_ms: dict[int, int] = {}  # partition -> last time its commit moved
        self._clients: dict[str, str] = {}

    def observe(self, f: GroupFrame) -> None:
        moved_commits = self._commit_progress(f)
        self._clients.update(f.members)
        if self._open is not None:
            self._open.clients.update(f.members)
            self._note_progress(self._open, moved_commits, f.taken_ms)
            if f.settled:
                self._close(self._open, f)
                self._open = None
        elif self._settled is None:
            if f.settled:
                self._settled = f
            # first frames of an unsettled group: nothing known to compare with yet
        elif not f.settled:
            self._open = self._episode(
                f.taken_ms, "state" if f.state not in SETTLED_STATES else "reconcile", f)
            self._note_progress(self._open, moved_commits, f.taken_ms)
        else:
            reason = self._changed(self._settled, f)
            last = self._episodes[-1] if self._episodes else None
            if (reason == "generation" and last is not None and last.after is self._settled
                    and self._same_owners(self._settled, f)):
                # the generation source lagged the describe by a poll: same rebalance
                last.after = f
                reason = ""
            if reason:
                prev = self._prev or self._settled
                ep = self._episode(prev.taken_ms, reason, f)
                self._note_progress(ep, moved_commits, f.taken_ms)
                self._close(ep, f)
        for ep in self._episodes[-5:]:
            self._resolve_gaps(ep, moved_commits, f.taken_ms)
        for p in moved_commits:
            self._progress_ms[p] = f.taken_ms
        if f.settled and self._open is None:
            self._settled = f
        self._prev = f

    def _episode(self, start_ms: int, reason: str, f: GroupFrame) -> _Episode:
        assert self._settled is not None
        ep = _Episode(start_ms=start_ms, before=self._settled, reason=reason,
                      progress_before=dict(self._progress_ms))
        ep.clients.update(self._settled.members)
        ep.clients.update(f.members)
        return ep

    @staticmethod
    def _changed(a: GroupFrame, b: GroupFrame) -> str:
        if a.generation is not None and b.generation is not None and a.generation != b.generation:
            return "generation"
        if not Timeline._same_owners(a, b):
            if a.generation is not None and a.generation == b.generation and _by_client(a) == \
                    _by_client(b):
                # a static member (group.instance.id) restarted within its session: a new
                # member id, the same client owning the same partitions, no new generation
                return "rejoin"
            return "assignment"
        return ""

    @staticmethod
    def _same_owners(a: GroupFrame, b: GroupFrame) -> bool:
        return (set(a.members) == set(b.members) and dict(a.assignment) == dict(b.assignment)
                and dict(a.shared) == dict(b.shared))

    def _commit_progress(self, f: GroupFrame) -> set[int]:
        """Partitions whose committed offset moved since the previous frame."""
        prev = self._prev
        moved = set()
        for p, off in f.committed.items():
            before = prev.committed.get(p) if prev else None
            if before is None:
                self._progress_ms.setdefault(p, f.taken_ms)
            elif off != before:
                moved.add(p)
        return moved

    @staticmethod
    def _note_progress(ep: _Episode, moved_commits: set[int], now: int) -> None:
        for p in moved_commits:
            ep.first_after.setdefault(p, now)

    def _close(self, ep: _Episode, f: GroupFrame) -> None:
        ep.end_ms = f.taken_ms
        ep.after = f
        for mv in assignment_diff(ep.before.assignment, f.assignment):
            if mv.target is None or mv.partition not in ep.progress_before:
                continue
            if mv.partition in ep.first_after:
                self._add_gap(ep, mv.partition, ep.first_after[mv.partition])
            else:
                ep.gaps_pending.add(mv.partition)
        self._episodes.append(ep)
        del self._episodes[:-self.keep]

    def _resolve_gaps(self, ep: _Episode, moved_commits: set[int], now: int) -> None:
        for p in list(ep.gaps_pending & moved_commits):
            ep.gaps_pending.discard(p)
            self._add_gap(ep, p, now)

    @staticmethod
    def _add_gap(ep: _Episode, p: int, resumed_ms: int) -> None:
        gap = resumed_ms - ep.progress_before[p]
        ep.gap_ms = max(ep.gap_ms or 0, gap)

    # ---- output -----------------------------------------------------------------------

    @property
    def in_progress(self) -> bool:
        return self._open is not None

    def rebalances(self) -> tuple[RebalanceView, ...]:
        eps = list(self._episodes)
        if self._open is not None:
            eps.append(self._open)
        return tuple(self._view(ep) for ep in eps)

    def _view(self, ep: _Episode) -> RebalanceView:
        names = {**self._clients, **ep.clients}
        before = ep.before
        after = ep.after
        moved: tuple[tuple[int, str | None, str | None], ...] = ()
        if ep.reason == "rejoin":  # nothing moved and nobody left, by name
            after = None
        joined: tuple[str, ...] = ()
        left: tuple[str, ...] = ()
        if after is not None:
            moved = tuple((mv.partition, names.get(mv.source) if mv.source else None,
                           names.get(mv.target) if mv.target else None)
                          for mv in assignment_diff(before.assignment, after.assignment))
            now, then = set(after.members), set(before.members)
            joined = tuple(sorted(names.get(m, m) for m in now - then))
            left = tuple(sorted(names.get(m, m) for m in then - now))
        return RebalanceView(
            start_ms=ep.start_ms,
            end_ms=ep.end_ms,
            generation=(ep.after or before).generation if ep.reason == "rejoin"
            else after.generation if after else None,
            joined=joined,
            left=left,
            moved=moved,
            gap_ms=ep.gap_ms,
            reason=ep.reason,
            previous_generation=before.generation,
        )
