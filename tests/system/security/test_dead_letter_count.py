"""The Live page's group header shows how many malformed records the replicas set aside."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from backend.contracts import Event
from dashboard import live_model as lm
from tests.dashboard.test_live_model import snap


def _beat(ts: int, replica: str, **fields: object) -> Event:
    return Event(ts, "g", replica, "heartbeat", dict(fields))


def test_total_sums_each_replicas_latest_heartbeat():
    events = (_beat(1, "ada", dead_letters=3), _beat(2, "bruno", dead_letters=4),
              _beat(3, "ada", dead_letters=5),  # newer beat of ada replaces the older
              _beat(4, "chloe"),  # an older replica without the field
              _beat(5, "dora", dead_letters="7"),  # not a count: ignored, never a crash
              Event(6, "g", "ada", "dead_letter", {"count": 2, "total": 5}))
    assert lm.dead_letter_total(snap(10, {0: "ada", 1: "bruno"}, events=events)) == 9
    assert lm.dead_letter_total(snap(10, {0: "ada"})) == 0


def _header_app() -> None:
    from backend.contracts import Event
    from dashboard.views.live import draw_header
    from tests.dashboard.test_live_model import snap

    beats = (Event(1, "g", "ada", "heartbeat", {"dead_letters": 1234}),
             Event(2, "g", "bruno", "heartbeat", {"dead_letters": 11}))
    draw_header(snap(10, {0: "ada", 1: "bruno"}, events=beats))


def test_live_header_shows_the_dead_letter_metric():
    at = AppTest.from_function(_header_app, default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["dead letters"] == "1,245", metrics
