"""The service as the overview watcher will use it: `load_alerts(path)` once, then
`service(overview)` per cycle from the watcher's thread, `close()` at exit."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from backend.alerts import AlertRulesError, AlertService, load_alerts
from backend.alerts.engine import AlertEngine
from backend.alerts.rules import parse_rules
from backend.alerts.sinks import LogSink, WebhookSink
from backend.cli_common import UserError
from backend.contracts.overview import Overview
from backend.netutil import wait_until
from tests.alerts.conftest import Receiver, overview, row


def rules_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "alerts.toml"
    path.write_text(f"""
[[rule]]
name = "payments behind"
kind = "lag_seconds"
groups = ["payments-*"]
above = 300
for = "30s"

[[sink]]
type = "log"

[[sink]]
type = "webhook"
url = "{url}"
""")
    return path


def test_a_flapping_lag_reaches_the_webhook_once_fired_and_once_resolved(
        tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    service = load_alerts(rules_file(tmp_path, receiver.url))
    try:
        assert [type(s) for s in service.sinks] == [LogSink, WebhookSink]
        assert service.describe() == (f"alerts: 1 rule(s) from {tmp_path / 'alerts.toml'}, "
                                      "to log, webhook sink #2 (127.0.0.1)")
        lag = [400, 400, 400, 400, 290, 310, 250, 320, 100, 100, 100, 100, 100]
        for i, seconds in enumerate(lag):
            service(overview(i * 10, row("payments-eu", max_lag_seconds=float(seconds)),
                             row("orders", max_lag_seconds=9999.0)))
        wait_until(lambda: len(receiver.requests) == 2, timeout=5, what="two posts")
    finally:
        service.close(5)
    assert [b["text"] for b in receiver.bodies] == [
        "FIRING payments behind: group payments-eu lags 400 s (above 300 s for 30s)",
        "RESOLVED payments behind: group payments-eu lags 100 s (at or below 240 s for 30s), "
        "after 1m20s",  # fired at 30 s (above since 0 s), resolved at 110 s (low from 80 s)
    ]
    assert all(b["blocks"][0]["type"] == "section" for b in receiver.bodies)
    logged = [r.getMessage() for r in caplog.records if r.name == "groupscope.alerts"]
    assert [m.split(":")[0] for m in logged] == ["alert FIRING payments behind",
                                                 "alert RESOLVED payments behind"]
    assert not any("s3cr3t" in m for m in logged)


def test_the_example_file_makes_a_service() -> None:
    example = Path(__file__).resolve().parents[2] / "assets" / "alerts.example.toml"
    service = load_alerts(example, {"GROUPSCOPE_ALERT_WEBHOOK": "https://hooks.example.com/x/y"})
    try:
        assert len(service.engine.rules) == 5
        assert [s.name for s in service.sinks] == ["log", "webhook sink #2 (hooks.example.com)"]
    finally:
        service.close(1)


def test_load_alerts_refuses_a_bad_file_with_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "alerts.toml"
    path.write_text('[[rule]]\nkind = "lag_seconds"\nabove = 300\nfor = "5 min"\n')
    with pytest.raises(UserError) as err:
        load_alerts(path)
    assert isinstance(err.value, AlertRulesError)
    assert str(err.value) == (f"{path}:4: [[rule]] #1 (lag_seconds): for: '5 min' is not a "
                              "duration like '30s', '5m', '1h' or '1h30m'")


class Broken:
    name = "broken sink"

    def __init__(self) -> None:
        self.calls = 0

    def send(self, transition: object) -> None:
        self.calls += 1
        raise RuntimeError("boom")

    def close(self, timeout: float = 5.0) -> None:
        pass


class Recording(Broken):
    name = "recording sink"

    def send(self, transition: object) -> None:
        self.calls += 1


def test_the_listener_never_raises_into_the_watcher(caplog: pytest.LogCaptureFixture) -> None:
    rules = parse_rules('[[rule]]\nkind = "lag_messages"\nabove = 0\nfor = "0s"\n')
    broken, recording = Broken(), Recording()
    service = AlertService(rules, sinks=[broken, recording])
    assert len(service(overview(0, row(lag_messages=5)))) == 1
    assert (broken.calls, recording.calls) == (1, 1)  # the next sink still got it

    class Exploding(AlertEngine):
        def observe(self, overview: Overview) -> list:
            raise KeyError("bug")

    service = AlertService(rules, sinks=[recording], engine=Exploding(rules.rules))
    assert service(overview(10, row(lag_messages=5))) == []
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert messages == ["alerts: broken sink failed (RuntimeError)",
                        "alerts: evaluating the overview failed (KeyError: 'bug')"]


def test_the_group_cap_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    rules = parse_rules('[[rule]]\nkind = "health"\n')
    service = AlertService(rules, sinks=[], engine=AlertEngine(rules.rules, max_groups=1))
    for t in (0, 10):
        service(overview(t, row("a"), row("b"), row("c")))
    assert [r.getMessage() for r in caplog.records] == [
        "alerts: 2 groups beyond the first 1 are not evaluated"]
