"""Each cause rule, table-tested with plain evidence: what it names and what it refuses to."""

from __future__ import annotations

import pytest

from backend.contracts.history import (
    ASSIGNOR,
    CRASHED,
    DEPARTED,
    EPOCH,
    EXPIRED,
    JOINED,
    KILLED,
    LEFT,
    NOT_OBSERVED,
    PARTITIONS_ADDED,
    PROTOCOL,
    REJOINED,
    SCALED,
    SUBSCRIPTION,
    Action,
    main_cause,
)
from backend.history.causes import Departure, Evidence, causes
from backend.history.frames import Frame, Member

A, B, B2 = Member("id-a", "a", "/10.0.0.1"), Member("id-b", "b", "/10.0.0.2"), \
    Member("id-b2", "b", "/10.0.0.2")


def frame(*members: Member, topics=("t",), protocol="classic", assignor="range", gen=None,
          target=None) -> Frame:
    assignment = {(t, i): m.member_id for i, m in enumerate(members) for t in topics}
    return Frame(0, "Stable", protocol=protocol, assignor=assignor, generation=gen,
                 target_epoch=target, members={m.member_id: m for m in members},
                 assignment=assignment)


def gone(member: Member, waiting: bool, last: int | None, noticed: int = 10_000,
         owned: int = 2, resolution: int = 2000) -> Departure:
    return Departure(member, owned, waiting, last, noticed, resolution)


CASES = [
    # (name, evidence, expected (kind, member) list)
    ("a member that stopped committing with records waiting and was removed later expired",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, 3_900),)),
     [(EXPIRED, "b")]),
    ("one that committed until it was gone left",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, 9_500),)),
     [(LEFT, "b")]),
    ("one seen committing shortly before, by an observer polling too seldom to tell",
     Evidence(frame(A, B), frame(A), "state",
              departed=(gone(B, True, 5_000, resolution=20_000),)),
     [(DEPARTED, "b")]),
    ("one whose partitions had nothing waiting cannot be told",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, False, 3_900),)),
     [(DEPARTED, "b")]),
    ("one never seen committing cannot be told either",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, None),)),
     [(DEPARTED, "b")]),
    ("a new member id joined",
     Evidence(frame(A), frame(A, B), "state", joined=(B,)), [(JOINED, "b")]),
    ("a member that joined and was gone before the group settled",
     Evidence(frame(A), frame(A), "state", passing=(B,),
              actions=(Action(100, "g", "b", "scale-up"), Action(900, "g", "b", "scale-down"))),
     [(SCALED, "b"), (SCALED, "b"), (JOINED, "b")]),
    ("a static member back under a new id is a rejoin",
     Evidence(frame(A, Member("id-b", "b", "", "inst-b")),
              frame(A, Member("id-b2", "b", "", "inst-b")), "rejoin"), [(REJOINED, "b")]),
    ("a topic that grew",
     Evidence(frame(A), frame(A), "generation", grown=(("t", 6, 8),)),
     [(PARTITIONS_ADDED, None)]),
    ("the members' topics changed with nobody coming or going",
     Evidence(frame(A, B), frame(A, B, topics=("t", "u")), "assignment"),
     [(SUBSCRIPTION, None)]),
    ("classic to consumer",
     Evidence(frame(A), frame(A, protocol="consumer", assignor="uniform"), "state"),
     [(PROTOCOL, None)]),
    ("range to cooperative-sticky",
     Evidence(frame(A), frame(A, assignor="cooperative-sticky"), "state"), [(ASSIGNOR, None)]),
    ("a KIP-848 epoch moving alone",
     Evidence(frame(A, protocol="consumer", gen=4, target=4),
              frame(A, protocol="consumer", gen=5, target=5), "generation"), [(EPOCH, None)]),
    ("a classic generation moving alone says nothing",
     Evidence(frame(A, gen=4), frame(A, gen=5), "generation"), []),
    ("the supervisor's kill beside the expiry it caused",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, 3_900),),
              actions=(Action(3_800, "g", "b", "kill"),)),
     [(KILLED, "b"), (EXPIRED, "b")]),
    ("a crash with its exit code",
     Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, 3_900),),
              actions=(Action(3_800, "g", "b", "crash", exit_code=3, by="supervisor"),)),
     [(CRASHED, "b"), (EXPIRED, "b")]),
    ("a scale-up's start",
     Evidence(frame(A), frame(A, B), "state", joined=(B,),
              actions=(Action(100, "g", "b", "scale-up"),)),
     [(SCALED, "b"), (JOINED, "b")]),
]


@pytest.mark.parametrize("evidence,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_names_what_its_evidence_shows(evidence, expected):
    found = causes(evidence)
    assert [(c.kind, c.member) for c in found] == expected
    assert all(c.evidence for c in found)
    assert main_cause([c.kind for c in found]) == (expected[0][0] if expected else NOT_OBSERVED)


def test_an_expiry_says_how_long_the_member_was_dead_before_the_group_noticed():
    (c,) = causes(Evidence(frame(A, B), frame(A), "state",
                           departed=(gone(B, True, 3_900, noticed=10_000),)))
    assert c.dead_ms == 6_100 and "6.1 s" in c.evidence
    assert c.member_id == "id-b" and c.host == "/10.0.0.2"


def test_a_crash_keeps_its_exit_code():
    found = causes(Evidence(frame(A, B), frame(A), "state", departed=(gone(B, True, 9_900),),
                            actions=(Action(9_000, "g", "b", "crash", exit_code=137,
                                            by="supervisor"),)))
    assert found[0].exit_code == 137 and "exit code 137" in found[0].evidence
