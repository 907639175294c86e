"""A room started wrong says what to fix in one line and starts nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cli_common import UserError
from backend.netutil import free_port
from backend.proc import run
from backend.stack.room import check_room_address, local_addresses
from tests.system.room.netns import Laptop

REPO = Path(__file__).resolve().parents[3]


def test_an_address_that_is_not_this_machines_is_refused_with_the_ones_that_are() -> None:
    for address, reason in (("192.0.2.77", "not an address of this machine"),
                            ("127.0.0.1", "not reachable from other machines"),
                            ("not-an-ip", "not an IPv4 address")):
        with pytest.raises(UserError, match=reason) as err:
            check_room_address(address)
        assert "\n" not in str(err.value)
    for address in local_addresses():
        assert check_room_address(address) == address


def test_up_room_with_a_foreign_address_fails_before_starting_anything(tmp_path: Path) -> None:
    env = dict(os.environ, GROUPSCOPE_DATA=str(tmp_path / "data"), PYTHONPATH=str(REPO))
    done = run([sys.executable, "-m", "backend.cli", "up", "--room-address", "192.0.2.77"],
               env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().count("\n") == 0 and "192.0.2.77" in done.stderr
    assert not (tmp_path / "data" / "room.json").exists()


def test_a_busy_room_port_stops_the_broker_with_one_line(laptop: Laptop, tmp_path: Path
                                                          ) -> None:
    with socket.socket() as squatter:
        squatter.bind((laptop.host_address, 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        env = dict(os.environ, GROUPSCOPE_DATA=str(tmp_path / "data"), PYTHONPATH=str(REPO),
                   GROUPSCOPE_ROOM_ADDRESS=laptop.host_address,
                   GROUPSCOPE_ROOM_KAFKA_PORT=str(busy), GROUPSCOPE_KAFKA_PORT=str(free_port()))
        env.pop("GROUPSCOPE_BOOTSTRAP", None)
        done = run([sys.executable, "-m", "backend.cli", "broker"], env=env, cwd=REPO,
                   capture_output=True, text=True, timeout=60,
                   stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert line.count("\n") == 0 and f"port {busy} on {laptop.host_address}" in line, line
    assert "Kafka room listener" in line, line
