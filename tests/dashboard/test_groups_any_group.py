"""A group's page for any group, not only groupscope's: its words ("member", not "replica"),
no heartbeat fields, and a KIP-848 member's current vs target assignment (pure parts)."""

from __future__ import annotations

from dataclasses import replace

from streamlit.testing.v1 import AppTest

from backend.contracts import Event, MemberView, PartitionView, Snapshot
from dashboard import live_model as lm
from dashboard.panels import cards_html


def snap(protocol: str = "classic", members: tuple[MemberView, ...] = (),
         events: tuple[Event, ...] = ()) -> Snapshot:
    parts = tuple(PartitionView(partition=p, owner="c1" if p < 2 else None, committed=0,
                                end=5, lag_messages=5, lag_seconds=None) for p in range(3))
    return Snapshot(taken_ms=10_000, group="billing", topic="t", state="Stable",
                    protocol=protocol, assignor="uniform", generation=7, members=members,
                    partitions=parts, streams=(), rebalances=(), total_lag=15, events=events,
                    partition_count=3)


def member(name: str, partitions: tuple[int, ...],
           target: tuple[int, ...] | None = None) -> MemberView:
    return MemberView(member_id=f"id-{name}", client_id=name, host="h", partitions=partitions,
                      target_partitions=target)


def test_own_is_the_events_topic_or_events_read():
    assert lm.is_own_group("telemetry-summariser", ["telemetry", "telemetry-summariser.events"])
    assert not lm.is_own_group("billing", ["telemetry", "telemetry-summariser.events"])
    assert lm.is_own_group("billing", [], events_seen=True)
    assert lm.member_noun(True) == "replica" and lm.member_noun(False) == "member"
    assert lm.generation_label("consumer") == "group epoch"
    assert lm.generation_label("classic") == "generation"


def test_assignment_text_shows_the_target_only_when_it_differs():
    assert lm.assignment_text((2, 1)) == "P1,P2"
    assert lm.assignment_text((1, 2), (2, 1)) == "P1,P2"
    assert lm.assignment_text((1, 2), (1, 2, 3)) == "P1,P2 → target P1,P2,P3"
    assert lm.assignment_text((), (0,)) == "none → target P0"


def test_cards_of_another_group_say_member_without_heartbeat_fields():
    s = snap("consumer", (member("c1", (0, 1), (0, 1, 2)), member("c2", (), ())))
    cards = {c.name: c for c in lm.replica_cards(s)}
    assert cards["c1"].target == (0, 1, 2) and cards["c2"].target == ()
    theirs = cards_html(list(cards.values()), own=False)
    assert "P0,P1 → target P0,P1,P2" in theirs
    assert "msg/s" not in theirs and "batch" not in theirs
    ours = cards_html(list(cards.values()))
    assert "msg/s" in ours and "batch" in ours
    # a classic member has no target: its partitions as before
    classic = lm.replica_cards(snap("classic", (member("c1", (0, 1)),)))
    assert classic[0].target is None and "<b>0, 1</b>" in cards_html(classic, own=False)


def test_idle_warning_speaks_of_members_outside_groupscope():
    s = replace(snap(members=(member("a", (0, 1, 2)), member("b", ()), member("c", ()),
                              member("d", ()))))
    warning = lm.idle_warning(s, lm.member_noun(False))
    assert warning is not None and "4 members share 3 partitions" in warning
    assert "replica" not in warning
    assert "4 replicas share 3 partitions" in (lm.idle_warning(s) or "")


def _header(s: Snapshot, own: bool) -> AppTest:
    def script(s, own):  # AppTest runs its source alone: no annotations to resolve
        from dashboard.views.live import draw_header

        draw_header(s, "k:9092", own=own)

    return AppTest.from_function(script, args=(s, own), default_timeout=30).run()


def test_header_of_another_kip848_group_has_members_epoch_and_no_dead_letters():
    s = snap("consumer", (member("c1", (0, 1), (0, 1, 2)),))
    theirs = _header(s, own=False)
    assert not theirs.exception, theirs.exception
    labels = [m.label for m in theirs.metric]
    assert labels == ["members", "partitions", "streams", "rebalances", "total lag"]
    assert "group epoch **7**" in theirs.markdown[0].value
    ours = _header(replace(s, protocol="classic"), own=True)
    assert ours.metric[0].label == "replicas"
    assert "dead letters" in [m.label for m in ours.metric]
    assert "generation **7**" in ours.markdown[0].value


def test_header_shows_the_target_assignment_epoch_when_it_is_known():
    from dashboard.views.live import header_badges

    s = snap("consumer")
    assert "target epoch" not in header_badges(s)
    assert "group epoch **7** · target epoch **6**" in header_badges(replace(s, target_epoch=6))


def test_a_streams_groups_header_shows_its_group_epoch_and_target_epoch():
    from dashboard.views.live import header_badges

    s = replace(snap("streams"), assignor=None, generation=12, target_epoch=13)
    badges = header_badges(s)
    assert ":blue-badge[streams group]" in badges
    assert "group epoch **12** · target epoch **13**" in badges
    # before the description says, no target epoch is made up
    assert "target epoch" not in header_badges(replace(s, target_epoch=None))
