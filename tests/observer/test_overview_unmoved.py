"""The overview's fold shortcut: a group none of whose inputs moved takes its last partitions,
aged, and its row is the one folding every partition would have made.

Two models read the same cycles: one told which partitions moved (as the watcher tells it),
one not (every partition folded). Their rows must be equal every cycle, through commits,
log ends, members and record times changing, and the shortcut must actually be taken.
"""

from __future__ import annotations

from collections.abc import Mapping

from backend.kafka.groups import TP, GroupDescription, GroupMember
from backend.observer.overview_collect import GroupReading, Listed
from backend.observer.overview_model import OverviewModel

GROUPS = ("lagging", "owned", "caught-up", "share")
START_MS = 1_700_000_000_000
STEP_MS = 10_000
WRITTEN_MS = START_MS - 60_000  # when the records still unread were written


def _desc(group: str, owners: Mapping[TP, str] | None = None) -> GroupDescription:
    if not owners:
        return GroupDescription(group, "Empty", "classic", None, ())
    members = tuple(GroupMember(f"{c}-id", c, "/10.0.0.1",
                                tuple(sorted(tp for tp, o in owners.items() if o == c)))
                    for c in sorted(set(owners.values())))
    return GroupDescription(group, "Stable", "classic", "range", members)


class Cluster:
    """What the watcher would hand the model each cycle, changed by the test between cycles."""

    def __init__(self) -> None:
        # each group reads a topic of its own, so a change touches the group it is made to
        self.ends = {(f"{g}-in", p): 20 for g in GROUPS for p in range(3)}
        at = {"lagging": 5, "owned": 10, "caught-up": 20, "share": 8}
        self.committed = {g: {(f"{g}-in", p): at[g] for p in range(3)} for g in GROUPS}
        self.owners: dict[str, dict[TP, str]] = {
            "owned": {("owned-in", 0): "a", ("owned-in", 1): "a", ("owned-in", 2): "b"}}
        # the very mapping handed over while not asked again, as the watcher does
        self.times: dict[str, dict[TP, int | None] | None] = {
            g: {(f"{g}-in", p): WRITTEN_MS + p for p in range(3)} for g in GROUPS}
        self.times["caught-up"] = None
        self.moved: set[TP] = set()

    def readings(self, now: int) -> list[GroupReading]:
        return [GroupReading(g, now, _desc(g, self.owners.get(g)), dict(c),
                             reported_lag={tp: 3 for tp in c} if g == "share" else {})
                for g, c in self.committed.items()]


def _cycles(cluster: Cluster, changes: dict[int, callable], n: int = 16
            ) -> tuple[list[dict[str, object]], int]:
    told, untold = OverviewModel("c"), OverviewModel("c")
    folded = {"calls": 0}
    fold = told._fold

    def counting(*args, **kwargs):
        folded["calls"] += 1
        return fold(*args, **kwargs)

    told._fold = counting  # type: ignore[method-assign]
    listed = [Listed(g, "Empty", "classic") for g in cluster.committed]
    for model in (told, untold):
        model.listed(listed)
    history = []
    for i in range(n):
        cluster.moved = set()
        if i in changes:
            changes[i](cluster)
        now = START_MS + i * STEP_MS
        starts = dict.fromkeys(cluster.ends, 0)
        rows = {}
        for r in cluster.readings(now):
            a = told.update(r, cluster.ends, starts, own=False,
                            oldest_unread_ms=cluster.times[r.group], moved=cluster.moved)
            b = untold.update(r, cluster.ends, starts, own=False,
                              oldest_unread_ms=cluster.times[r.group])
            assert a == b, f"cycle {i}, group {r.group}:\n{a}\n{b}"
            rows[r.group] = a
        history.append(rows)
    return history, folded["calls"]


