"""A rebalance storm on the real broker reaches a real webhook once fired and once resolved.

A member of a real group joins and leaves again and again (separate processes); the
overview watcher counts the rebalances (with a memory, as `watch` and the exporter keep it),
and the storm rule fires when more than its count fall within its window, then resolves
after a whole window without one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.alerts import load_alerts
from backend.history.recorder import HistoryRecorder
from backend.netutil import wait_until
from backend.observer.overview import OverviewWatcher
from tests.alerts.conftest import Receiver
from tests.observer.conftest import Members, SteadyProducer, create_topic

WINDOW_S = 20


def _settled(watcher: OverviewWatcher, group: str, members: int) -> bool:
    row = watcher.row(group)
    return (row is not None and row.members == members and row.state == "Stable"
            and not row.rebalancing)


@pytest.mark.idle  # most of it waits for a whole quiet window: the third lane
@pytest.mark.timeout(240)
def test_a_rebalance_storm_fires_once_and_resolves_once(kafka, unique, receiver: Receiver,
                                                       tmp_path: Path) -> None:
    topic, group = f"storm-{unique}", f"storm-{unique}"
    create_topic(kafka, topic, 4)
    rules = tmp_path / "alerts.toml"
    rules.write_text(f"""
[[rule]]
kind = "rebalances"
name = "storm"
groups = ["{group}"]
more_than = 2
within = "{WINDOW_S}s"

[[sink]]
type = "webhook"
url = "{receiver.url}"
""")
    alerts = load_alerts(rules)
    recorder = HistoryRecorder(tmp_path / "history.sqlite", "test").start()
    watcher = OverviewWatcher(kafka, interval=0.5, history=recorder, lag_seconds=False)
    watcher.add_listener(alerts)
    producer = SteadyProducer(kafka, topic, rate=20.0).start()
    members = Members(kafka, group, topic, "classic", "range")
    try:
        watcher.start()
        members.start("steady")
        wait_until(lambda: _settled(watcher, group, 1), 90, what="the steady member alone")
        for _ in range(2):  # a member that comes and goes: two rebalances a round
            members.start("churn")
            wait_until(lambda: _settled(watcher, group, 2), 60, what="churn joined")
            members.close("churn")
            wait_until(lambda: _settled(watcher, group, 1), 60, what="churn gone")
        fired = wait_until(lambda: [b["text"] for b in receiver.bodies], 30,
                           what="the storm alert")
        assert len(fired) == 1 and fired[0].startswith("FIRING storm: group " + group)
        # quiet for a whole window: resolved, once
        wait_until(lambda: len(receiver.bodies) >= 2, WINDOW_S + 30, what="the resolution")
        texts = [b["text"] for b in receiver.bodies]
        assert texts[1].startswith("RESOLVED storm: group " + group), texts
        row = watcher.row(group)
        assert row is not None and row.rebalances_24h >= 4 and row.last_cause in ("left",
                                                                                "joined")
        resolved_at = watcher.latest().taken_ms
        wait_until(lambda: watcher.latest().cycle.started_ms > resolved_at + 2000, 30,
                   what="a few more cycles")  # the storm is over: nothing more to post
    finally:
        members.stop_all()
        producer.stop()
        watcher.stop()
        recorder.close()
        alerts.close(5)
    assert len(receiver.bodies) == 2
