"""The episode tracker on scripted groups (no broker): causes and impact as a group lives.

A tiny simulation drives it: members own partitions, a producer keeps the log ends moving,
live owners commit what arrived; a crash stops a member committing while the group still
lists it, until its session expires.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.contracts.history import (
    DEPARTED,
    EPOCH,
    EXPIRED,
    JOINED,
    KILLED,
    LEFT,
    PARTITIONS_ADDED,
    SCALED,
    Action,
    Episode,
)
from backend.history.episodes import EpisodeTracker
from backend.history.frames import Frame, Member

T = "t"


@dataclass
class Group:
    partitions: int = 4
    members: dict[str, str] = field(default_factory=dict)  # member id -> client id
    owners: dict[int, str] = field(default_factory=dict)  # partition -> member id
    dead: set[str] = field(default_factory=set)  # listed, but not committing
    state: str = "Stable"
    protocol: str = "classic"
    generation: int | None = None
    reconciling: frozenset[str] = frozenset()
    rate: int = 10  # records per partition per second
    behind: int = 0  # records a live owner's commit stays behind the log end
    committed: dict[int, int] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    tracker: EpisodeTracker = field(default_factory=lambda: EpisodeTracker("c", "g"))
    seen: list[Episode] = field(default_factory=list)

    def spread(self, *ids: str) -> None:
        self.owners = {p: ids[p % len(ids)] for p in range(self.partitions)}

    def tick(self, t_ms: int, actions: tuple[Action, ...] = ()) -> list[Episode]:
        for p in range(self.partitions):
            self.ends[p] = self.ends.get(p, 0) + self.rate // 2  # a frame every 0.5 s
            owner = self.owners.get(p)
            if owner is not None and owner not in self.dead and self.state == "Stable":
                self.committed[p] = self.ends[p] - self.behind
        lag = sum(self.ends[p] - self.committed.get(p, 0) for p in range(self.partitions))
        f = Frame(t_ms, self.state, self.protocol, "range", self.generation,
                  self.generation, {m: Member(m, c, "/10.0.0.9") for m, c in self.members.items()},
                  {(T, p): m for p, m in self.owners.items()}, self.reconciling, {},
                  {(T, p): o for p, o in self.committed.items()},
                  frozenset((T, p) for p, o in self.ends.items()
                            if self.committed.get(p, 0) < o), {T: self.partitions}, lag)
        out = self.tracker.observe(f, actions)
        self.seen.extend(out)
        return out

    def final(self) -> list[Episode]:
        return [e for e in self.tracker.episodes() if e.end_ms is not None]


def run(g: Group, start_s: float, end_s: float, actions=()) -> None:
    t = start_s
    while t < end_s - 1e-9:
        g.tick(int(t * 1000), tuple(actions))
        t += 0.5


def crash_then_expire(g: Group, actions=()) -> None:
    g.members = {"id-a": "a", "id-b": "b"}
    g.spread("id-a", "id-b")
    run(g, 0, 3)
    g.dead.add("id-b")  # SIGKILL at 3 s: listed, owning, not committing
    run(g, 3, 9, actions)
    g.state, g.owners = "PreparingRebalance", {}  # the session expired at 9 s
    del g.members["id-b"]
    run(g, 9, 10, actions)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 10, 30, actions)


def test_a_crashed_member_is_expired_with_its_dead_time_and_the_episodes_impact():
    g = Group()
    crash_then_expire(g)
    (ep,) = g.final()
    assert (ep.start_ms, ep.end_ms, ep.seen_as) == (9000, 10_000, "state")
    assert ep.cause == EXPIRED and ep.left == ("b",)
    (cause,) = ep.causes
    assert cause.member == "b" and 5_500 <= cause.dead_ms <= 6_500  # the 6 s it was dead
    moved = {(m.partition, m.source, m.target) for m in ep.impact.moved}
    assert moved == {(1, "b", "a"), (3, "b", "a")}
    # 4 partitions without an owner for the second the group rebalanced
    assert ep.impact.unowned_partition_seconds == 4.0
    # b's partitions last progressed at 2.5 s and again at 10 s
    assert ep.impact.gap_ms == 7_500
    assert ep.impact.lag_before is not None and ep.impact.lag_peak > ep.impact.lag_before
    assert ep.final and ep.impact.lag_after is not None


def test_an_expiry_that_fell_between_two_polls_is_still_an_expiry():
    """The new owner already committed the dead member's partitions in the poll that first
    shows it gone: that commit is the new owner's, not a sign of life of the dead one."""
    g = Group(members={"id-a": "a", "id-b": "b"})
    g.spread("id-a", "id-b")
    run(g, 0, 3)
    g.dead.add("id-b")
    run(g, 3, 9)
    del g.members["id-b"]
    g.spread("id-a")  # settled again by the next poll, and committing
    run(g, 9, 12)
    (ep,) = g.final()
    assert (ep.seen_as, ep.cause) == ("assignment", EXPIRED)
    assert 5_000 <= ep.causes[0].dead_ms <= 6_000


