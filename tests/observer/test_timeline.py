"""The Live page's rebalance timeline from hand-made frame sequences (no broker): the
memory's episode tracker seen through the Snapshot's RebalanceView."""

from __future__ import annotations

from backend.history.frames import Frame, Member
from backend.observer.collect import RawMember, RawObservation
from backend.observer.timeline import Timeline, frame

CLIENTS = {"id-a": "a", "id-b": "b", "id-c": "c", "id-b2": "b"}


def f(t, state="Stable", gen=None, assign=None, committed=None, targets_met=True, members=None,
      shared=None):
    assign = assign or {}
    members = members if members is not None else sorted(set(assign.values()))
    return Frame(taken_ms=t * 1000, state=state, generation=gen,
                 members={m: Member(m, CLIENTS[m]) for m in members},
                 assignment={("t", p): m for p, m in assign.items()},
                 reconciling=frozenset() if targets_met else frozenset(members[:1]),
                 committed={("t", p): o for p, o in (committed or {}).items()},
                 shared={("t", p): ms for p, ms in (shared or {}).items()},
                 partition_counts={"t": 6})


ABC = {0: "id-a", 1: "id-a", 2: "id-b", 3: "id-b", 4: "id-c", 5: "id-c"}
AC = {0: "id-a", 1: "id-a", 2: "id-a", 3: "id-c", 4: "id-c", 5: "id-c"}


def test_no_rebalance_while_nothing_changes():
    tl = Timeline()
    for t in range(5):
        tl.observe(f(t, gen=3, assign=ABC))
    assert tl.rebalances() == ()


def test_one_rebalance_through_unstable_states_with_moves_and_duration():
    tl = Timeline()
    tl.observe(f(0, gen=3, assign=ABC))
    tl.observe(f(1, gen=3, assign=ABC))
    tl.observe(f(2, state="PreparingRebalance", gen=3, assign=ABC))
    assert tl.in_progress and tl.rebalances()[0].end_ms is None
    tl.observe(f(3, state="CompletingRebalance", gen=4, assign={}, members=["id-a", "id-c"]))
    tl.observe(f(4, gen=4, assign=AC))
    (rb,) = tl.rebalances()
    assert (rb.start_ms, rb.end_ms, rb.reason) == (2000, 4000, "state")
    assert rb.moved == ((2, "b", "a"), (3, "b", "c"), )
    assert rb.left == ("b",) and rb.joined == ()
    assert (rb.previous_generation, rb.generation) == (3, 4)
    assert not tl.in_progress


def test_rebalance_shorter_than_the_poll_interval_seen_through_the_generation():
    # same members, same assignment, both polls Stable: only the generation tells
    tl = Timeline()
    tl.observe(f(0, gen=7, assign=ABC))
    tl.observe(f(1, gen=7, assign=ABC))
    tl.observe(f(2, gen=8, assign=ABC))
    (rb,) = tl.rebalances()
    assert rb.reason == "generation"
    assert (rb.start_ms, rb.end_ms) == (1000, 2000)  # bounded by the two polls
    assert (rb.previous_generation, rb.generation) == (7, 8)
    assert rb.moved == ()


def test_rebalance_between_polls_seen_through_the_assignment_without_a_generation():
    # a member crashed and a new instance rejoined within one poll interval: new member id
    tl = Timeline()
    tl.observe(f(0, assign=ABC))
    swapped = {**ABC, 2: "id-b2", 3: "id-b2"}
    tl.observe(f(1, assign=swapped))
    (rb,) = tl.rebalances()
    assert rb.reason == "assignment"
    assert rb.moved == ((2, "b", "b"), (3, "b", "b"))  # same client id, new member
    assert rb.left == ("b",) and rb.joined == ("b",)


def test_kip848_reconciliation_is_one_episode():
    tl = Timeline()
    tl.observe(f(0, gen=10, assign=ABC))
    # b fenced: targets moved, a and c not yet owning them
    partial = {0: "id-a", 1: "id-a", 4: "id-c", 5: "id-c"}
    tl.observe(f(1, gen=11, assign=partial, members=["id-a", "id-c"], targets_met=False))
    tl.observe(f(2, gen=11, assign={**partial, 2: "id-a"}, members=["id-a", "id-c"],
                 targets_met=False))
    tl.observe(f(3, gen=11, assign=AC))
    (rb,) = tl.rebalances()
    assert rb.reason == "reconcile"
    assert rb.moved == ((2, "b", "a"), (3, "b", "c"))
    assert (rb.start_ms, rb.end_ms) == (1000, 3000)


