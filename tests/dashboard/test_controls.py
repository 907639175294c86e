"""Sidebar controls against a real supervisor (`groupscope backend`, no replicas, no fleet)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient
from streamlit.testing.v1 import AppTest

from backend.netutil import wait_until
from dashboard.controls import MESSAGE_S
from tests.dashboard.browser import supervisor
from tests.dashboard.conftest import APP


def _answer_page() -> None:
    from dashboard.controls import show_answer

    show_answer("broker")


def test_an_answer_shows_however_long_its_action_took_then_goes():
    """The answer's time on screen counts from its first showing, not from the action: a kill
    that took longer than that on a loaded cluster would otherwise never be seen."""
    at = AppTest.from_function(_answer_page)
    at.session_state["gs_ctl_msg"] = ("ok", "kill broker 2: SIGKILL sent", time.monotonic() - 60)
    at.run()
    assert [s.value for s in at.success] == ["kill broker 2: SIGKILL sent"]
    at.run()
    assert [s.value for s in at.success] == ["kill broker 2: SIGKILL sent"]
    kind, text, _, shown = at.session_state["gs_ctl_msg"]
    at.session_state["gs_ctl_msg"] = (kind, text, time.monotonic() - MESSAGE_S - 1, shown)
    at.run()
    assert not at.success
    at.session_state["gs_ctl_msg"] = ("error", "rate: refused", time.monotonic())
    at.run()
    assert not at.success and not at.error  # not a broker's answer: the sidebar shows it


def _one_button_page() -> None:
    import streamlit as st

    from dashboard.controls import action_button, widget

    acted = st.session_state.setdefault("acted", [])
    st.number_input("replicas", value=3, key="n")
    if action_button(st, "Scale", "go", lambda: acted.append(widget("n"))):
        st.session_state["followed"] = st.session_state.get("followed", 0) + 1


def test_an_action_button_acts_once_per_click_on_the_values_the_click_left(monkeypatch):
    """The action is the button's callback, reading the value typed in the same interaction,
    not the one the page drew before it; a click again within REPEAT_S (Streamlit running
    the callback again for an interrupted run, or a double-click) is taken once."""
    from dashboard import controls

    at = AppTest.from_function(_one_button_page).run()
    at.number_input(key="n").set_value(7)
    at.button(key="go").click().run()
    assert at.session_state["acted"] == [7] and at.session_state["followed"] == 1
    at.run()  # the next refresh: no click, no action
    assert at.session_state["acted"] == [7] and at.session_state["followed"] == 1
    at.button(key="go").click().run()  # the same click again, at once
    assert at.session_state["acted"] == [7]
    monkeypatch.setattr(controls, "REPEAT_S", 0.0)  # as if REPEAT_S had passed
    at.button(key="go").click().run()  # a click of its own
    assert at.session_state["acted"] == [7, 7]


def test_add_partitions_from_the_sidebar_reaches_the_cluster(
        monkeypatch, broker, kafka, unique, tmp_path, fresh_pollers, as_presenter):
    group, topic = f"ctl-{unique}", f"ctl-topic-{unique}"
    env = {"GROUPSCOPE_KAFKA_PORT": str(broker.port), "GROUPSCOPE_BOOTSTRAP": "",
           "GROUPSCOPE_KAFKA_CONFIG": "", "GROUPSCOPE_GROUP": group, "GROUPSCOPE_TOPIC": topic}
    data = tmp_path / "data"
    data.mkdir()
    with supervisor(env, ["--group", group, "--topic", topic, "--partitions", "3",
                          "--replicas", "0", "--no-fleet"], tmp_path / "backend.log", data):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("GROUPSCOPE_DATA", str(data))
        monkeypatch.delenv("GROUPSCOPE_READONLY", raising=False)
        at = AppTest.from_file(APP, default_timeout=30)

        def enabled():
            at.run()
            assert not at.exception, at.exception
            return not at.sidebar.button(key="ctl_start").disabled

        wait_until(enabled, 60, what="controls enabled by a reachable supervisor")
        assert at.sidebar.button(key="ctl_kill").disabled  # no replica to kill
        assert at.sidebar.button(key="ctl_set_rate").disabled  # no fleet
        at.sidebar.number_input(key="ctl_partitions").set_value(5).run()
        at.sidebar.button(key="ctl_add_parts").click().run()
        assert not at.exception, at.exception
        shown = [s.value for s in at.sidebar.success] + [e.value for e in at.sidebar.error]
        assert any(v.startswith("partitions: 3 → 5 partitions") for v in shown), shown
        md = AdminClient(kafka.client_config()).list_topics(topic, timeout=10)
        assert len(md.topics[topic].partitions) == 5