def test_a_member_that_left_cleanly_is_left_and_was_never_dead():
    g = Group(members={"id-a": "a", "id-b": "b"})
    g.spread("id-a", "id-b")
    run(g, 0, 5)
    g.state, g.owners = "PreparingRebalance", {}
    del g.members["id-b"]
    run(g, 5, 5.5)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 5.5, 8)
    (ep,) = g.final()
    assert ep.cause == LEFT and ep.causes[0].dead_ms <= 1000


def test_a_clean_leave_noticed_after_a_starved_poll_is_not_called_an_expiry():
    """Records waiting, the member gone between a frame at 4.5 s and the next at 9 s (the
    poller starved for 4.5 s): it was never seen listed without committing, so nothing says
    it expired; and silent for up to 5 s, it may have outlived a 6 s session by a look's
    time: its leave cannot be told from an expiry inside that wait."""
    g = Group(members={"id-a": "a", "id-b": "b"}, behind=2)
    g.spread("id-a", "id-b")
    run(g, 0, 5)
    g.state, g.owners = "PreparingRebalance", {}
    del g.members["id-b"]
    g.tick(9_000)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 9.5, 12)
    (ep,) = g.final()
    (why,) = ep.causes
    assert ep.cause == DEPARTED and why.dead_ms == 4_500, ep.causes
    assert "went unseen for 4.5 s" in why.evidence


def test_a_member_gone_sooner_than_any_session_after_its_last_commit_left():
    """A starved member: its commits stop at 2.5 s (a stall longer than the resolution, with
    records waiting, listed all along), and it is gone at 5.5 s. No session expires within
    3.5 s of a sign of life, so it left; before, this was told an expiry."""
    g = Group(members={"id-a": "a", "id-b": "b"}, behind=2)
    g.spread("id-a", "id-b")
    run(g, 0, 3)
    g.dead.add("id-b")
    run(g, 3, 5.5)
    g.state, g.owners = "PreparingRebalance", {}
    del g.members["id-b"]
    run(g, 5.5, 6)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 6, 8)
    (ep,) = g.final()
    (why,) = ep.causes
    assert ep.cause == LEFT and why.dead_ms == 3_000, ep.causes
    assert "sooner than any session expires" in why.evidence


def test_a_killed_members_successor_read_beside_the_old_description_is_no_sign_of_life():
    """A torn read: the look at 9 s got the description from before the expiry's rebalance
    (b still owning 1 and 3) and the committed offsets from after it (a already committing
    them). b's partitions had stood still since 2.5 s; that last-moment move is a's, and b
    expired, not left."""
    g = Group(members={"id-a": "a", "id-b": "b"}, behind=2)
    g.spread("id-a", "id-b")
    run(g, 0, 3)
    g.dead.add("id-b")
    run(g, 3, 9)
    for p in (1, 3):
        g.committed[p] = g.ends[p] + g.rate // 2  # a's commits, read with the old owners
    g.tick(9_000)
    del g.members["id-b"]
    g.spread("id-a")
    run(g, 9.5, 12)
    (ep,) = g.final()
    (why,) = ep.causes
    assert ep.cause == EXPIRED and why.dead_ms == 6_500, ep.causes


def test_without_records_waiting_a_departure_is_not_called_left_or_expired():
    g = Group(members={"id-a": "a", "id-b": "b"}, rate=0)
    g.spread("id-a", "id-b")
    run(g, 0, 3)
    g.state, g.owners = "PreparingRebalance", {}
    del g.members["id-b"]
    run(g, 3, 3.5)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 3.5, 5)
    (ep,) = g.final()
    assert ep.cause == DEPARTED


def test_the_supervisors_kill_is_joined_to_the_expiry_it_caused():
    g = Group()
    crash_then_expire(g, actions=(Action(3_000, "g", "b", "kill"),
                                  Action(2_000, "g", "a", "kill")))  # another replica's
    (ep,) = g.final()
    assert [c.kind for c in ep.causes] == [KILLED, EXPIRED]
    assert ep.causes[0].member == "b" and "by the presenter" in ep.causes[0].evidence


