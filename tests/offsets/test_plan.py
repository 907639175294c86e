"""The offsets plan with plain numbers: every target kind, clamping, the no-record rule, shifts
past either end, the replay and skip counts, topic narrowing and the one-line refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from backend.cli_common import UserError
from backend.offsets.plan import (
    Extent,
    Target,
    TopicSpec,
    change_lines,
    choose_target,
    differences,
    format_plan,
    merge_specs,
    moved,
    new_offset,
    parse_time,
    parse_topic_spec,
    plan_delete,
    plan_dict,
    plan_reset,
    select_partitions,
    summary,
)

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
T_MS = int(datetime(2026, 5, 1, 9, 30, tzinfo=UTC).timestamp() * 1000)
LOG = Extent(100, 200)  # offsets 100..199 exist


@pytest.mark.parametrize(("target", "current", "at_time", "new", "note"), [
    (Target("earliest"), 150, None, 100, ""),
    (Target("latest"), 150, None, 200, ""),
    (Target("offset", 120), 150, None, 120, ""),
    (Target("offset", 100), 150, None, 100, ""),  # the log start itself: no clamp
    (Target("offset", 200), 150, None, 200, ""),  # the log end itself: no clamp
    (Target("offset", 5), 150, None, 100, "5 is before the log start: clamped to 100"),
    (Target("offset", 900), 150, None, 200, "900 is past the log end: clamped to 200"),
    (Target("shift", -30), 150, None, 120, ""),
    (Target("shift", 30), 150, None, 180, ""),
    (Target("shift", -80), 150, None, 100,
     "150-80 = 70 is before the log start: clamped to 100"),
    (Target("shift", 80), 150, None, 200,
     "150+80 = 230 is past the log end: clamped to 200"),
    (Target("shift", -10), None, None, None,
     "no committed offset to shift from: left as it is"),
    (Target("datetime", T_MS), 150, 130, 130, ""),
    (Target("datetime", T_MS), 150, -1, 200,
     "no record at or after 2026-05-01T09:30:00Z: set to the log end 200"),
    (Target("datetime", T_MS), 150, None, 200,
     "no record at or after 2026-05-01T09:30:00Z: set to the log end 200"),
], ids=["earliest", "latest", "offset", "offset-at-start", "offset-at-end",
        "offset-below-start", "offset-past-end", "shift-back", "shift-forward",
        "shift-before-start", "shift-past-end", "shift-without-commit", "datetime-found",
        "datetime-none-after-t", "datetime-no-answer"])
def test_each_target_gives_its_offset_and_says_when_it_was_not_simply_found(
        target: Target, current: int | None, at_time: int | None, new: int | None,
        note: str) -> None:
    assert new_offset(target, current, LOG, at_time) == (new, note)


@pytest.mark.parametrize(("current", "new", "replays", "skips"), [
    (150, 120, 30, 0),
    (150, 180, 0, 30),
    (150, 150, 0, 0),
    (40, 100, 0, 0),  # committed below the log start: the records in between are gone
    (40, 150, 0, 50),  # ... only the surviving 100..149 are skipped
    (250, 150, 50, 0),  # committed past the end (topic recreated): only 150..199 replay
    (None, 150, 0, 0),  # nothing committed: neither, the consumer's reset policy decides
    (150, None, 0, 0),
], ids=["back", "forward", "same", "below-start-to-start", "below-start-forward",
        "past-end-back", "no-commit", "left-alone"])
def test_replays_and_skips_count_only_offsets_that_still_exist(
        current: int | None, new: int | None, replays: int, skips: int) -> None:
    assert moved(current, new, LOG) == (replays, skips)


def test_a_reset_plan_has_a_row_per_partition_and_totals() -> None:
    committed = {("orders", 0): 150, ("orders", 1): 190, ("audit", 0): 10}
    extents = {("orders", 0): LOG, ("orders", 1): LOG, ("audit", 0): Extent(0, 10)}
    plan = plan_reset("billing", Target("shift", -50), sorted(committed), committed, extents)

    assert [(r.topic, r.partition, r.current, r.new, r.replays, r.skips) for r in plan.rows] \
        == [("audit", 0, 10, 0, 10, 0), ("orders", 0, 150, 100, 50, 0),
            ("orders", 1, 190, 140, 50, 0)]
    assert plan.rows[0].note == "10-50 = -40 is before the log start: clamped to 0"
    totals = plan.totals
    assert (totals.partitions, totals.topics, totals.changes, totals.replays, totals.skips,
            totals.noted) == (3, 2, 3, 110, 0, 1)
    assert summary(plan) == ("3 partitions of 2 topics, 3 changing, 1 with a note: "
                             "replays 110 records, skips 0")
    assert summary(plan, done=True) == ("3 partitions of 2 topics, 3 changed, 1 with a note: "
                                        "replayed 110 records, skipped 0")


def test_a_partition_already_at_its_target_is_shown_but_not_changed() -> None:
    committed = {("orders", 0): 200, ("orders", 1): 150}
    plan = plan_reset("g", Target("latest"), sorted(committed), committed,
                      dict.fromkeys(committed, LOG))
    assert [r.changes for r in plan.rows] == [False, True]
    assert change_lines(plan) == ["reset group g orders-1: 150 → 200"]


def test_the_no_record_rule_is_written_in_the_row_and_the_preview() -> None:
    committed = {("orders", 0): 150, ("orders", 1): 150}
    plan = plan_reset("g", Target("datetime", T_MS, "2h30m ago"), sorted(committed),
                      committed, dict.fromkeys(committed, LOG),
                      at_time={("orders", 0): 170, ("orders", 1): -1})
    assert [(r.new, r.skips) for r in plan.rows] == [(170, 20), (200, 50)]
    text = format_plan(plan, "k:9092")
    assert "no record at or after 2026-05-01T09:30:00Z: set to the log end 200" in text
    assert "the first record at or after 2026-05-01T09:30:00Z (2h30m ago)" in text
    assert text.startswith("PREVIEW (nothing changed): reset the committed offsets of "
                           "group g on k:9092\n")


def test_a_commit_outside_the_log_is_pointed_out_before_it_moves() -> None:
    committed = {("orders", 0): 40, ("orders", 1): 250}
    plan = plan_reset("g", Target("earliest"), [*sorted(committed), ("orders", 2)],
                      committed, dict.fromkeys([*committed, ("orders", 2)], LOG))
    assert [r.note for r in plan.rows] == [
        "committed 40 is before the log start (records deleted)",
        "committed 250 is past the log end (topic recreated?)",
        "no committed offset yet"]
    assert [(r.replays, r.skips) for r in plan.rows] == [(0, 0), (100, 0), (0, 0)]


def test_a_delete_plan_names_both_outcomes_of_auto_offset_reset() -> None:
    committed = {("orders", 0): 150, ("orders", 1): 120}
    plan = plan_delete("g", [("orders", 0), ("orders", 1), ("orders", 2)], committed,
                       dict.fromkeys([*committed, ("orders", 2)], LOG))
    assert [(r.partition, r.new) for r in plan.rows] == [(0, None), (1, None)]  # 2: none
    assert plan.rows[0].note == ("then auto.offset.reset decides: earliest replays 50, "
                                 "latest skips 50")
    assert summary(plan) == "2 partitions of 1 topic: 2 committed offsets to delete"
    assert summary(plan, done=True) == "2 partitions of 1 topic: 2 committed offsets deleted"
    assert change_lines(plan)[0] == "delete group g orders-0: 150 → deleted"
    assert differences(plan, {}) == []
    assert differences(plan, {("orders", 1): 120}) == [
        "orders-1: expected no committed offset, the group has 120"]


def test_differences_name_every_partition_that_reads_back_otherwise() -> None:
    committed = {("orders", 0): 150, ("orders", 1): 150}
    plan = plan_reset("g", Target("offset", 120), sorted(committed), committed,
                      dict.fromkeys(committed, LOG))
    assert differences(plan, {("orders", 0): 120, ("orders", 1): 120}) == []
    assert differences(plan, {("orders", 0): 120, ("orders", 1): 150}) == [
        "orders-1: expected 120, the group has 150"]
    assert differences(plan, {("orders", 0): 120}) == [
        "orders-1: expected 120, the group has none"]


def test_the_json_form_carries_every_number_of_the_preview() -> None:
    committed = {("orders", 0): 150}
    plan = plan_reset("g", Target("offset", 900), [("orders", 0)], committed, {("orders", 0): LOG})
    data = plan_dict(plan, "k:9092")
    assert data["partitions"] == [{
        "topic": "orders", "partition": 0, "committed": 150, "new": 200, "log_start": 100,
        "log_end": 200, "replays": 0, "skips": 50, "changes": True,
        "note": "900 is past the log end: clamped to 200"}]
    assert data["totals"] == {"partitions": 1, "topics": 1, "changes": 1, "replays": 0,
                              "skips": 50, "noted": 1}
    assert (data["group"], data["cluster"], data["action"], data["target"]) == \
        ("g", "k:9092", "reset", "offset 900")


# ---- narrowing to topics and partitions ------------------------------------------------------

COMMITTED = {("orders", 0): 5, ("orders", 2): 5, ("audit", 0): 5}
COUNTS = {"orders": 3, "audit": 1, "other": 4}


@pytest.mark.parametrize(("specs", "every", "chosen"), [
    ([], True, [("audit", 0), ("orders", 0), ("orders", 2)]),
    ([TopicSpec("orders")], True, [("orders", 0), ("orders", 1), ("orders", 2)]),
    ([TopicSpec("orders")], False, [("orders", 0), ("orders", 2)]),
    ([TopicSpec("orders", (1, 2))], True, [("orders", 1), ("orders", 2)]),
    ([TopicSpec("orders", (0,)), TopicSpec("audit")], True, [("audit", 0), ("orders", 0)]),
], ids=["default-committed", "topic-every-partition", "topic-committed-only",
        "listed-partitions", "two-topics"])
def test_topics_narrow_the_partitions(specs: list[TopicSpec], every: bool,
                                      chosen: list[tuple[str, int]]) -> None:
    assert select_partitions("g", COMMITTED, specs, COUNTS, every) == chosen


@pytest.mark.parametrize(("spec", "message"), [
    (TopicSpec("missing"), "topic missing does not exist (or may not be described)"),
    (TopicSpec("other"), "group g has no committed offsets for topic other "
                         "(it has for audit, orders)"),
    (TopicSpec("orders", (1, 3, 7)), "topic orders has partitions 0-2, not 3, 7"),
], ids=["unknown-topic", "topic-not-read", "partition-out-of-range"])
def test_a_topic_that_cannot_be_meant_is_one_line(spec: TopicSpec, message: str) -> None:
    with pytest.raises(UserError) as err:
        select_partitions("g", COMMITTED, [spec], COUNTS)
    assert str(err.value) == message


@pytest.mark.parametrize(("text", "spec"), [
    ("orders", TopicSpec("orders")),
    ("orders:0,2,5", TopicSpec("orders", (0, 2, 5))),
    ("orders:5,0,5", TopicSpec("orders", (0, 5))),
    ("my.topic_v2-x:1", TopicSpec("my.topic_v2-x", (1,))),
])
def test_topic_options_parse(text: str, spec: TopicSpec) -> None:
    assert parse_topic_spec(text) == spec


@pytest.mark.parametrize("text", ["", "orders:", "orders:a", "orders:-1", "bad topic",
                                  "orders:1:2"])
def test_a_bad_topic_option_is_one_line(text: str) -> None:
    with pytest.raises(UserError, match="--topic"):
        parse_topic_spec(text)


def test_a_topic_named_whole_and_in_part_is_whole() -> None:
    assert merge_specs([TopicSpec("b", (1,)), TopicSpec("a", (2,)), TopicSpec("a", (0,)),
                        TopicSpec("b")]) == [TopicSpec("a", (0, 2)), TopicSpec("b")]


# ---- targets and times -----------------------------------------------------------------------

@pytest.mark.parametrize(("options", "target"), [
    (("earliest", None, None, None), Target("earliest")),
    (("latest", None, None, None), Target("latest")),
    ((None, None, 42, None), Target("offset", 42)),
    ((None, None, None, -10), Target("shift", -10)),
    ((None, "2026-05-01T09:30:00Z", None, None),
     Target("datetime", T_MS, "2026-05-01T09:30:00Z")),
])
def test_one_target_option_gives_its_target(options: tuple, target: Target) -> None:
    assert choose_target(*options, now=NOW) == target


@pytest.mark.parametrize(("options", "message"), [
    ((None, None, None, None), "(got none)"),
    (("earliest", None, 3, None), "(got --to and --to-offset)"),
    ((None, "10m ago", None, 5), "(got --to-datetime and --shift-by)"),
    (("sideways", None, None, None), "--to takes earliest or latest, not 'sideways'"),
    ((None, None, -1, None), "--to-offset must be 0 or more, got -1"),
])
def test_no_target_or_two_is_one_line(options: tuple, message: str) -> None:
    with pytest.raises(UserError) as err:
        choose_target(*options, now=NOW)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-05-01T09:30:00Z", datetime(2026, 5, 1, 9, 30, tzinfo=UTC)),
    ("2026-05-01T11:30:00+02:00", datetime(2026, 5, 1, 9, 30, tzinfo=UTC)),
    ("2026-05-01T09:30:00.250Z", datetime(2026, 5, 1, 9, 30, 0, 250000, tzinfo=UTC)),
    ("2026-05-01 09:30", datetime(2026, 5, 1, 9, 30).astimezone()),  # local time
    ("10m ago", NOW - timedelta(minutes=10)),
    ("2h ago", NOW - timedelta(hours=2)),
    ("90 s ago", NOW - timedelta(seconds=90)),
    ("1 day ago", NOW - timedelta(days=1)),
])
def test_times_are_read_as_iso_8601_or_relative(text: str, expected: datetime) -> None:
    assert parse_time(text, NOW) == int(expected.timestamp() * 1000)


@pytest.mark.parametrize(("text", "message"), [
    ("yesterday", "neither ISO 8601"),
    ("10 fortnights ago", "unknown unit 'fortnights'"),
    ("2026-13-01", "neither ISO 8601"),
])
def test_a_time_that_cannot_be_read_is_one_line(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_time(text, NOW)


def test_a_datetime_target_shows_the_instant_it_was_read_as() -> None:
    offset = timezone(timedelta(hours=2))
    when = int(datetime(2026, 5, 1, 11, 30, tzinfo=offset).timestamp() * 1000)
    assert Target("datetime", when, "2026-05-01T11:30:00+02:00").describe() == \
        "the first record at or after 2026-05-01T09:30:00Z (2026-05-01T11:30:00+02:00)"
    assert Target("datetime", T_MS, "2026-05-01T09:30:00Z").describe() == \
        "the first record at or after 2026-05-01T09:30:00Z"