def test_processing_gap_from_last_progress_before_to_first_after():
    tl = Timeline()
    c = {p: 100 for p in range(6)}
    tl.observe(f(0, assign=ABC, committed=c))
    c = {p: 110 for p in range(6)}
    tl.observe(f(1, assign=ABC, committed=c))  # all progress at 1 s
    c = {**c, 0: 120, 1: 120, 4: 120, 5: 120}  # b's partitions 2, 3 stop (killed)
    tl.observe(f(2, assign=ABC, committed=c))
    tl.observe(f(8, state="PreparingRebalance", assign=ABC, committed=c))
    tl.observe(f(9, assign=AC, committed={**c, 2: 111}))  # p2 resumes at 9 s
    assert tl.rebalances()[0].gap_ms == 8000
    tl.observe(f(11, assign=AC, committed={**c, 2: 112, 3: 111}))  # p3 resumes at 11 s
    assert tl.rebalances()[0].gap_ms == 10000


def test_frame_from_an_observation_checks_kip848_targets():
    a = RawMember("id-a", "a", "h", (("t", 0),), target=(("t", 0), ("t", 1)))
    obs = RawObservation(taken_ms=5, group="g", state="Stable", protocol="consumer",
                         assignor="uniform", members=(a,), committed={("t", 0): 3},
                         end_offsets={}, partition_counts={"t": 2})
    fr = frame(obs, "t")
    assert fr.reconciling == {"id-a"} and not fr.settled
    assert fr.assignment == {("t", 0): "id-a"} and fr.committed == {("t", 0): 3}


def test_first_frames_of_an_unsettled_group_are_not_a_rebalance():
    tl = Timeline()
    tl.observe(f(0, state="CompletingRebalance", assign={}))
    tl.observe(f(1, gen=1, assign=ABC))
    assert tl.rebalances() == ()


def test_generation_arriving_one_poll_after_the_owners_is_the_same_rebalance():
    # the generation source lagged: owners changed at 1 s, the new generation shows at 2 s
    tl = Timeline()
    tl.observe(f(0, gen=3, assign=ABC))
    tl.observe(f(1, gen=3, assign=AC))
    tl.observe(f(2, gen=4, assign=AC))
    (rb,) = tl.rebalances()
    assert rb.moved == ((2, "b", "a"), (3, "b", "c"))
    assert (rb.previous_generation, rb.generation) == (3, 4)


def test_a_static_member_back_in_the_same_generation_is_a_rejoin_not_a_rebalance():
    tl = Timeline()
    tl.observe(f(0, gen=4, assign=ABC))
    swapped = {**ABC, 2: "id-b2", 3: "id-b2"}  # b restarted: new member id, same partitions
    tl.observe(f(1, gen=4, assign=swapped))
    (rb,) = tl.rebalances()
    assert rb.reason == "rejoin" and rb.generation == 4 == rb.previous_generation
    assert rb.moved == () and rb.joined == () and rb.left == ()
    # the same swap with a new generation is a real rebalance
    tl2 = Timeline()
    tl2.observe(f(0, gen=4, assign=ABC))
    tl2.observe(f(1, gen=5, assign=swapped))
    assert tl2.rebalances()[0].reason == "generation"


def test_a_share_groups_membership_changes_are_episodes_with_nothing_moved():
    """A share group's partitions gain and lose sharers: a member joining or dying is an
    episode on the Timeline (joined / left, the epoch moving), and no partition "moves"."""
    def share(t, gen, shared):
        members = sorted({m for ms in shared.values() for m in ms})
        return f(t, gen=gen, members=members, committed={0: 10 * t, 1: 10 * t},
                 shared={p: tuple(ms) for p, ms in shared.items()})

    tl = Timeline()
    tl.observe(share(0, 4, {0: ["id-a"], 1: ["id-a"]}))
    tl.observe(share(1, 4, {0: ["id-a"], 1: ["id-a"]}))
    assert tl.rebalances() == ()
    tl.observe(share(2, 6, {0: ["id-a", "id-b"], 1: ["id-a", "id-b"]}))  # b joins
    tl.observe(share(3, 6, {0: ["id-a", "id-b"], 1: ["id-a", "id-b"]}))
    tl.observe(share(4, 6, {0: ["id-b"], 1: ["id-b"]}))  # a dies, same epoch read
    joined, left = tl.rebalances()
    assert (joined.joined, joined.left, joined.moved) == (("b",), (), ())
    assert (joined.previous_generation, joined.generation) == (4, 6)
    assert (joined.start_ms, joined.end_ms) == (1000, 2000)
    assert (left.joined, left.left, left.moved, left.reason) == ((), ("a",), (), "assignment")
