"""The replay's pure parts: its request, the preview built from a plan (per partition and,
by the murmur2 map, per car), the event feed's line and `ctl replay`'s table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from backend.contracts import Event, EventType
from backend.contracts.control import ReplayRequest
from backend.kafka.partitioner import partition_for
from backend.offsets.plan import Extent, Target, plan_reset
from backend.supervisor.cli import render_replay
from backend.supervisor.replay import ReplayRefused, preview_of, target_of
from dashboard.live_model import feed_items


def test_a_replay_request_needs_the_value_its_target_takes() -> None:
    assert ReplayRequest(to="earliest").by == "ctl"
    with pytest.raises(ValidationError, match="to datetime needs `at`"):
        ReplayRequest(to="datetime")
    with pytest.raises(ValidationError, match="to shift needs `offset`"):
        ReplayRequest(to="shift")
    with pytest.raises(ValidationError):
        ReplayRequest(to="yesterday")
    with pytest.raises(ValidationError):
        ReplayRequest(to="earliest", partitions=[-1])


def test_a_targets_time_is_read_by_the_offsets_commands_rules() -> None:
    now = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    assert target_of(ReplayRequest(to="datetime", at="10m ago"), now).value == int(
        datetime(2026, 11, 27, 9, 50, tzinfo=UTC).timestamp() * 1000)
    assert target_of(ReplayRequest(to="shift", offset=-50), now) == Target("shift", -50)
    with pytest.raises(ReplayRefused, match="the time 'soon' is neither ISO 8601"):
        target_of(ReplayRequest(to="datetime", at="soon"), now)
    with pytest.raises(ReplayRefused, match="must be 0 or more"):
        target_of(ReplayRequest(to="offset", offset=-1), now)


def test_the_preview_lists_partitions_and_each_car_on_its_murmur2_partition() -> None:
    tps = [("telemetry", 0), ("telemetry", 1)]
    plan = plan_reset("g", Target("earliest"), tps, {tps[0]: 120, tps[1]: 40},
                      {tps[0]: Extent(0, 150), tps[1]: Extent(10, 60)})
    cars = {"car-01": (70, 0), "car-02": (50, 0), "car-03": (30, 0)}
    p = preview_of(plan, "telemetry", "Stable", Target("earliest"), 2, cars, True)
    assert [(m.partition, m.committed, m.new, m.replays) for m in p.partitions] == [
        (0, 120, 0, 120), (1, 40, 10, 30)]
    assert (p.replays, p.skips, p.target, p.pinned_at) == (150, 0, "earliest", None)
    assert [(c.car, c.partition, c.replays) for c in p.cars] == [
        (car, partition_for(car, 2), n) for car, (n, _) in sorted(cars.items())]
    when = Target("datetime", 1_780_000_000_000, "2m ago")
    assert preview_of(plan, "t", "Empty", when, 2, {}, False).pinned_at == \
        "2026-05-28T20:26:40Z"
    text = render_replay(p)
    assert text.startswith("PREVIEW (nothing changed): group g on telemetry to earliest")
    assert "car-02" in text and "replays 150 records, skips 0; the group is Stable" in text


def test_the_feed_says_who_moved_the_offsets_where() -> None:
    ev = Event(5_000, "g", "supervisor", EventType.OFFSETS_RESET,
               {"by": "the presenter", "target": "earliest", "replays": 1250, "skips": 0,
                "moves": [[0, 1200, 0], [1, 980, 930]]})
    (item,) = feed_items([ev])
    assert item.kind == "reset" and item.replica == "the presenter"
    assert item.text == ("the presenter moved the group's offsets to earliest: P0 1200 → 0, "
                         "P1 980 → 930; 1,250 records to read again, 0 skipped")
