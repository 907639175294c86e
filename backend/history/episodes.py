"""Rebalance episodes of one group, with causes and impact, from successive frames (pure).

An *episode* starts with the first frame that finds the group unsettled (classic: not Stable;
KIP-848: a member not owning its target) and ends with the first that finds it settled
again. Movements are the difference between the last settled assignment before and the first
after, so a partition that travelled through several owners is reported once, from -> to.

A rebalance can also finish between two frames. It is caught when two settled frames in a
row disagree on the generation / epoch (when a source for it exists) or on the members and
their assignment; its start and end are then the two frame times, a bound. A static member
(group.instance.id) that restarts within its session comes back under a new member id in the
same generation owning the same partitions: a "rejoin", with nothing moved.

When it ends, the episode's evidence goes to the cause rules (`causes.py`); its impact keeps
growing until it is *final*: the processing gap (over its moved partitions, the longest time
from the last commit progress before to the first after) once each moved partition has
progressed, and the lag once it is back to where it was (or FINAL_WITHIN_MS later).

A share group's partitions are shared, not owned: they gain and lose sharers, so a change of
sharers or members is an episode, and nothing is reported as moved.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from backend.contracts.history import Action, Episode, Impact, Moved
from backend.history.causes import MIN_SESSION_MS, Departure, Evidence, causes
from backend.history.frames import Frame, Member, Slot

# the supervisor's action on a replica is its cause if made this long before the episode
# began: a SIGKILLed member is noticed one session timeout later (45 s by Kafka's default)
ACTION_LOOKBACK_MS = 120_000
# an episode's impact is final at the latest this long after it ended
FINAL_WITHIN_MS = 300_000
# a topic's growth is the cause of an episode that begins this long after it at the latest
# (a classic consumer notices new partitions at its next metadata refresh: 5 min by default)
GROWTH_LOOKBACK_MS = 600_000
# a pause shorter than this is never told from an observer's poll and commit cadence
MIN_RESOLUTION_MS = 1000
CADENCE_SAMPLES = 32
USED_ACTIONS_KEPT = 256  # actions remembered as taken by an episode, per group



@dataclass(frozen=True)
class _Move:
    """A commit seen moved: by the look at `seen_ms`, after the look at `after_ms` (it
    happened in between)."""

    seen_ms: int
    after_ms: int


# a slot's last commit move and the one before it
_Moves = tuple[_Move, _Move | None]

DEPARTURE_ACTIONS = frozenset({"kill", "stop", "scale-down", "crash", "restart"})
JOIN_ACTIONS = frozenset({"start", "scale-up", "restart"})


@dataclass(eq=False)  # compared and hashed by identity
class _Episode:
    start_ms: int
    before: Frame
    seen_as: str
    # the last look before it that listed `before`'s members: the settled frame's own time
    # is older when identical frames since were only touched
    listed_ms: int
    progress_before: dict[Slot, int]  # slot -> last commit progress before it started
    moved_before: dict[Slot, _Moves]  # slot -> its last real commit moves before it started
    before_earlier: Frame | None  # the settled frame before `before` (see `_departure`)
    end_ms: int | None = None
    after: Frame | None = None
    names: dict[str, Member] = field(default_factory=dict)  # every member seen in it
    first_after: dict[Slot, int] = field(default_factory=dict)  # first progress since start
    gaps_pending: set[Slot] = field(default_factory=set)
    gap_ms: int | None = None
    unowned_ms: float = 0.0  # partition-milliseconds without an owner
    reconciling: dict[str, list[int]] = field(default_factory=dict)  # member id -> [first, last]
    # member id -> the last frame of the episode that still listed it (a member may go long
    # after the episode began: others left first, and the group never settled in between)
    last_seen: dict[str, int] = field(default_factory=dict)
    first_seen: dict[str, int] = field(default_factory=dict)  # member id -> listed since
    lag_peak: int | None = None
    lag_after: int | None = None
    recovered_ms: int | None = None
    reprocessed: int = 0
    causes: tuple = ()
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    moved: tuple[Moved, ...] = ()
    final: bool = False


def _same_owners(a: Frame, b: Frame) -> bool:
    return (a.members.keys() == b.members.keys() and a.assignment == b.assignment
            and a.shared == b.shared)


def _by_client(f: Frame) -> tuple:
    """Members, owners and sharers by client id: what a static member's rejoin leaves as is."""
    name = {m: v.client_id for m, v in f.members.items()}
    return (tuple(sorted(name.values())),
            {s: name.get(m, m) for s, m in f.assignment.items()},
            {s: tuple(sorted(name.get(m, m) for m in ms)) for s, ms in f.shared.items()})


