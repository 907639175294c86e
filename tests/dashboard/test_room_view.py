"""The join card and the leaderboard table as Streamlit draws them (AppTest, no broker)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.contracts.room import ROOM_FILE, SPARK_TOKEN_FILE, RoomInfo
from dashboard import leaderboard_model as lb
from dashboard.views.room import leaderboard_html

TOKEN = "tok-3f9a"


def _card_script(data_dir: str) -> None:
    from pathlib import Path

    from backend.contracts.room import read_room
    from dashboard.views.room import draw_join_card

    room = read_room(Path(data_dir))
    assert room is not None
    draw_join_card(room, Path(data_dir))


@pytest.fixture
def room_dir(tmp_path: Path) -> Path:
    room = RoomInfo(address="10.1.2.3", bootstrap="10.1.2.3:9094",
                    dashboard_url="http://10.1.2.3:8501", spark_remote="sc://10.1.2.3:15002",
                    topic="telemetry", group="room-group", version="0.3.0",
                    wheel="groupscope-0.3.0-py3-none-any.whl")
    (tmp_path / ROOM_FILE).write_text(room.model_dump_json())
    (tmp_path / SPARK_TOKEN_FILE).write_text(TOKEN)
    (tmp_path / "groupscope-0.3.0-py3-none-any.whl").write_bytes(b"PK\x03\x04")
    return tmp_path


def _card(room_dir: Path) -> AppTest:
    at = AppTest.from_function(_card_script, args=(str(room_dir),), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    return at


def _codes(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


def _presenter_module(monkeypatch, is_presenter: object | None) -> None:
    """Stand in for dashboard/presenter.py: with is_presenter, or without it (None)."""
    module = types.ModuleType("dashboard.presenter")
    if is_presenter is not None:
        module.is_presenter = is_presenter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dashboard.presenter", module)


def test_a_viewer_sees_the_snippets_but_never_the_token(room_dir, monkeypatch):
    _presenter_module(monkeypatch, lambda: False)
    at = _card(room_dir)
    codes = _codes(at)
    assert len(codes) == 3
    assert any('"group.id": "room-group"' in c for c in codes)
    assert any("--group room-group" in c and "kafka-console-consumer.sh" in c for c in codes)
    assert not [b for b in at.button if "token" in b.label.lower()]
    assert all(TOKEN not in c for c in codes)
    assert "'<ask the presenter>'" in codes[2]
    assert "10.1.2.3:9094" in "\n".join(m.value for m in at.markdown)
    (wheel,) = at.get("download_button")
    assert wheel.label == "Download groupscope-0.3.0-py3-none-any.whl"


def test_no_download_button_until_the_wheel_is_built(room_dir, monkeypatch):
    _presenter_module(monkeypatch, lambda: False)
    (room_dir / "groupscope-0.3.0-py3-none-any.whl").unlink()
    at = _card(room_dir)
    assert not at.get("download_button")
    assert "pip install" not in _codes(at)[2] and "no wheel" in _codes(at)[2]


def test_without_a_presenter_check_nobody_can_reveal(room_dir, monkeypatch):
    """Also what a raising is_presenter gives: the token stays hidden (fail closed)."""
    _presenter_module(monkeypatch, None)
    at = _card(room_dir)
    assert not [b for b in at.button if "token" in b.label.lower()]

    def broken() -> bool:
        raise RuntimeError("no session")

    _presenter_module(monkeypatch, broken)
    at = _card(room_dir)
    assert not [b for b in at.button if "token" in b.label.lower()]


def test_the_presenter_reveals_the_token_in_its_session_and_hides_it_again(room_dir,
                                                                            monkeypatch):
    _presenter_module(monkeypatch, lambda: True)
    at = _card(room_dir)
    assert TOKEN not in _codes(at)[2]
    at.button(key="room_reveal_token").click().run()
    assert f"--spark-token {TOKEN}" in _codes(at)[2]
    at.button(key="room_hide_token").click().run()
    assert TOKEN not in _codes(at)[2]


def _row(name: str, **over: object) -> lb.LeaderRow:
    fields: dict = dict(member_id=f"id-{name}", name=name, host="/10.0.0.9", partitions=(0, 2),
                        streams=4, rate=12.5, processed=1234, joined_ms=0,
                        seen_at_start=False, left_ms=None, how=None, badge=lb.SHARING)
    fields.update(over)
    return lb.LeaderRow(**fields)


def test_leaderboard_table_escapes_names_and_greys_the_departed():
    html = leaderboard_html([_row("<b>eve</b>"),
                             _row("bob", left_ms=65_000, how=lb.CRASHED, badge=lb.CRASHED,
                                  partitions=())],
                            now_ms=125_000)
    assert "<b>eve</b>" not in html and "&lt;b&gt;eve&lt;/b&gt;" in html
    assert "P0, P2" in html and "1,234" in html and "12.5" in html and "2 min 05 s" in html
    gone = html.split('<tr class="gone">')[1]
    assert "crashed" in gone and "1 min 05 s" in gone
