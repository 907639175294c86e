"""A workshop room for real: `groupscope up --room` on this host, a participant's laptop in a
network namespace joining over the veth link with the join card's Python consumer and a full
PySpark replica, the presenter killing a replica, and the leaderboard crediting the laptop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backend.contracts.room import SPARK_TOKEN_FILE, read_room, read_secret
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port, wait_until
from backend.observer.observer import Observer
from backend.proc import spawn
from backend.supervisor.client import ControlClient
from dashboard import leaderboard_model as lb
from dashboard import room_model as rm
from tests.dashboard.browser import open_page, save_shot
from tests.dashboard.screen import SIZES, assert_fits
from tests.system.room.netns import Laptop

REPO = Path(__file__).resolve().parents[3]
UP_TIMEOUT_S = 300.0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_laptop_joins_the_room_and_takes_over_a_killed_replicas_partitions(
        stack: str, laptop: Laptop, laptop_chromium, chromium, artifacts_dir: Path,
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    kafka_port, room_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE")}
    web_port = free_port()
    env.update(GROUPSCOPE_DATA=str(data), GROUPSCOPE_KAFKA_PORT=str(kafka_port),
               GROUPSCOPE_SPARK_PORT=str(free_port()), GROUPSCOPE_WEB_PORT=str(web_port),
               GROUPSCOPE_ROOM_KAFKA_PORT=str(room_port), PYTHONPATH=str(REPO))
    up = spawn([sys.executable, "-m", "backend.cli", "up", "--room-address",
                laptop.host_address], env=env, cwd=REPO, stdout=subprocess.PIPE,
               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
               start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True).start()
    observer: Observer | None = None
    try:
        wait_until(lambda: any("groupscope is up" in line for line in lines) or up.poll(),
                   UP_TIMEOUT_S, what="`groupscope up --room` to report ready")
        assert up.poll() is None, "".join(lines[-40:])
        room = read_room(data)
        assert room is not None and room.bootstrap == f"{laptop.host_address}:{room_port}"
        token = read_secret(data, SPARK_TOKEN_FILE)
        assert token and not any(token in line for line in lines)  # never printed

        # the laptop: the join card's consumer, as the card renders it, and a PySpark replica
        script = tmp_path / "join.py"
        script.write_text(rm.python_consumer(room).replace(
            f'NAME = "{rm.NAME_PLACEHOLDER}"', 'NAME = "laptop-py"'))
        laptop_env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO),
                      "HOME": str(tmp_path)}
        logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("py", "spark")}
        laptop.spawn([sys.executable, str(script)], env=laptop_env, stdout=logs["py"],
                     stderr=subprocess.STDOUT)
        laptop.spawn([sys.executable, "-m", "backend.cli", "replica", "--id", "laptop-spark",
                      "--bootstrap", room.bootstrap, "--spark-remote", room.spark_remote,
                      "--group", room.group, "--topic", room.topic],
                     env={**laptop_env, "GROUPSCOPE_SPARK_TOKEN": token}, cwd=REPO,
                     stdout=logs["spark"], stderr=subprocess.STDOUT)

        observer = Observer(KafkaSettings(bootstrap=f"127.0.0.1:{kafka_port}"), room.group,
                            topic=room.topic, interval=0.5, tail_events=False)
        observer.start()
        laptop_host = f"/{laptop.laptop_address}"

        def members() -> dict[str, tuple[str, tuple[int, ...]]]:
            snap = observer.latest()
            return {m.client_id: (m.host, m.partitions) for m in snap.members} if snap else {}

        def tail(name: str) -> str:
            return (tmp_path / f"{name}.log").read_text(errors="replace")[-1500:]

        try:
            wait_until(lambda: {"laptop-py", "laptop-spark"} <= set(members()), 180,
                       what="both laptop members in the group")
        except TimeoutError:
            snap = observer.latest()
            raise AssertionError(
                f"members {members()}; observer error {snap and snap.error}; up says:\n"
                + "".join(lines[-25:]) + f"\npy: {tail('py')}\nspark: {tail('spark')}"
            ) from None
        assert members()["laptop-py"][0] == laptop_host, members()
        assert members()["laptop-spark"][0] == laptop_host, members()

        # the presenter kills a replica that owns partitions: they move, some to the laptop
        client = ControlClient.discover(data)
        victim = wait_until(lambda: next((name for name, (_host, parts) in members().items()
                                          if parts and not name.startswith("laptop")), None),
                            60, what="a presenter replica owning partitions")
        client.kill(victim)
        wait_until(lambda: victim not in members(), 60, what=f"{victim} to leave the group")
        wait_until(lambda: any(members()[n][1] for n in ("laptop-py", "laptop-spark")
                               if n in members()), 60,
                   what="a partition on the laptop after the kill: " + repr(members()))

        board = lb.Leaderboard()

        def credited() -> dict[str, int] | None:
            board.fold(observer.history())
            rows = {r.name: r.processed for r in board.rows()}
            laptop_rows = {n: rows.get(n, 0) for n in ("laptop-py", "laptop-spark")}
            return laptop_rows if any(laptop_rows.values()) else None

        processed = wait_until(credited, 120, what="the leaderboard crediting the laptop; "
                               f"py log: {tail('py')} spark log: {tail('spark')}")
        print(f"laptop processed: {processed}")
        # what the room sees: the presenter's own browser, and the laptop's (a viewer)
        for name, opener, url in (
                ("room-presenter-live", chromium, f"http://127.0.0.1:{web_port}"),
                ("room-laptop-live", laptop_chromium, room.dashboard_url)):
            with opener(viewport=(1600, 2200)) as page:
                open_page(page, url, page.get_by_text("laptop-spark"))
                page.get_by_text("Join this room").first.wait_for(timeout=30_000)
                save_shot(page, artifacts_dir / f"{name}.png")
                kill_buttons = page.get_by_role("button", name="Kill").count()
                assert (kill_buttons > 0) == (name == "room-presenter-live"), name
                # the presenter's projector and laptop; a participant's laptop and phone
                assert_fits(page, name, artifacts_dir / "screens",
                            SIZES[:3] if name == "room-presenter-live" else SIZES[1::2])
            if name == "room-laptop-live":
                continue
            with opener(viewport=(1600, 1000)) as page:  # the leaderboard, on screen
                heading = page.get_by_text("Leaderboard", exact=True).first
                open_page(page, url, heading)
                heading.scroll_into_view_if_needed()
                page.get_by_text("laptop-spark").last.wait_for(timeout=30_000)
                save_shot(page, artifacts_dir / "room-leaderboard.png", full_page=False)
                assert_fits(page, "room-leaderboard", artifacts_dir / "screens", SIZES[:1])
    finally:
        if observer is not None:
            observer.stop()
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
    assert not (data / SPARK_TOKEN_FILE).exists()  # the room's secrets end with the room