def _static_swap(a: Frame, b: Frame) -> bool:
    """Every member that changed id is a static member back under its instance id."""
    went = [a.members[m] for m in a.members.keys() - b.members.keys()]
    came = {b.members[m].instance_id for m in b.members.keys() - a.members.keys()}
    return bool(went) and all(m.instance_id and m.instance_id in came for m in went) \
        and len(came) == len(went)


def _lag_max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


class EpisodeTracker:
    """Feed one group's frames in time order with `observe`; it returns the episodes that
    began, ended or changed with that frame (newest last), for the memory to write."""

    def __init__(self, cluster: str, group: str, keep: int = 50) -> None:
        self.cluster = cluster
        self.group = group
        # the two deques are made at their first entry: an empty deque is 760 bytes, and the
        # overview keeps a tracker for every group of the cluster, most never rebalancing
        self._keep = keep
        self._done: deque[Episode] | None = None
        self._finishing: list[_Episode] = []
        self._open: _Episode | None = None
        self._settled: Frame | None = None
        self._settled_earlier: Frame | None = None  # the settled frame before `_settled`
        self._prev: Frame | None = None
        self._prev_ms: int | None = None  # the last frame's time, or a later `touch`'s
        self._progress_ms: dict[Slot, int] = {}  # slot -> last progress (first sight counts)
        self._moves: dict[Slot, _Moves] = {}  # slot -> its last two real commit moves
        # the last frame's members, and since when each has been listed: an action on a
        # replica older than its member id is a former incarnation's
        self._names: Mapping[str, Member] = {}
        self._first_seen: dict[str, int] = {}
        self._grown: list[tuple[str, int, int, int]] = []  # topic, before, after, seen at
        self._interval_ms: float | None = None  # frame spacing, smoothed
        self._cadence: deque[int] | None = None  # commit-move intervals
        self._used: OrderedDict[Action, None] = OrderedDict()  # actions an episode took

    # ---- input ---------------------------------------------------------------------------

    def observe(self, f: Frame, actions: Sequence[Action] = ()) -> list[Episode]:
        """`actions`: the supervisor's recent actions on this group's replicas, if any."""
        prev = self._prev
        changed: list[_Episode] = []
        if prev is not None and self._prev_ms is not None:
            gap = f.taken_ms - self._prev_ms
            if gap > 0:
                self._interval_ms = gap if self._interval_ms is None \
                    else 0.8 * self._interval_ms + 0.2 * gap
            self._note_growth(prev, f)
        moved = self._commit_progress(f)
        ep = self._open
        if ep is not None:
            ep.names.update(f.members)
            for m, t in self._first_seen.items():
                ep.first_seen.setdefault(m, t)
            self._during(ep, f, moved)
            if f.settled:
                self._close(ep, f, actions)
                self._open = None
            changed.append(ep)
        elif self._settled is None:
            pass  # the first frames of an unsettled group: nothing to compare with yet
        elif not f.settled:
            self._finish_all()
            changed.extend(e for e in self._finishing if e.final)
            ep = self._open = self._begin(
                f.taken_ms, "state" if f.state not in ("Stable", "Empty", "Dead")
                else "reconcile", f)
            self._during(ep, f, moved)
            changed.append(ep)
        else:
            seen_as = self._changed(self._settled, f)
            last = self._finishing[-1] if self._finishing else None
            if (seen_as == "generation" and last is not None and last.after is self._settled
                    and _same_owners(self._settled, f)):
                # the generation source lagged the description by a poll: same rebalance
                last.after = f
                changed.append(last)
                seen_as = ""
            if seen_as:
                self._finish_all()
                changed.extend(e for e in self._finishing if e.final)
                ep = self._begin(self._prev_ms or self._settled.taken_ms, seen_as, f)
                self._during(ep, f, moved)
                self._close(ep, f, actions)
                changed.append(ep)
        for ep in list(self._finishing):
            if ep not in changed and self._follow(ep, f, moved):
                changed.append(ep)
        for p in moved:  # only now: an episode this frame began compares with before it
            self._progress_ms[p] = f.taken_ms
            last = self._moves.get(p)
            self._moves[p] = (_Move(f.taken_ms, self._prev_ms or f.taken_ms),
                              last[0] if last else None)
        if f.members.keys() != self._names.keys():  # likewise: the members it replaced
            self._first_seen = {m: self._first_seen.get(m, f.taken_ms) for m in f.members}
        self._names = f.members
        if f.settled and self._open is None:
            self._settled_earlier, self._settled = self._settled, f
        self._prev, self._prev_ms = f, f.taken_ms
        out = [self._episode(ep) for ep in dict.fromkeys(changed)]
        self._retire()
        return out

    @property
    def in_progress(self) -> bool:
        return self._open is not None

    @property
    def idle(self) -> bool:
        """Settled, no episode open or still finishing: a frame like the last changes nothing
        but the time, which `touch` notes for a fraction of `observe`'s cost."""
        return self._open is None and not self._finishing and self._prev is not None \
            and self._prev.settled

    def touch(self, taken_ms: int) -> None:
        """The group was seen again exactly as in the last frame (the caller checked)."""
        if self._prev_ms is not None and taken_ms > self._prev_ms:
            gap = taken_ms - self._prev_ms
            self._interval_ms = gap if self._interval_ms is None \
                else 0.8 * self._interval_ms + 0.2 * gap
            self._prev_ms = taken_ms

    def episodes(self) -> tuple[Episode, ...]:
        """Every episode kept, oldest first: final ones, then those still finishing, then
        the open one."""
        live = [*self._finishing, *([self._open] if self._open else [])]
        return (*(self._done or ()), *(self._episode(ep) for ep in live))

    # ---- episodes beginning and ending ------------------------------------------------

    def _begin(self, start_ms: int, seen_as: str, f: Frame) -> _Episode:
        assert self._settled is not None
        ep = _Episode(start_ms=start_ms, before=self._settled, seen_as=seen_as,
                      listed_ms=max(self._settled.taken_ms, self._prev_ms or 0),
                      progress_before=dict(self._progress_ms),
                      moved_before=dict(self._moves), before_earlier=self._settled_earlier,
                      lag_peak=self._settled.lag)
        ep.names.update(self._settled.members)
        ep.names.update(f.members)
        ep.first_seen.update(self._first_seen)
        return ep

    @staticmethod
    def _changed(a: Frame, b: Frame) -> str:
        if a.generation is not None and b.generation is not None \
                and a.generation != b.generation:
            return "generation"
        if not _same_owners(a, b):
            same_generation = (a.generation == b.generation if a.generation is not None
                               else b.generation is None and _static_swap(a, b))
            if same_generation and _by_client(a) == _by_client(b):
                # a static member (group.instance.id) restarted within its session: a new
                # member id, the same client owning the same partitions, no new generation
                # (or, where no generation can be read, the same instance ids)
                return "rejoin"
            return "assignment"
        return ""

    def _during(self, ep: _Episode, f: Frame, moved: set[Slot]) -> None:
        """What a frame inside an open episode adds: unowned time, reconciling members."""
        prev = self._prev
        if prev is not None and prev.taken_ms >= ep.start_ms and not prev.shared:
            topics = ep.before.owned_topics()
            total = sum(n for t, n in prev.partition_counts.items() if t in topics)
            owned = sum(1 for s in prev.assignment if s[0] in topics)
            ep.unowned_ms += max(0, total - owned) * (f.taken_ms - prev.taken_ms)
        for m in f.reconciling:
            span = ep.reconciling.setdefault(m, [f.taken_ms, f.taken_ms])
            span[1] = f.taken_ms
        for m in f.members:
            if m in ep.before.members:
                ep.last_seen[m] = f.taken_ms
        for p in moved:
            ep.first_after.setdefault(p, f.taken_ms)
        ep.lag_peak = _lag_max(ep.lag_peak, f.lag)

    def _close(self, ep: _Episode, f: Frame, actions: Sequence[Action]) -> None:
        ep.end_ms = f.taken_ms
        ep.after = f
        before = ep.before
        names = {**self._names, **ep.names}

        def client(m: str | None) -> str | None:
            return None if m is None else names[m].client_id if m in names else m

        came = [names[m] for m in sorted(f.members.keys() - before.members.keys())]
        went = [before.members[m] for m in sorted(before.members.keys() - f.members.keys())]
        # members that joined and were gone again before the group settled
        passing = [names[m] for m in sorted(ep.names.keys() - before.members.keys()
                                            - f.members.keys())]
        if ep.seen_as == "rejoin":  # the same members by client: nobody came, went or moved
            ep.moved, ep.joined, ep.left = (), (), ()
        else:
            ep.joined = tuple(sorted(m.client_id for m in (*came, *passing)))
            ep.left = tuple(sorted(m.client_id for m in (*went, *passing)))
            ep.moved = tuple(
                Moved(s[0], s[1], client(before.assignment.get(s)), client(f.assignment.get(s)))
                for s in sorted(before.assignment.keys() | f.assignment.keys())
                if before.assignment.get(s) != f.assignment.get(s))
        for mv in ep.moved:
            s = (mv.topic, mv.partition)
            if mv.target is None or s not in ep.progress_before:
                continue
            if s in ep.first_after:
                self._add_gap(ep, s, ep.first_after[s])
            else:
                ep.gaps_pending.add(s)
        rejoin = ep.seen_as == "rejoin"
        evidence = Evidence(
            before=before, after=f, seen_as=ep.seen_as, joined=() if rejoin else tuple(came),
            departed=() if rejoin else tuple(self._departure(ep, m) for m in went),
            passing=tuple(passing), grown=self._growth_for(ep),
            actions=self._actions_for(ep, [*came, *passing], [*went, *passing], actions))
        ep.causes = causes(evidence)
        self._finishing.append(ep)

    def _departure(self, ep: _Episode, m: Member) -> Departure:
        """A departed member's evidence, from the last settled frame that listed it.

        That frame's description and committed offsets are two answers read side by side.
        When a partition of the member's had stood still for half a session or more and
        moved only in that frame, the move is its successor's commit read beside a
        description from before the rebalance (a torn read, met on a loaded machine: a
        killed member looked as if it had left), and that partition is judged on the frame
        before. A member that commits as it goes moved in the frames before too."""
        before = ep.before
        mine = [s for s, owner in before.assignment.items() if owner == m.member_id]
        mine += [s for s, owners in before.shared.items() if m.member_id in owners]
        cadence = median(self._cadence) if self._cadence else 0
        resolution = max(MIN_RESOLUTION_MS, 2 * (self._interval_ms or 0), 2 * cadence)
        stood_still = max(resolution, MIN_SESSION_MS // 2)
        moves: list[_Move] = []
        torn = False
        for s in mine:
            last, earlier = ep.moved_before.get(s, (None, None))
            if last is not None and last.seen_ms == before.taken_ms and (
                    earlier is None or last.seen_ms - earlier.seen_ms >= stood_still):
                torn, last = True, earlier
            if last is not None:
                moves.append(last)
        judged = ep.before_earlier if torn and ep.before_earlier is not None else before
        waiting = any(s in judged.behind for s in mine)
        newest = max(moves, key=lambda mv: mv.seen_ms) if moves else None
        noticed = max(ep.start_ms, ep.last_seen.get(m.member_id, ep.start_ms))
        listed = max(ep.listed_ms, ep.last_seen.get(m.member_id, ep.listed_ms))
        return Departure(m, len(mine), waiting, newest.seen_ms if newest else None, noticed,
                         int(resolution), listed_ms=min(listed, noticed),
                         progress_after_ms=newest.after_ms if newest else None)

    def _growth_for(self, ep: _Episode) -> tuple[tuple[str, int, int], ...]:
        topics = ep.before.owned_topics() | (ep.after.owned_topics() if ep.after else set())
        topics |= set(ep.before.partition_counts)
        assert ep.end_ms is not None
        mine = [g for g in self._grown if g[0] in topics
                and ep.start_ms - GROWTH_LOOKBACK_MS <= g[3] <= ep.end_ms]
        self._grown = [g for g in self._grown if g not in mine
                       and g[3] >= ep.end_ms - GROWTH_LOOKBACK_MS]
        first: dict[str, tuple[str, int, int]] = {}
        for topic, a, b, _ in mine:  # several growths of one topic: from the first to the last
            first[topic] = (topic, first[topic][1] if topic in first else a, b)
        return tuple(first.values())

    def _actions_for(self, ep: _Episode, came: Iterable[Member], went: Iterable[Member],
                     actions: Sequence[Action]) -> tuple[Action, ...]:
        """Per replica named in the episode, every action of the kinds its role takes (a
        departure: kill, stop, crash; a join: start; a restart: both) in the window that no
        earlier episode took: a kill is the cause of the one episode its victim went in,
        however many episodes its window spans."""
        assert ep.end_ms is not None
        lo, hi = ep.start_ms - ACTION_LOOKBACK_MS, ep.end_ms
        # a process may be acted on a little before the observer first lists its member id
        slack = int(2 * (self._interval_ms or 0)) + MIN_RESOLUTION_MS
        out: list[Action] = []
        for members, kinds in ((went, DEPARTURE_ACTIONS), (came, JOIN_ACTIONS)):
            for m in members:
                if kinds is DEPARTURE_ACTIONS:  # acted on this member id, not a former one
                    since = ep.first_seen.get(m.member_id)
                    low = lo if since is None else max(lo, since - slack)
                else:  # started after the member id this one replaces was
                    former = [t for mid, t in ep.first_seen.items() if mid != m.member_id
                              and mid in ep.names and ep.names[mid].client_id == m.client_id]
                    low = max([lo, *(t + 1 for t in former)])
                out.extend(a for a in actions if a.replica == m.client_id
                           and a.action in kinds and low <= a.ts_ms <= hi
                           and a not in out and a not in self._used)
        out.sort(key=lambda a: a.ts_ms)
        for a in out:
            self._used[a] = None
        while len(self._used) > USED_ACTIONS_KEPT:
            self._used.popitem(last=False)
        return tuple(out)

    # ---- after the end: the impact until it is final -----------------------------------

    def _follow(self, ep: _Episode, f: Frame, moved: set[Slot]) -> bool:
        """Fold a later frame into a finished episode; True when its view changed."""
        if ep.final:
            return False
        before = (ep.gap_ms, ep.lag_peak, len(ep.gaps_pending))
        for s in list(ep.gaps_pending & moved):
            ep.gaps_pending.discard(s)
            self._add_gap(ep, s, f.taken_ms)
        ep.lag_peak = _lag_max(ep.lag_peak, f.lag)
        lag_before = ep.before.lag
        assert ep.end_ms is not None
        if ep.recovered_ms is None and lag_before is not None and f.lag is not None \
                and f.lag <= lag_before:
            ep.recovered_ms = f.taken_ms - ep.end_ms
        if (not ep.gaps_pending and (ep.recovered_ms is not None or lag_before is None)) \
                or f.taken_ms - ep.end_ms >= FINAL_WITHIN_MS:
            ep.final = True
            ep.lag_after = f.lag
            return True
        return before != (ep.gap_ms, ep.lag_peak, len(ep.gaps_pending))

    def _finish_all(self) -> None:
        """A new episode begins: those still finishing are final with what they have."""
        for ep in self._finishing:
            if not ep.final:
                ep.final = True
                ep.lag_after = self._prev.lag if self._prev is not None else None

    @staticmethod
    def _add_gap(ep: _Episode, s: Slot, resumed_ms: int) -> None:
        ep.gap_ms = max(ep.gap_ms or 0, resumed_ms - ep.progress_before[s])

    def _retire(self) -> None:
        for ep in [e for e in self._finishing if e.final]:
            self._finishing.remove(ep)
            if self._done is None:
                self._done = deque(maxlen=self._keep)
            self._done.append(self._episode(ep))

    # ---- commits ------------------------------------------------------------------------

    def _commit_progress(self, f: Frame) -> set[Slot]:
        """Slots whose committed offset moved since the previous frame; a commit that went
        back counts as records to be processed again, against the newest episode."""
        prev = self._prev
        moved = set()
        back = 0
        before = prev.committed if prev is not None else {}
        for s, off in f.committed.items():
            was = before.get(s)
            if was is None:
                self._progress_ms.setdefault(s, f.taken_ms)
            elif off != was:
                moved.add(s)
                last = self._moves.get(s)
                if last is not None:
                    if self._cadence is None:
                        self._cadence = deque(maxlen=CADENCE_SAMPLES)
                    self._cadence.append(f.taken_ms - last[0].seen_ms)
                if off < was:
                    back += was - off
        if back:
            target = self._open or (self._finishing[-1] if self._finishing else None)
            if target is not None:
                target.reprocessed += back
        return moved

    def _note_growth(self, prev: Frame, f: Frame) -> None:
        for topic, n in f.partition_counts.items():
            was = prev.partition_counts.get(topic)
            if was is not None and n > was:
                self._grown.append((topic, was, n, f.taken_ms))

    # ---- output -------------------------------------------------------------------------

    def _episode(self, ep: _Episode) -> Episode:
        after = ep.after
        shown = after if after is not None else ep.before
        span_end = ep.end_ms
        reconciling = tuple(sorted(
            (ep.names[m].client_id if m in ep.names else m,
             (span_end if span_end is not None else last) - first)
            for m, (first, last) in ep.reconciling.items()))
        rejoin = ep.seen_as == "rejoin"
        return Episode(
            cluster=self.cluster, group=self.group, start_ms=ep.start_ms, end_ms=ep.end_ms,
            protocol=shown.protocol, seen_as=ep.seen_as, causes=ep.causes,
            impact=Impact(moved=ep.moved, unowned_partition_seconds=round(ep.unowned_ms / 1000, 3),
                          gap_ms=ep.gap_ms, lag_before=ep.before.lag, lag_peak=ep.lag_peak,
                          lag_after=ep.lag_after, recovered_ms=ep.recovered_ms,
                          reprocessed=ep.reprocessed, reconciling=reconciling),
            joined=ep.joined, left=ep.left,
            generation_before=ep.before.generation,
            generation_after=(after or ep.before).generation if rejoin
            else after.generation if after is not None else None,
            target_epoch_before=ep.before.target_epoch,
            target_epoch_after=after.target_epoch if after is not None else None,
            assignor=shown.assignor, final=ep.final)