def test_a_quiet_cluster_is_folded_only_where_a_verdict_can_change_then_taken_whole() -> None:
    history, folds = _cycles(Cluster(), {})
    # folded at their first reading alone, and the share group (its lag is the broker's)
    # always; every other cycle, while the windows fill too, taken whole, the lagging ones
    # judged again at the third without a fold, when their windows first hold enough points
    assert folds == 3 + 16
    assert history[2]["lagging"].health == "STOP"
    assert history[1]["lagging"].health == "OK"  # two points: too little evidence
    caught, lagging = history[-1]["caught-up"], history[-1]["lagging"]
    assert caught.partitions is history[-2]["caught-up"].partitions
    # older by a step, yet the same partitions: their ages are kept as times
    assert lagging.partitions is history[-2]["lagging"].partitions
    assert lagging.described_ms > history[-2]["lagging"].described_ms
    assert [p.lag_seconds(lagging.described_ms) for p in lagging.partitions] == [
        (START_MS + 15 * STEP_MS - WRITTEN_MS - p) / 1000 for p in range(3)]
    assert lagging.health == "STOP" and history[-1]["owned"].health == "STALL"


def test_every_input_that_moves_is_folded_again() -> None:
    def end_moves(c: Cluster) -> None:
        c.ends[("lagging-in", 1)] = 21
        c.moved.add(("lagging-in", 1))

    def commit_moves(c: Cluster) -> None:
        c.committed["owned"][("owned-in", 0)] = 11
        c.times["owned"] = {**c.times["owned"], ("owned-in", 0): WRITTEN_MS + 11}

    def member_moves(c: Cluster) -> None:
        c.owners["owned"] = {("owned-in", 0): "a", ("owned-in", 1): "b", ("owned-in", 2): "b"}

    def times_asked_again(c: Cluster) -> None:  # the same answer in a new mapping
        c.times["caught-up"] = {}

    def start_moves(c: Cluster) -> None:
        c.moved.add(("caught-up-in", 2))  # its log start moved (retention): `moved` says so

    changes = {12: end_moves, 13: commit_moves, 14: member_moves, 15: times_asked_again,
               16: start_moves}
    history, folds = _cycles(Cluster(), changes, n=18)
    assert history[12]["lagging"].partitions[1].end == 21
    assert history[13]["owned"].partitions[0].committed == 11
    assert history[14]["owned"].partitions[1].owner == "b"
    # every change folded the group it touched again, the untouched ones stayed whole:
    # lagging from 12 on, owned from 13 on, caught-up at 15 and 16, share always
    assert folds == 3 + 6 + 5 + 2 + 18
    assert history[17]["caught-up"].partitions is history[16]["caught-up"].partitions


def test_inputs_that_move_while_the_windows_fill_are_folded_as_every_partition_would_be(
        ) -> None:
    """The windows still filling: a group whose inputs repeat is taken whole in constant time
    (its windows take the repeated point lazily), and one that moves is folded with every
    point it was given, so the verdicts later on are those of the whole window."""
    def commit_moves(c: Cluster) -> None:
        c.committed["lagging"][("lagging-in", 0)] = 6
        c.times["lagging"] = {**c.times["lagging"], ("lagging-in", 0): WRITTEN_MS + 6}

    def end_moves(c: Cluster) -> None:
        c.ends[("owned-in", 2)] = 21
        c.moved.add(("owned-in", 2))

    def caught_up_falls_behind(c: Cluster) -> None:
        c.ends[("caught-up-in", 1)] = 25
        c.moved.add(("caught-up-in", 1))
        c.times["caught-up"] = {("caught-up-in", 1): WRITTEN_MS + 20}

    history, folds = _cycles(Cluster(), {4: commit_moves, 5: end_moves,
                                         6: caught_up_falls_behind}, n=24)

    def health(cycle: int, group: str, partition: int) -> str:
        return history[cycle][group].partitions[partition].health

    # the moved commit keeps partition 0 OK (its offset moved, its lag shrank) until the
    # window's points from before it slide out, ten polls on
    assert [health(i, "lagging", 0) for i in (3, 4, 12, 13)] == ["STOP", "OK", "OK", "STOP"]
    # the caught-up partition that fell behind is judged once its caught-up points are gone
    assert [health(i, "caught-up", 1) for i in (6, 14, 15)] == ["OK", "OK", "STOP"]
    assert health(23, "owned", 2) == "STALL"
    # folded: each at its first reading; each moved group from its change until its moved
    # window is one repeated point over ten polls, and once more to see its windows
    # settled; the share group always
    assert folds == (1 + 11) + (1 + 11) + (1 + 11) + 24
    assert history[23]["caught-up"].partitions is history[22]["caught-up"].partitions
