"""Sidebar controls against a real supervisor (`groupscope backend`, no replicas, no fleet)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from streamlit.testing.v1 import AppTest

from backend.netutil import wait_until
from tests.dashboard.browser import supervisor
from tests.dashboard.conftest import APP


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
