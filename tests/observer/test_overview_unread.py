"""The overview's record times carried over: a group none of whose inputs moved (its commits,
its partitions, their log ends and starts) keeps last cycle's answer and is not asked again;
any one of them moving, or an answer missing, asks again. Pure: the record reader is a fake
that answers what it is asked and counts it."""

from __future__ import annotations

import pytest

from backend.kafka.groups import GroupDescription, GroupMember
from backend.kafka.settings import KafkaSettings
from backend.observer.overview import OverviewWatcher
from backend.observer.overview_collect import GroupReading

T = "t"


class Times:
    """The record reader: the timestamp of offset `start` of a partition is 1000 + start;
    `missing` partitions are not answered (a budget that ran out)."""

    def __init__(self) -> None:
        self.asked: list[dict[str, dict]] = []
        self.missing: set[tuple[str, int]] = set()

    def __call__(self, wanted):
        self.asked.append(wanted)
        return {g: {tp: 1000 + start for tp, (start, _end) in spans.items()
                    if tp not in self.missing}
                for g, spans in wanted.items()}


@pytest.fixture
def watcher(monkeypatch) -> tuple[OverviewWatcher, Times]:
    w = OverviewWatcher(KafkaSettings(bootstrap="127.0.0.1:9"))
    times = Times()
    monkeypatch.setattr(w, "_read_times", times)
    yield w, times
    w.collector.reader.close()


def reading(group: str, committed: dict, owned: tuple = ()) -> GroupReading:
    members = (GroupMember("m-1", "a", "/h", owned),) if owned else ()
    state = "Stable" if owned else "Empty"
    return GroupReading(group, 0, GroupDescription(group, state, "classic", None, members),
                        dict(committed))


def cycle(w: OverviewWatcher, readings: list[GroupReading], ends: dict, starts=None):
    """One cycle's batch as `_cycle` folds it: the offsets noted, the times asked, the
    offsets kept for the next cycle."""
    starts = starts or {}
    w._moved = set()
    w._note_moved(ends, starts)
    partitions = {r.group: w._partitions_of(r) for r in readings}
    out = w._oldest_unread(readings, ends, starts, partitions)
    w._offsets_last = {tp: (e, starts.get(tp, 0)) for tp, e in ends.items()}
    return out


def asked_groups(times: Times) -> set[str]:
    return set(times.asked[-1]) if times.asked else set()


def test_a_group_whose_inputs_repeat_keeps_its_answer_and_is_not_asked_again(watcher):
    w, times = watcher
    ends = {(T, 0): 50, (T, 1): 80}
    rs = [reading("g", {(T, 0): 10, (T, 1): 80}), reading("h", {(T, 0): 20})]
    first = cycle(w, rs, ends)
    assert first == {"g": {(T, 0): 1010}, "h": {(T, 0): 1020}}
    assert len(times.asked) == 1
    again = cycle(w, [reading("g", {(T, 0): 10, (T, 1): 80}), reading("h", {(T, 0): 20})],
                  dict(ends))
    assert again == first and len(times.asked) == 1  # nothing asked


@pytest.mark.parametrize("change", ["commit", "end", "start", "owned", "answer missing"])
def test_any_input_moving_asks_that_group_again(watcher, change):
    w, times = watcher
    ends, starts = {(T, 0): 50, (T, 1): 80}, {(T, 0): 0, (T, 1): 0}
    if change == "answer missing":
        times.missing = {(T, 0)}
    cycle(w, [reading("g", {(T, 0): 10}), reading("still", {(T, 1): 30})], ends, starts)
    times.missing = set()
    g = reading("g", {(T, 0): 10})
    if change == "commit":
        g = reading("g", {(T, 0): 12})
    elif change == "end":
        ends = {**ends, (T, 0): 51}
    elif change == "start":
        starts = {**starts, (T, 0): 5}
    elif change == "owned":
        g = reading("g", {(T, 0): 10}, owned=((T, 0), (T, 1)))
    out = cycle(w, [g, reading("still", {(T, 1): 30})], ends, starts)
    assert asked_groups(times) == {"g"}  # the other group's inputs did not move
    assert out["still"] == {(T, 1): 1030}
    first = {"start": 1010, "commit": 1012}.get(change, 1010)
    assert out["g"][(T, 0)] == first


def test_a_caught_up_group_stays_unasked_until_records_arrive(watcher):
    w, times = watcher
    ends = {(T, 0): 50}
    assert cycle(w, [reading("g", {(T, 0): 50})], ends) == {}
    assert cycle(w, [reading("g", {(T, 0): 50})], dict(ends)) == {}
    assert times.asked == []  # nothing left to read: never a question
    assert cycle(w, [reading("g", {(T, 0): 50})], {(T, 0): 53}) == {"g": {(T, 0): 1050}}


def test_a_failed_read_forgets_what_the_groups_asked(watcher, monkeypatch):
    w, times = watcher
    ends = {(T, 0): 50}
    cycle(w, [reading("g", {(T, 0): 10})], ends)

    def refused(wanted):
        raise RuntimeError("not authorised to read")

    monkeypatch.setattr(w, "_read_times", refused)
    assert cycle(w, [reading("g", {(T, 0): 11})], dict(ends)) == {}
    monkeypatch.setattr(w, "_read_times", times)
    assert cycle(w, [reading("g", {(T, 0): 11})], dict(ends)) == {"g": {(T, 0): 1011}}


def test_a_groups_partitions_are_kept_while_its_commits_are_the_very_dict_and_its_members_repeat(
        watcher):
    w, _times = watcher
    committed = {(T, 0): 1, (T, 1): 2}
    empty = GroupDescription("g", "Empty", "classic", None, ())
    first = w._partitions_of(GroupReading("g", 0, empty, committed))
    assert first == {(T, 0), (T, 1)}
    assert w._partitions_of(GroupReading("g", 1, empty, committed)) is first
    # an equal dict that is not the same one, or a member owning more: taken again
    equal = w._partitions_of(GroupReading("g", 2, empty, dict(committed)))
    assert equal == first and equal is not first
    owning = w._partitions_of(reading("g", committed, owned=((T, 2),)))
    assert owning == {(T, 0), (T, 1), (T, 2)}
