"""The Live page (AppTest) against a real broker, real group members and the real observer."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from backend.cluster.partitioner import partition_for
from backend.netutil import wait_until
from tests.dashboard.conftest import APP, page_text
from tests.dashboard.group import Member, create_topic, produce_keys

pytestmark = [pytest.mark.broker]


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
        yield topic, group, keys
    finally:
        for m in started:
            m.close()


def test_live_page_shows_owners_streams_and_idle_warning(
        monkeypatch, broker, members, tmp_path, fresh_pollers):
    topic, group, keys = members
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
