"""The Live page (AppTest) against a real broker, real group members and the real observer."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from backend.contracts.history import HISTORY_FILE
from backend.kafka.partitioner import partition_for
from backend.netutil import wait_until
from dashboard.pollers import NO_MEMORY
from tests.dashboard.conftest import APP, page_text
from tests.dashboard.group import Member, create_topic, produce_keys


@pytest.fixture
def members(kafka, unique):
    topic, group = f"live-{unique}", f"g-{unique}"
    create_topic(kafka, topic, 2)
    keys = [f"car-{i:02d}" for i in range(8)]
    produce_keys(kafka, topic, keys)
    started = []
    try:
        for name in ("m-a", "m-b", "m-c"):
            started.append(Member(kafka, group, topic, name))
        yield topic, group, keys, started
    finally:
        for m in started:
            m.close()


def test_live_page_shows_owners_streams_and_idle_warning(
        monkeypatch, broker, members, tmp_path, fresh_pollers, as_presenter):
    topic, group, keys, _ = members
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_KAFKA_PORT", str(broker.port))
    monkeypatch.setenv("GROUPSCOPE_GROUP", group)
    monkeypatch.setenv("GROUPSCOPE_TOPIC", topic)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))  # no supervisor here
    at = AppTest.from_file(APP, default_timeout=30)

    def settled():
        at.run()
        assert not at.exception, at.exception
        warnings = [w.value for w in at.warning]
        text = page_text(at)
        return (warnings, text) if warnings and "Stable" in text and keys[0] in text else None

    warnings, text = wait_until(settled, timeout=60, what="a stable group with an idle member")
    idle = re.search(r"so (m-[abc]) is idle", warnings[0])
    assert idle, warnings
    assert "3 replicas share 2 partitions" in warnings[0]
    assert "never has more busy replicas than partitions" in warnings[0]
    busy = {"m-a", "m-b", "m-c"} - {idle.group(1)}
    lanes = re.findall(r'class=\\?"p\\?"[^>]*>P(\d)</div><div class=\\?"own\\?"[^>]*>([^<]+)<',
                       text)
    assert {owner for _, owner in lanes} == busy, lanes
    owner_of = {int(p): owner for p, owner in lanes}
    # every key's chip sits in the lane of its murmur2 partition
    for key in keys:
        p = partition_for(key, 2)
        lane = text.split(f">P{p}</div>", 1)[1].split("gs-lag", 1)[0]
        assert key in lane, (key, p)
    # the locator agrees with the partitioner and names the owner
    at.text_input(key="locator_key").input(keys[3]).run()
    p3 = partition_for(keys[3], 2)
    located = [m.value for m in at.markdown if "(murmur2)" in m.value]
    assert located and f"**P{p3}**" in located[0] and f"**{owner_of[p3]}**" in located[0]
    # no supervisor: controls are disabled and say why in one line
    assert any(c.value.startswith("No supervisor:") for c in at.sidebar.caption)
    assert at.sidebar.button(key="ctl_kill").disabled


def _env(monkeypatch, broker, group, topic, tmp_path, **extra: str) -> None:
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY",
                "GROUPSCOPE_TOPIC", "GROUPSCOPE_GROUP"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_KAFKA_PORT", str(broker.port))
    monkeypatch.setenv("GROUPSCOPE_GROUP", group)
    monkeypatch.setenv("GROUPSCOPE_TOPIC", topic)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    for key, value in extra.items():
        monkeypatch.setenv(key, value)


def test_watch_mode_is_read_only_and_shows_the_group(
        monkeypatch, broker, members, tmp_path, fresh_pollers):
    topic, group, keys, _ = members
    _env(monkeypatch, broker, group, topic, tmp_path, GROUPSCOPE_READONLY="1",
         GROUPSCOPE_BOOTSTRAP=f"127.0.0.1:{broker.port}")
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/watch.py")  # watch mode opens on Groups; a group's page is Watch

    def shown():
        at.run()
        assert not at.exception, at.exception
        text = page_text(at)
        return text if "gs-lanes" in text and keys[0] in text else None

    text = wait_until(shown, timeout=60, what="the watched group's lanes")
    assert at.title[0].value == "Watch a consumer group"
    assert at.selectbox(key="watch_group").value == group
    assert not [b for b in at.sidebar.button if (b.key or "").startswith("ctl_")]
    assert not [b for b in at.button if (b.key or "").startswith("ctl_")]
    assert "read-only" in text


def test_timeline_shades_a_live_rebalance_and_says_where_the_memory_would_be(
        monkeypatch, broker, kafka, members, tmp_path, fresh_pollers):
    topic, group, _, started = members
    _env(monkeypatch, broker, group, topic, tmp_path)
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/timeline.py")

    def ownership() -> dict | None:
        at.run()
        assert not at.exception, at.exception
        charts = [c for c in at.get("plotly_chart") if c.key == "ownership"]
        return json.loads(charts[0].proto.spec) if charts else None

    def stable_with_owners():
        figure = ownership()
        return figure if "Stable" in page_text(at) else None

    figure = wait_until(stable_with_owners, timeout=60, what="timeline of a stable group")
    shaded_before = len(figure.get("layout", {}).get("shapes") or ())  # the group's start
    # the rebalances' memory is not in this data directory: one line says so, and where
    memory = [w.value for w in at.warning if HISTORY_FILE in w.value]
    assert memory == [NO_MEMORY.format(path=tmp_path / HISTORY_FILE)], memory
    # a busy member leaves: the live ownership chart shades the rebalance
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(kafka.client_config())
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    busy = next(m.client_id for m in desc.members if m.assignment.topic_partitions)
    leaving = next(m for m in started if m.client_id == busy)
    leaving.close()  # a graceful leave: the group rebalances at once

    def shaded():
        shapes = (ownership() or {}).get("layout", {}).get("shapes") or ()
        return len(shapes) > shaded_before or None

    wait_until(shaded, timeout=60, what="the rebalance shaded on the ownership chart")
