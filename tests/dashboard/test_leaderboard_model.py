"""The room leaderboard folded from Snapshots: credit, badges, departures and their bounds."""

from __future__ import annotations

from dataclasses import dataclass

from backend.contracts import Event, EventType, MemberView, PartitionView, Snapshot, StreamView
from dashboard import leaderboard_model as lb


def snap(ts: int, owners: dict[int, str | None], committed: dict[int, int | None],
         members: tuple[str, ...] | None = None, events: tuple[Event, ...] = (),
         streams: tuple[StreamView, ...] = (), topic: str = "t",
         error: str | None = None) -> Snapshot:
    """A group whose members are named by client id; member id = "id-" + name."""
    names = members if members is not None else tuple(sorted({o for o in owners.values()
                                                              if o}))
    parts = tuple(PartitionView(partition=p, owner=o, committed=committed.get(p), end=10_000,
                                lag_messages=0, lag_seconds=None,
                                owner_member_id=f"id-{o}" if o else None)
                  for p, o in owners.items())
    mem = tuple(MemberView(member_id=f"id-{n}", client_id=n, host=f"/{n}-host",
                           partitions=tuple(p for p, o in owners.items() if o == n))
                for n in names)
    return Snapshot(taken_ms=ts, group="g", topic=topic, state="Stable", protocol="classic",
                    assignor="range", generation=1, members=mem, partitions=parts,
                    streams=streams, rebalances=(), events=events,
                    partition_count=len(owners), error=error)


def by_name(board: lb.Leaderboard) -> dict[str, lb.LeaderRow]:
    return {r.name: r for r in board.rows()}


def test_each_commit_advance_goes_to_the_owner_at_the_newer_poll():
    board = lb.Leaderboard()
    board.fold([
        snap(1000, {0: "ada", 1: "bob"}, {0: 100, 1: 50}),  # baseline: nothing credited
        snap(2000, {0: "ada", 1: "bob"}, {0: 130, 1: 60}),
        snap(3000, {0: "bob", 1: "bob"}, {0: 150, 1: 70}, members=("ada", "bob")),
    ])
    rows = by_name(board)
    assert rows["ada"].processed == 30
    assert rows["bob"].processed == 10 + 20 + 10
    assert [r.name for r in board.rows()] == ["bob", "ada"]  # most processed first


def test_an_advance_while_nobody_owns_the_partition_goes_to_its_last_owner():
    board = lb.Leaderboard()
    board.fold([
        snap(1000, {0: "ada"}, {0: 0}),
        snap(2000, {0: None}, {0: 40}, members=("ada",)),  # mid-rebalance: revoked, commits
    ])
    assert by_name(board)["ada"].processed == 40


def test_a_rewind_or_a_missing_offset_credits_nothing_and_later_progress_counts_again():
    board = lb.Leaderboard()
    board.fold([
        snap(1000, {0: "ada"}, {0: 500}),
        snap(2000, {0: "ada"}, {0: 100}),  # offsets reset back
        snap(3000, {0: "ada"}, {0: None}),
        snap(4000, {0: "ada"}, {0: 120}),
    ])
    assert by_name(board)["ada"].processed == 20


def test_badges_sharing_solo_and_waiting():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada", 1: "bob"}, {0: 0, 1: 0}, members=("ada", "bob", "cy"))])
    badges = {r.name: r.badge for r in board.rows()}
    assert badges == {"ada": lb.SHARING, "bob": lb.SHARING, "cy": lb.WAITING}

    board.fold([snap(2000, {0: "ada", 1: "ada"}, {0: 0, 1: 0}, members=("ada", "cy"))])
    badges = {r.name: r.badge for r in board.rows()}
    assert badges["ada"] == lb.SOLO and badges["cy"] == lb.WAITING


def test_rows_carry_host_partitions_streams_rate_and_time_in_the_group():
    streams = (StreamView(stream_id="car-1", partition=0, owner="ada"),
               StreamView(stream_id="car-2", partition=0, owner="ada"),
               StreamView(stream_id="car-3", partition=1, owner="bob"))
    board = lb.Leaderboard(rate_window_ms=10_000)
    board.fold([snap(1000 * i, {0: "ada", 1: "bob"}, {0: 100 * i, 1: 0}, streams=streams)
                for i in range(1, 31)])
    ada = by_name(board)["ada"]
    assert ada.host == "/ada-host" and ada.partitions == (0,) and ada.streams == 2
    assert ada.processed == 2900
    assert 95.0 <= ada.rate <= 105.0  # 100 per second, over the last ten seconds
    assert by_name(board)["bob"].rate == 0.0
    assert ada.seen_at_start and ada.in_group_ms(now_ms=30_000) == 29_000


def test_snapshots_already_folded_or_in_error_change_nothing():
    board = lb.Leaderboard()
    first = [snap(1000, {0: "ada"}, {0: 0}), snap(2000, {0: "ada"}, {0: 10})]
    board.fold(first)
    board.fold(first)  # the same history read again on the next refresh
    board.fold([snap(3000, {}, {}, members=(), error="broker down")])
    rows = board.rows()
    assert [(r.name, r.processed, r.departed) for r in rows] == [("ada", 10, False)]


