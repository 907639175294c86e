"""The join card's Python snippet, run verbatim as `python join.py` against the real broker.

What a participant pastes must join the room's group under the placeholder name, consume and
commit, and leave the group at once on Ctrl-C (a graceful leave, well inside the session
timeout), exiting cleanly; the leaderboard then lists it as departed with what it processed.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from backend import proc
from backend.contracts.room import RoomInfo
from backend.netutil import wait_until
from backend.observer.observer import Observer
from dashboard import leaderboard_model as lb
from dashboard import room_model as rm
from tests.dashboard.group import create_topic, produce_keys

KEYS = [f"car-{i:02d}" for i in range(6)]
# librdkafka's default session timeout is 45 s: gone from the group sooner means it left.
# Not 15 s: on a CI machine at load 40 a Ctrl-C'd interpreter took longer to exit.
LEAVES_WITHIN_S = 30.0
AS_FROM_A_TERMINAL = ("import runpy, signal, sys; "
                      "signal.signal(signal.SIGINT, signal.default_int_handler); "
                      "runpy.run_path(sys.argv[1], run_name='__main__')")


def committed(observer: Observer) -> int:
    """Committed offsets summed over the partitions: messages the group has processed."""
    snap = observer.latest()
    return sum(p.committed or 0 for p in snap.partitions) if snap is not None else 0


@pytest.mark.timeout(180)
def test_join_py_joins_commits_and_leaves_on_ctrl_c(kafka, unique, tmp_path):
    topic, group = f"join-{unique}", f"join-{unique}"
    create_topic(kafka, topic, 2)
    room = RoomInfo(address="127.0.0.1", bootstrap=kafka.bootstrap,
                    dashboard_url="http://127.0.0.1:8501", spark_remote="sc://127.0.0.1:15002",
                    topic=topic, group=group, version="0")
    script = tmp_path / "join.py"
    script.write_text(rm.python_consumer(room))
    log = (tmp_path / "join.log").open("wb")
    board = lb.Leaderboard()
    observer = Observer(kafka, group, topic=topic, interval=0.5, tail_events=False)
    observer.start()
    # Ctrl-C as a terminal delivers it: a harness without job control starts us with SIGINT
    # ignored, and an ignored signal is inherited, so join.py would never see it
    child = proc.spawn([sys.executable, "-c", AS_FROM_A_TERMINAL, str(script)],
                       stdout=log, stderr=log)

    def exited() -> None:
        if child.poll() is not None:
            raise AssertionError(f"join.py exited ({child.returncode}): "
                                 f"{(tmp_path / 'join.log').read_text()[-2000:]}")

    try:
        def member():
            snap = observer.latest()
            ok = snap is not None and snap.state == "Stable" and [
                (m.client_id, len(m.partitions)) for m in snap.members] == [
                (rm.NAME_PLACEHOLDER, 2)]
            return snap if ok else None

        wait_until(member, timeout=60, abort=exited, what="join.py in the group")
        produce_keys(kafka, topic, KEYS, per_key=3)  # the first commits: the baseline
        wait_until(lambda: committed(observer) == 3 * len(KEYS), timeout=30, abort=exited,
                   what="join.py's first commits")
        board.fold(observer.history())
        produce_keys(kafka, topic, KEYS, per_key=10)
        wait_until(lambda: committed(observer) == 13 * len(KEYS), timeout=30, abort=exited,
                   what="join.py's commits")
        board.fold(observer.history(since_ms=board.last_ms))
        (row,) = board.rows()
        assert row.name == rm.NAME_PLACEHOLDER and row.processed == 10 * len(KEYS)
        assert row.badge == lb.SOLO

        proc.send(child, signal.SIGINT)  # Ctrl-C
        wait_until(lambda: (s := observer.latest()) is not None and not s.error
                   and not s.members, timeout=LEAVES_WITHIN_S, what="join.py gone from the group")
        try:
            assert child.wait(timeout=LEAVES_WITHIN_S) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError(f"join.py still running {LEAVES_WITHIN_S:.0f} s after Ctrl-C: "
                                 f"{(tmp_path / 'join.log').read_text()[-2000:]}") from None
        board.fold(observer.history(since_ms=board.last_ms))
        (row,) = board.rows()
        assert row.departed and row.processed == 10 * len(KEYS)
        assert "key=car-" in (tmp_path / "join.log").read_text()
    finally:
        proc.terminate(child, grace=5.0)
        log.close()
        observer.stop()
