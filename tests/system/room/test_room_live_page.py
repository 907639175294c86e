"""The Live page (AppTest) of a room: join card and leaderboard, on the real broker."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from backend.contracts.room import ROOM_FILE, RoomInfo
from backend.netutil import wait_until
from tests.dashboard.conftest import APP, page_text
from tests.dashboard.group import Member, create_topic, produce_keys


@pytest.mark.timeout(180)
def test_live_page_of_a_room_shows_the_join_card_and_the_leaderboard(
        monkeypatch, broker, kafka, unique, tmp_path):
    topic, group = f"room-page-{unique}", f"room-page-{unique}"
    create_topic(kafka, topic, 2)
    produce_keys(kafka, topic, [f"car-{i:02d}" for i in range(6)])
    room = RoomInfo(address="127.0.0.1", bootstrap=kafka.bootstrap,
                    dashboard_url="http://127.0.0.1:8501", spark_remote="sc://127.0.0.1:15002",
                    topic=topic, group=group, version="0")
    (tmp_path / ROOM_FILE).write_text(room.model_dump_json())
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_KAFKA_PORT", str(broker.port))
    monkeypatch.setenv("GROUPSCOPE_GROUP", group)
    monkeypatch.setenv("GROUPSCOPE_TOPIC", topic)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))  # the room, and no supervisor
    st.cache_resource.clear()
    members = [Member(kafka, group, topic, name) for name in ("m-a", "m-b")]
    try:
        at = AppTest.from_file(APP, default_timeout=30)

        def both_listed():
            at.run()
            assert not at.exception, at.exception
            text = page_text(at)
            return text if "gs-leaderboard" in text and "m-a" in text and "m-b" in text \
                and text.count("sharing") >= 2 else None

        text = wait_until(both_listed, timeout=60, what="both members on the leaderboard")
        codes = [c.value for c in at.code]
        assert any(f'"group.id": "{group}"' in c for c in codes)
        assert any(f"--bootstrap-server {kafka.bootstrap}" in c for c in codes)
        assert "Join this room" in text
    finally:
        for m in members:
            m.close()
        st.cache_resource.clear()
