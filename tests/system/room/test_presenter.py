"""Presenter or viewer: the peer address → role rules, the passcode lock-out, and the controls
as a session with no known peer (a viewer) gets them, rendered by Streamlit's AppTest."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from backend.contracts.room import PASSCODE_LOCKOUT_S, PASSCODE_TRIES
from backend.netutil import free_port
from dashboard import presenter
from dashboard.presenter import (
    UNKNOWN,
    PasscodeGuard,
    Role,
    UnlockedSessions,
    Verdict,
    forwarding_trusts_only_loopback,
    lockout_key,
    parse_peer,
    passcode_matches,
    peer_role,
)
from tests.dashboard.conftest import APP
from tests.system.room.conftest import PASSCODE, write_room

SECRET = "s3cret-passcode"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The presenter log's records (it does not propagate to the root logger)."""
    presenter.log.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.INFO)
    try:
        yield caplog
    finally:
        presenter.log.removeHandler(caplog.handler)


# ---- peer → role ---------------------------------------------------------------------------

@pytest.mark.parametrize("peer", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_a_loopback_peer_is_the_presenter(peer: str) -> None:
    assert peer_role(peer) is Role.PRESENTER


@pytest.mark.parametrize("peer", ["10.213.0.2", "192.168.1.20", "fd00::7", "::ffff:10.0.0.9",
                                  "fe80::1%eth0", "8.8.8.8"])
def test_any_other_peer_is_a_viewer(peer: str) -> None:
    assert peer_role(peer) is Role.VIEWER


@pytest.mark.parametrize("peer", [None, "", "localhost", "not an address", 2130706433,
                                  object()])
def test_an_unknown_peer_is_a_viewer(peer: object) -> None:
    assert peer_role(peer, own_addresses={"127.0.0.1", "10.0.0.1"}) is Role.VIEWER


def test_a_browser_on_this_machine_using_its_room_address_is_the_presenter() -> None:
    own = {"192.0.2.2", "fd00::2", "fe80::fc:ff:fe00:1%eth0", "127.0.0.1"}
    assert peer_role("192.0.2.2", own) is Role.PRESENTER
    assert peer_role("::ffff:192.0.2.2", own) is Role.PRESENTER  # a dual-stack listener
    assert peer_role("fe80::fc:ff:fe00:1", own) is Role.PRESENTER
    assert peer_role("192.0.2.3", own) is Role.VIEWER
    assert peer_role("0.0.0.0", {"0.0.0.0"}) is Role.VIEWER


def test_own_addresses_are_this_machines_interfaces() -> None:
    found = presenter.own_addresses()
    assert "127.0.0.1" in found
    assert all(parse_peer(a) is not None for a in found)


@pytest.mark.parametrize(("allowed", "trusted"), [
    (None, True), ("127.0.0.1", True), ("127.0.0.1,::1", True), (" ::1 , 127.0.0.1 ", True),
    ("*", False), ("10.0.0.0/8", False), ("127.0.0.1,192.168.1.1", False),
    ("unix:/run/proxy.sock", False)])
def test_forwarded_headers_may_come_only_from_loopback(allowed: str | None,
                                                       trusted: bool) -> None:
    assert forwarding_trusts_only_loopback(allowed) is trusted


def test_when_any_host_may_forward_a_header_nobody_is_presenter_by_address() -> None:
    # uvicorn would take the peer from X-Forwarded-For: a LAN browser could claim loopback
    assert peer_role("127.0.0.1", forwarded_allow_ips="*") is Role.VIEWER
    assert peer_role("127.0.0.1", forwarded_allow_ips="127.0.0.1,::1") is Role.PRESENTER


def test_parse_peer_unwraps_ipv4_mapped_and_drops_zones() -> None:
    assert str(parse_peer("::ffff:10.1.2.3")) == "10.1.2.3"
    assert str(parse_peer("fe80::1%veth0")) == "fe80::1"
    assert parse_peer("10.1.2.300") is None


def test_lockout_keys_group_ipv6_by_64_and_unknown_peers_together() -> None:
    assert lockout_key("10.1.2.3") == "10.1.2.3"
    assert lockout_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert lockout_key("2001:db8:1:2::aaaa") == lockout_key("2001:db8:1:2:ffff::1") \
        == "2001:db8:1:2::/64"
    assert lockout_key("2001:db8:1:3::1") != lockout_key("2001:db8:1:2::1")
    assert lockout_key(None) == lockout_key("garbage") == UNKNOWN


def test_passcodes_compare_exactly() -> None:
    assert passcode_matches(SECRET, SECRET)
    assert not passcode_matches(SECRET[:-1], SECRET)
    assert not passcode_matches(SECRET + " ", SECRET)
    assert not passcode_matches("", SECRET)
    assert passcode_matches("pässcode-✓", "pässcode-✓")  # not only ASCII


# ---- the lock-out --------------------------------------------------------------------------

def test_wrong_tries_lock_the_address_out_even_for_the_right_passcode(logged) -> None:
    clock = Clock()
    guard = PasscodeGuard(tries=5, lockout_s=300.0, clock=clock)
    outcomes = [guard.attempt("10.0.0.9", f"guess-{i}", SECRET) for i in range(5)]
    assert [o.verdict for o in outcomes] == [Verdict.WRONG] * 4 + [Verdict.LOCKED]
    assert [o.tries_left for o in outcomes] == [4, 3, 2, 1, 0]
    assert outcomes[-1].locked_for_s == 300.0
    clock.now += 299.0
    refused = guard.attempt("10.0.0.9", SECRET, SECRET)
    assert refused.verdict is Verdict.LOCKED and refused.locked_for_s == pytest.approx(1.0)
    assert guard.locked_for("10.0.0.9") == pytest.approx(1.0)  # a refusal does not extend it
    assert guard.attempt("10.0.0.10", SECRET, SECRET).verdict is Verdict.ACCEPTED  # per address
    clock.now += 1.0
    assert guard.locked_for("10.0.0.9") == 0.0
    assert guard.attempt("10.0.0.9", SECRET, SECRET).verdict is Verdict.ACCEPTED
    # each wrong try, the lock-out and the refusal are in the log; the passcodes never are
    text = "\n".join(r.getMessage() for r in logged.records)
    assert text.count("wrong presenter passcode from 10.0.0.9") == 5
    assert text.count("presenter passcode locked for 10.0.0.9") == 1
    assert "refused from 10.0.0.9: locked out" in text
    assert SECRET not in text and "guess-" not in text


def test_after_a_lock_out_the_address_gets_its_tries_again() -> None:
    clock = Clock()
    guard = PasscodeGuard(tries=3, lockout_s=60.0, clock=clock)
    for _ in range(3):
        guard.attempt("a", "wrong", SECRET)
    clock.now += 60.0
    assert guard.attempt("a", "wrong", SECRET) == presenter.Attempt(Verdict.WRONG, 2, 0.0)


def test_the_right_passcode_clears_earlier_wrong_tries() -> None:
    guard = PasscodeGuard(tries=3, lockout_s=60.0, clock=Clock())
    guard.attempt("a", "wrong", SECRET)
    guard.attempt("a", "wrong", SECRET)
    assert guard.attempt("a", SECRET, SECRET).verdict is Verdict.ACCEPTED
    assert guard.attempt("a", "wrong", SECRET).tries_left == 2


def test_wrong_tries_older_than_the_window_are_forgotten() -> None:
    clock = Clock()
    guard = PasscodeGuard(tries=3, lockout_s=60.0, clock=clock)
    guard.attempt("a", "wrong", SECRET)
    guard.attempt("a", "wrong", SECRET)
    clock.now += 61.0
    assert guard.attempt("a", "wrong", SECRET).tries_left == 2


def test_concurrent_wrong_tries_cannot_squeeze_past_the_limit() -> None:
    guard = PasscodeGuard(tries=PASSCODE_TRIES, lockout_s=60.0)
    start = threading.Barrier(32)
    verdicts: list[Verdict] = []
    lock = threading.Lock()

    def one() -> None:
        start.wait()
        outcome = guard.attempt("10.0.0.9", "wrong", SECRET)
        with lock:
            verdicts.append(outcome.verdict)

    threads = [threading.Thread(target=one) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert verdicts.count(Verdict.WRONG) == PASSCODE_TRIES - 1
    assert verdicts.count(Verdict.LOCKED) == 32 - (PASSCODE_TRIES - 1)


def test_the_table_stays_bounded_without_forgetting_a_live_lock_out() -> None:
    clock = Clock()
    guard = PasscodeGuard(tries=2, lockout_s=60.0, clock=clock, max_records=4)
    guard.attempt("locked", "wrong", SECRET)
    guard.attempt("locked", "wrong", SECRET)
    for i in range(20):  # one wrong try each: the oldest make room for the newest
        clock.now += 0.1
        guard.attempt(f"10.0.0.{i}", "wrong", SECRET)
    assert len(guard._records) <= 4
    assert guard.locked_for("locked") > 0
    assert guard.attempt("10.0.0.19", "wrong", SECRET).verdict is Verdict.LOCKED  # remembered


def test_unlocked_sessions_belong_to_the_address_that_unlocked_them() -> None:
    sessions = UnlockedSessions()
    sessions.add("s1", "10.0.0.9")
    assert sessions.holds("s1", "10.0.0.9")
    assert not sessions.holds("s1", "10.0.0.10")
    assert not sessions.holds("s2", "10.0.0.9")


def test_the_lock_out_window_can_be_shortened_but_not_to_nothing(monkeypatch) -> None:
    monkeypatch.delenv(presenter.ENV_LOCKOUT_S, raising=False)
    assert presenter.lockout_s_from_env() == PASSCODE_LOCKOUT_S
    monkeypatch.setenv(presenter.ENV_LOCKOUT_S, "12")
    assert presenter.lockout_s_from_env() == 12.0
    monkeypatch.setenv(presenter.ENV_LOCKOUT_S, "0")
    assert presenter.lockout_s_from_env() == 1.0
    monkeypatch.setenv(presenter.ENV_LOCKOUT_S, "soon")
    assert presenter.lockout_s_from_env() == PASSCODE_LOCKOUT_S


def test_lock_outs_survive_a_cleared_streamlit_cache() -> None:
    # any browser can send Streamlit's "clear cache": it must not reset a lock-out
    key = "lockout-survives-clear-cache"
    for _ in range(PASSCODE_TRIES):
        presenter._GUARD.attempt(key, "wrong", SECRET)
    st.cache_resource.clear()
    assert presenter._GUARD.locked_for(key) > 0


# ---- the controls, for a session whose peer nobody knows -----------------------------------

def _sidebar_controls() -> None:
    import streamlit as st

    from dashboard.context import env_context
    from dashboard.controls import render_controls

    with st.sidebar:
        render_controls(env_context())


@pytest.fixture
def fresh_state(monkeypatch, tmp_path: Path) -> Path:
    """An empty data dir, no supervisor, and a fresh lock-out table and unlocked set."""
    for key in ("GROUPSCOPE_READONLY", "FORWARDED_ALLOW_IPS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    monkeypatch.setattr(presenter, "_GUARD", PasscodeGuard(tries=PASSCODE_TRIES, lockout_s=60))
    monkeypatch.setattr(presenter, "_UNLOCKED", UnlockedSessions())
    return tmp_path


def _ctl_widgets(at: AppTest) -> list[str]:
    keys = [w.key for kind in ("button", "selectbox", "number_input", "toggle")
            for w in getattr(at.sidebar, kind)]
    return [k for k in keys if (k or "").startswith("ctl_")]


def test_without_a_room_a_viewer_gets_no_controls_and_no_passcode_box(fresh_state) -> None:
    at = AppTest.from_function(_sidebar_controls, default_timeout=30).run()
    assert not at.exception, at.exception
    assert _ctl_widgets(at) == []
    assert not at.sidebar.text_input
    assert any("presenter has the controls" in c.value for c in at.sidebar.caption)


def test_in_a_room_the_right_passcode_unlocks_the_controls(fresh_state) -> None:
    write_room(fresh_state, "192.0.2.2")
    at = AppTest.from_function(_sidebar_controls, default_timeout=30).run()
    assert not at.exception, at.exception
    assert _ctl_widgets(at) == []
    box = at.sidebar.text_input(key="gs_passcode")
    assert box.label == "Presenter passcode"
    box.input("not-it")
    at.sidebar.button(key="gs_unlock").click().run()
    assert _ctl_widgets(at) == []
    assert any("Wrong passcode: 4 more tries" in w.value for w in at.sidebar.warning)
    at.sidebar.text_input(key="gs_passcode").input(PASSCODE)
    at.sidebar.button(key="gs_unlock").click().run()
    assert not at.exception, at.exception
    assert "ctl_start" in _ctl_widgets(at) and "ctl_kill" in _ctl_widgets(at)
    assert PASSCODE not in str(at._tree)  # the passcode box is cleared, nothing shows it


def test_locked_out_the_right_passcode_is_refused_and_the_page_says_locked(fresh_state) -> None:
    write_room(fresh_state, "192.0.2.2")
    at = AppTest.from_function(_sidebar_controls, default_timeout=30).run()
    for i in range(PASSCODE_TRIES):
        at.sidebar.text_input(key="gs_passcode").input(f"guess-{i}")
        at.sidebar.button(key="gs_unlock").click().run()
    assert any("locked" in e.value for e in at.sidebar.error)
    at.sidebar.text_input(key="gs_passcode").input(PASSCODE)
    at.sidebar.button(key="gs_unlock").click().run()
    assert _ctl_widgets(at) == []
    assert any("locked" in e.value for e in at.sidebar.error)


def test_a_viewer_has_no_watch_page_until_the_passcode_unlocks_the_session(
        fresh_state, monkeypatch) -> None:
    # the Watch page reads any file on the server as client.properties and shows a bad line
    monkeypatch.setenv("GROUPSCOPE_BOOTSTRAP", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:{free_port()}")
    write_room(fresh_state, "192.0.2.2")
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(APP, default_timeout=30).run()
        assert not at.exception, at.exception
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page("screens/watch.py")
        at.sidebar.text_input(key="gs_passcode").input(PASSCODE)
        at.sidebar.button(key="gs_unlock").click().run()
        at.switch_page("screens/watch.py").run()
        assert not at.exception, at.exception
        assert at.title[0].value == "Watch a consumer group"
    finally:
        st.cache_resource.clear()  # the Live page's pollers stop with their cache entries


def test_a_viewer_session_never_reaches_the_control_client(fresh_state, logged) -> None:
    from dashboard.controls import call_control

    reached: list[object] = []
    assert not presenter.is_presenter()  # no session, no peer: a viewer
    assert call_control("start", reached.append) is None  # nothing sent, nothing answered
    assert reached == []
    assert "control action 'start' refused: viewer session" in logged.text
