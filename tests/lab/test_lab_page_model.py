"""The Lab page's pure parts: lanes from the changelogs' latest batches, what each row draws,
the scoreboard's rows, and the requests the page sends."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.contracts.control import LabGroup, LabLane, LabStartRequest, LabState
from backend.contracts.lab import LAB_EVENTS, LAB_PROTOCOLS, Score
from backend.lab.session import lanes
from backend.lab.tail import share_write
from dashboard.lab_model import (
    EVENT_BUTTONS,
    card_markdown,
    headline,
    lanes_html,
    machine_line,
    replicas_line,
    score_rows,
    stopwatch_html,
)


def _score(lab: str, stalled: int = 2, recovered: float | None = 7.5) -> Score:
    return Score(lab=lab, partitions=6, cadence_s=0.5, stopped=stalled, stalled=stalled,
                 stalled_s=9.0, longest_s=6.0, recovered_s=recovered, moved=2, twice=0)


def test_a_lane_is_idle_past_the_stall_limit_or_when_its_replica_is_gone() -> None:
    now = 100_000
    latest = {0: now - 500, 1: now - 5_000, 2: now - 300}
    owner = {0: "ada", 1: "ada", 2: "bruno"}
    got = lanes(4, latest, owner, live={"ada"}, silence_ms=2_000, now_ms=now)
    assert [(lane.partition, lane.owner, lane.idle) for lane in got] == [
        (0, "ada", False),  # processing
        (1, "ada", True),  # silent past the limit
        (2, "bruno", True),  # bruno is no longer running
        (3, None, True),  # never processed
    ]


def test_a_row_names_every_owner_and_marks_idle_cells() -> None:
    group = LabGroup(lab="eager", group="g", replicas=("ada",), lanes=(
        LabLane(partition=0, owner="ada", idle=False),
        LabLane(partition=1, owner="bruno", idle=True)))
    html = lanes_html(group)
    assert html.count('data-testid="gs-lab-cell"') == 2
    assert ">ada<" in html and "P0<" in html
    assert "P1 · idle" in html and html.count("data-idle") == 1
    assert 'data-lab="eager"' in html


def test_the_stopwatch_runs_while_measuring_and_stops_once_the_group_is_over() -> None:
    running = LabGroup(lab="eager", group="g", replicas=(), lanes=(), stopwatch_s=3.24)
    assert "data-running" in stopwatch_html(running, "measuring")
    assert "3.2 s" in stopwatch_html(running, "measuring")
    over = running.model_copy(update={"over": True})
    assert "data-running" not in stopwatch_html(over, "measuring")
    untouched = LabGroup(lab="eager", group="g", replicas=(), lanes=(), score=_score("eager", 0))
    assert "0.0 s" in stopwatch_html(untouched, "ready")


def test_the_scoreboard_has_a_row_per_measured_group_and_says_never_back() -> None:
    state = LabState(name="lab", topic="t", phase="ready", partitions=6, rate=200.0,
                     event="kill", window_s=20.0, busy_cores=1.2, cores=2, groups=(
                         LabGroup(lab="eager", group="g1", replicas=("ada", "bruno"),
                                  lanes=(), score=_score("eager", 6)),
                         LabGroup(lab="consumer", group="g2", replicas=("ada",), lanes=(),
                                  score=_score("consumer", 2, None)),
                         LabGroup(lab="static", group="g3", replicas=(), lanes=())))
    rows = score_rows(state)
    assert [r["protocol"] for r in rows] == [LAB_PROTOCOLS["eager"].title,
                                            LAB_PROTOCOLS["consumer"].title]
    assert rows[0]["partitions stalled"] == "6 of 6"
    assert rows[1]["every partition back after (s)"] == "not yet"
    assert "1.2 of 2 cores" in machine_line(state) and "3 replicas" in machine_line(state)
    assert "measured over 20 s" in headline(state)
    assert "never within" in card_markdown("consumer", _score("consumer", 2, None))
    assert LAB_PROTOCOLS["static"].choose in card_markdown("static", None)


def test_every_event_has_a_button() -> None:
    assert set(EVENT_BUTTONS) == set(LAB_EVENTS)


@pytest.mark.parametrize("body", [
    {},  # the groups are always named: an empty body starts nothing
    {"protocols": []},
    {"protocols": ["eager", "eager"]},
    {"protocols": ["eager", "cooperative", "consumer", "static", "eager"]},
    {"protocols": ["range"]},
    {"protocols": ["eager"], "replicas": 0},
    {"protocols": ["eager"], "replicas": "2"},
    {"protocols": ["eager"], "partitions": 10_000},
])
def test_a_lab_request_the_page_could_not_send_is_refused(body: dict) -> None:
    with pytest.raises(ValidationError):
        LabStartRequest.model_validate(body)


def test_a_share_delta_is_a_batch_of_its_records_partition_and_redeliveries_add_up() -> None:
    seen: dict[str, int] = {}
    first = share_write({"stream_id": "car-01", "partition": 3, "replica": "ada",
                         "taken_ms": 1_000, "deliveries": {"1": 40}}, seen)
    again = share_write({"stream_id": "car-01", "partition": 3, "replica": "bruno",
                         "taken_ms": 2_000, "deliveries": {"1": 10, "2": 4, "3": 1}}, seen)
    assert (first.partition, first.replica, first.t_ms, first.duplicates) == (3, "ada", 1_000, 0)
    assert (again.replica, again.duplicates) == ("bruno", 5)
    with pytest.raises(KeyError):
        share_write({"stream_id": "car-01"}, seen)


def test_a_group_names_its_replicas_in_a_line() -> None:
    one = LabGroup(lab="eager", group="g", replicas=("bruno",), lanes=())
    assert replicas_line(one) == "1 replica: bruno"
    assert replicas_line(one.model_copy(update={"replicas": ()})) == "0 replicas: none"