def test_a_join_and_added_partitions_are_each_named():
    g = Group(members={"id-a": "a"})
    g.spread("id-a")
    run(g, 0, 2)
    g.members["id-c"] = "c"
    g.state, g.owners = "PreparingRebalance", {}
    run(g, 2, 3)
    g.state = "Stable"
    g.spread("id-a", "id-c")
    run(g, 3, 5)
    g.partitions = 6  # seen grown at 5 s; the group rebalances onto them a second later
    run(g, 5, 6)
    g.state, g.owners = "PreparingRebalance", {}
    run(g, 6, 6.5)
    g.state = "Stable"
    g.spread("id-a", "id-c")
    run(g, 6.5, 20)
    joined, grown = g.final()
    assert joined.cause == JOINED and joined.joined == ("c",)
    assert grown.cause == PARTITIONS_ADDED
    assert (grown.causes[0].topic, grown.causes[0].before, grown.causes[0].after) == \
        ("t", "4", "6")


def test_members_that_came_and_went_within_one_rebalance_are_named_with_their_actions():
    g = Group(members={"id-a": "a"})
    g.spread("id-a")
    run(g, 0, 2)
    g.members.update({"id-d": "d", "id-e": "e"})
    g.state, g.owners = "PreparingRebalance", {}
    run(g, 2, 3)
    del g.members["id-d"], g.members["id-e"]  # stopped again before it settled
    run(g, 3, 4)
    g.state = "Stable"
    g.spread("id-a")
    actions = (Action(1_500, "g", "d", "scale-up"), Action(1_600, "g", "e", "scale-up"),
               Action(3_100, "g", "d", "scale-down"), Action(3_200, "g", "e", "scale-down"))
    run(g, 4, 8, actions)
    (ep,) = g.final()
    assert ep.joined == ep.left == ("d", "e")
    assert [(c.kind, c.member) for c in ep.causes] == [
        (SCALED, "d"), (SCALED, "e"), (SCALED, "d"), (SCALED, "e"), (JOINED, "d"),
        (JOINED, "e")]
    assert "gone again before the group settled" in ep.causes[-1].evidence


def test_actions_during_a_long_rebalance_are_all_joined_each_to_one_episode():
    """A scale-down opens a rebalance; before the group settles a member is killed, and is
    listed until its session ends: one episode, both actions in it, the kill's victim judged
    from when it was last listed, not from when the episode began."""
    g = Group(members={"id-a": "a", "id-b": "b", "id-c": "c"})
    g.spread("id-a", "id-b", "id-c")
    run(g, 0, 2)
    del g.members["id-c"]
    g.state, g.owners = "PreparingRebalance", {}
    actions = (Action(1_900, "g", "c", "scale-down"), Action(3_000, "g", "b", "kill"),
               Action(-50_000, "g", "b", "kill"))  # an older kill, another episode's
    run(g, 2, 8, actions)
    del g.members["id-b"]  # its session ended: gone at 8 s, last listed at 7.5 s
    run(g, 8, 9, actions)
    g.state = "Stable"
    g.spread("id-a")
    run(g, 9, 12, actions)
    (ep,) = g.final()
    kinds = [(c.kind, c.member) for c in ep.causes]
    assert kinds[:2] == [(KILLED, "b"), (SCALED, "c")], kinds
    b = next(c for c in ep.causes if c.member == "b" and c.kind != KILLED)
    assert b.dead_ms is None or b.dead_ms >= 5_000, b  # not "0 s before it was gone"


def test_a_kip848_group_keeps_its_epochs_and_who_reconciled_for_how_long():
    g = Group(members={"id-a": "a", "id-b": "b"}, protocol="consumer", generation=4)
    g.spread("id-a", "id-b")
    run(g, 0, 2)
    g.generation = 5  # the broker bumped the epoch; b reconciles for a second
    g.reconciling = frozenset({"id-b"})
    run(g, 2, 3)
    g.reconciling = frozenset()
    run(g, 3, 5)
    (ep,) = g.final()
    assert ep.seen_as == "reconcile" and ep.cause == EPOCH
    assert (ep.generation_before, ep.generation_after) == (4, 5)
    assert (ep.target_epoch_before, ep.target_epoch_after) == (4, 5)
    assert ep.impact.reconciling == (("b", 1000),)