def test_a_member_that_leaves_stays_greyed_with_its_total_and_when():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada", 1: "bob"}, {0: 0, 1: 0}),
                snap(2000, {0: "ada", 1: "bob"}, {0: 5, 1: 7}),
                snap(3000, {0: "ada", 1: "ada"}, {0: 6, 1: 7})])
    bob = by_name(board)["bob"]
    assert bob.departed and bob.left_ms == 3000 and bob.processed == 7
    assert bob.how == lb.UNKNOWN_EXIT and bob.badge == lb.UNKNOWN_EXIT
    assert bob.partitions == () and bob.rate == 0.0
    assert bob.in_group_ms(now_ms=99_000) == 2000
    assert by_name(board)["ada"].badge == lb.SOLO
    assert board.rows()[-1].name == "bob"  # members first, then the departed


def test_a_member_missing_from_one_poll_comes_back_as_the_same_row():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada"}, {0: 0}),
                snap(2000, {0: None}, {0: 3}, members=()),
                snap(3000, {0: "ada"}, {0: 4})])
    (ada,) = board.rows()
    assert not ada.departed and ada.processed == 4 and ada.joined_ms == 1000


def _stopped(name: str, ts: int) -> Event:
    return Event(ts=ts, group="g", replica=name, type=EventType.STOPPED)


def _beat(name: str, ts: int) -> Event:
    return Event(ts=ts, group="g", replica=name, type=EventType.HEARTBEAT)


def test_a_replica_that_says_it_stopped_left_even_when_the_event_comes_after_it_left():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada", 1: "bob"}, {0: 0, 1: 0}, events=(_beat("bob", 900),)),
                snap(2000, {0: "ada", 1: "ada"}, {0: 0, 1: 0}, events=(_beat("bob", 900),))])
    assert by_name(board)["bob"].how == lb.UNKNOWN_EXIT  # not decided yet
    board.fold([snap(3000, {0: "ada", 1: "ada"}, {0: 0, 1: 0},
                     events=(_beat("bob", 900), _stopped("bob", 2500)))])
    assert by_name(board)["bob"].how == lb.LEFT


def test_a_replica_silent_past_the_grace_crashed_and_a_plain_consumer_stays_unknown():
    board = lb.Leaderboard()
    beats = (_beat("bob", 900),)
    board.fold([snap(1000, {0: "ada", 1: "bob", 2: "cy"}, {0: 0, 1: 0, 2: 0}, events=beats),
                snap(2000, {0: "ada", 1: "ada", 2: "ada"}, {0: 0, 1: 0, 2: 0}, events=beats)])
    later = 2000 + lb.STOP_GRACE_MS + 1000
    board.fold([snap(later, {0: "ada", 1: "ada", 2: "ada"}, {0: 0, 1: 0, 2: 0}, events=beats)])
    rows = by_name(board)
    assert rows["bob"].how == lb.CRASHED  # publishes events, never said it stopped
    assert rows["cy"].how == lb.UNKNOWN_EXIT  # a plain consumer: no way to tell


def test_a_stop_from_before_the_board_started_does_not_explain_a_later_departure():
    old_stop = (_stopped("bob", 500),)  # an earlier life of bob, still in the event ring
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada", 1: "bob"}, {0: 0, 1: 0}, events=old_stop),
                snap(2000, {0: "ada", 1: "ada"}, {0: 0, 1: 0}, events=old_stop)])
    assert by_name(board)["bob"].how == lb.UNKNOWN_EXIT


@dataclass
class Info:  # the supervisor's ReplicaInfo, duck-typed as the model reads it
    name: str
    state: str
    ended_at: float | None
    alive: bool = False


def test_the_supervisor_tells_a_kill_from_a_stop():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada", 1: "bob", 2: "cy"}, {0: 0, 1: 0, 2: 0}),
                snap(8000, {0: "ada", 1: "ada", 2: "ada"}, {0: 0, 1: 0, 2: 0})],
               supervised=[Info("bob", "killed", 2.0), Info("cy", "stopped", 7.9)])
    rows = by_name(board)
    assert rows["bob"].how == lb.CRASHED and rows["cy"].how == lb.LEFT


def test_departed_members_are_capped_oldest_first():
    board = lb.Leaderboard(max_departed=3)
    names = [f"m{i}" for i in range(6)]
    snaps = [snap(1000, {0: "keep"}, {0: 0}, members=("keep", *names))]
    for i in range(6):  # one leaves per poll
        snaps.append(snap(2000 + i * 1000, {0: "keep"}, {0: 0}, members=("keep", *names[i + 1:])))
    board.fold(snaps)
    departed = sorted(r.name for r in board.rows() if r.departed)
    assert departed == ["m3", "m4", "m5"]


def test_a_new_topic_starts_offsets_afresh():
    board = lb.Leaderboard()
    board.fold([snap(1000, {0: "ada"}, {0: 900}),
                snap(2000, {0: "ada"}, {0: 5}, topic="other"),
                snap(3000, {0: "ada"}, {0: 8}, topic="other")])
    assert by_name(board)["ada"].processed == 3


def test_duration_text():
    assert lb.duration_text(42_500) == "42 s"
    assert lb.duration_text(185_000) == "3 min 05 s"
    assert lb.duration_text(3_720_000) == "1 h 02 min"
    assert lb.duration_text(-5) == "0 s"
