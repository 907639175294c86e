"""bench/room.py's laptop consumer is the join card's, with stamps: it still compiles and still
carries the room's bootstrap, group and topic (the bench itself runs a whole room stack)."""

from __future__ import annotations

from backend.contracts.room import RoomInfo
from bench.room import probe_script


def test_the_bench_consumer_is_the_card_consumer_with_stamps() -> None:
    room = RoomInfo(address="10.9.8.7", bootstrap="10.9.8.7:9094", dashboard_url="http://x",
                    spark_remote="sc://10.9.8.7:15002", topic="tele", group="grp", version="0")
    source = probe_script(room)
    compile(source, "join.py", "exec")
    for part in ('"10.9.8.7:9094"', '"grp"', '["tele"]', 'NAME = "bench-laptop"',
                 "class Consumer(Consumer)", '_stamp("message"'):
        assert part in source, part