def test_commits_that_go_back_count_as_records_processed_again():
    tracker = EpisodeTracker("c", "g")
    a = {"id-a": Member("id-a", "a")}

    def f(t_ms, state, committed, owned=True):
        return Frame(t_ms, state, members=a,
                     assignment={(T, 0): "id-a", (T, 1): "id-a"} if owned else {},
                     committed={(T, p): o for p, o in enumerate(committed)},
                     behind=frozenset({(T, 0), (T, 1)}), partition_counts={T: 2})

    tracker.observe(f(0, "Stable", (100, 100)))
    tracker.observe(f(500, "Stable", (120, 130)))
    tracker.observe(f(1000, "PreparingRebalance", (120, 130), owned=False))
    tracker.observe(f(1500, "Stable", (95, 130)))  # the owner went back 25 on partition 0
    tracker.observe(f(2000, "Stable", (110, 90)))  # and 40 on partition 1
    (ep,) = tracker.episodes()
    assert ep.impact.reprocessed == 65


def test_each_change_is_emitted_once_per_frame_and_the_final_version_last():
    g = Group()
    crash_then_expire(g)
    versions = [(e.start_ms, e.end_ms, e.final) for e in g.seen]
    assert versions[0] == (9000, None, False)  # open
    assert (9000, 10_000, False) in versions  # ended
    assert versions[-1] == (9000, 10_000, True)  # final
    assert sum(1 for v in versions if v[2]) == 1


def test_a_streams_groups_active_tasks_are_its_slots_and_move_like_partitions():
    from backend.history.frames import frame_from
    from backend.kafka.groups import GroupDescription, GroupMember

    def desc(*members: tuple[str, tuple[str, ...]]) -> GroupDescription:
        return GroupDescription("s", "Stable", "streams", None, tuple(
            GroupMember(m, m, "/h", (), tasks=tasks) for m, tasks in members), epoch=3)

    a = ("a", ("0_0 active", "0_1 active", "0_1 standby"))
    b = ("b", ("0_2 active",))
    f = frame_from(desc(a, b), 0, {}, {}, {})
    assert f.assignment == {("subtopology 0", 0): "a", ("subtopology 0", 1): "a",
                            ("subtopology 0", 2): "b"}
    tracker = EpisodeTracker("c", "s")
    tracker.observe(f)
    tracker.observe(frame_from(desc(("a", ("0_0 active", "0_1 active", "0_2 active"))), 1000,
                               {}, {}, {}))
    (ep,) = tracker.episodes()
    assert [(m.topic, m.partition, m.source, m.target) for m in ep.impact.moved] == [
        ("subtopology 0", 2, "b", "a")]
    assert ep.left == ("b",)


def test_a_start_that_began_a_former_incarnation_is_not_the_cause_of_a_later_one():
    from backend.contracts.history import REJOINED, RESTARTED

    tracker = EpisodeTracker("c", "g")

    def f(t_ms: int, ada_id: str) -> Frame:
        members = {ada_id: Member(ada_id, "ada", "", "ada"), "id-b": Member("id-b", "b")}
        return Frame(t_ms, "Stable", members=members,
                     assignment={(T, 0): ada_id, (T, 1): "id-b"}, partition_counts={T: 2})

    actions = (Action(-5_000, "g", "ada", "scale-up"),  # started the first ada
               Action(3_000, "g", "ada", "restart"))
    for t in range(0, 5_000, 500):
        tracker.observe(f(t, "ada-1"), actions)
    tracker.observe(f(5_000, "ada-2"), actions)  # back under a new id, same partitions
    (ep,) = tracker.episodes()
    assert ep.seen_as == "rejoin"
    assert [c.kind for c in ep.causes] == [RESTARTED, REJOINED]


def test_a_share_groups_sharer_going_is_an_episode_that_moves_nothing():
    """Share groups own nothing: a sharer that goes changes who shares, never an owner."""

    def frame(t_ms: int, *sharers: str) -> Frame:
        return Frame(t_ms, "Stable", "share", None, 4, 4,
                     {m: Member(m, m, "/10.0.0.9") for m in sharers},
                     shared={(T, p): sharers for p in range(2)},
                     committed={(T, 0): t_ms // 100, (T, 1): t_ms // 100},
                     partition_counts={T: 2}, lag=0)

    tracker = EpisodeTracker("c", "q")
    for t in range(0, 10_000, 500):
        tracker.observe(frame(t, "a", "b"))
    for t in range(10_000, 20_000, 500):
        tracker.observe(frame(t, "a"))
    (ep,) = tracker.episodes()
    assert ep.protocol == "share" and ep.impact.moved == () and ep.left == ("b",)
    assert ep.cause == LEFT and ep.impact.unowned_partition_seconds == 0
    assert "it left the group" in ep.causes[0].evidence
