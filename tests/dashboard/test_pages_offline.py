"""Every page renders with nothing to talk to: errors in place, never an exception."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from backend.netutil import free_port, wait_until
from tests.dashboard.conftest import APP


@pytest.fixture
def offline(monkeypatch, tmp_path, fresh_pollers):
    dead = free_port()
    for key in ("GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY", "GROUPSCOPE_TOPIC"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_BOOTSTRAP", f"127.0.0.1:{dead}")
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:{free_port()}")
    monkeypatch.setenv("GROUPSCOPE_GROUP", "nobody-home")
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    return dead


@pytest.mark.parametrize("page", ["screens/streams.py", "screens/timeline.py",
                                  "screens/watch.py", "screens/status.py",
                                  "screens/groups.py", "screens/lab.py"])
def test_page_renders_without_a_cluster(offline, page):
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception


def test_live_page_shows_the_observer_error_in_place(offline, as_presenter):
    at = AppTest.from_file(APP, default_timeout=30)

    def error_shown():
        at.run()
        assert not at.exception, at.exception
        return [e.value for e in at.error if str(offline) in e.value] or None

    errors = wait_until(error_shown, 60, what="the observer's error on the Live page")
    assert "\n" not in errors[0]
    # controls stay visible but disabled, saying why in one line
    assert at.sidebar.button(key="ctl_start").disabled
    assert any(c.value.startswith("No supervisor:") for c in at.sidebar.caption)


def test_lab_page_says_it_needs_the_supervisor_and_offers_no_start(offline, as_presenter):
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/lab.py")

    def said():
        at.run()
        assert not at.exception, at.exception
        return [i.value for i in at.info if "needs `groupscope up`" in i.value] or None

    wait_until(said, 30, what="the Lab page's line about the supervisor")
    assert at.button(key="lab_start").disabled
    assert any(c.value.startswith("No supervisor:") for c in at.caption)
