"""The shared poller: errors replace values in place, recover by themselves, threads end."""

from __future__ import annotations

import threading

from backend.netutil import wait_until
from dashboard.pollers import Poller


def test_error_is_one_line_and_recovery_keeps_last_good_value():
    state = {"n": 0, "fail": False}
    lock = threading.Lock()

    def probe() -> int:
        with lock:
            state["n"] += 1
            if state["fail"]:
                raise RuntimeError("broker down\nsecond line never shown")
            return state["n"]

    poller = Poller("t", probe, interval_s=0.02)
    try:
        first = poller.latest(wait_s=5)
        assert first is not None and first.ok and first.value >= 1
        with lock:
            state["fail"] = True
        bad = wait_until(lambda: (r := poller.latest()) and not r.ok and r, 5, what="error")
        assert bad.error == "broker down"
        assert bad.value is None and bad.last_ok is not None and bad.last_ok >= first.value
        with lock:
            state["fail"] = False
        good = wait_until(lambda: (r := poller.latest()) and r.ok and r, 5, what="recovery")
        assert good.value > bad.last_ok
    finally:
        poller.stop()
    assert not poller.running


def test_unread_poller_stops_its_thread_and_restarts_on_read():
    calls = []
    poller = Poller("idle", lambda: calls.append(1) or len(calls), interval_s=0.01,
                    idle_stop_s=0.1)
    try:
        assert poller.latest(wait_s=5) is not None
        wait_until(lambda: not poller.running, 5, what="idle poller thread to end")
        count = len(calls)
        assert poller.latest() is not None and poller.running
        wait_until(lambda: len(calls) > count, 5, what="restarted poller to probe again")
    finally:
        poller.stop()
