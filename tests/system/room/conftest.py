"""Room fixtures: a participant's laptop (a network namespace, tests/system/room/netns.py), Chromium
inside it, and a data directory that looks like `groupscope up --room` wrote it."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from backend.contracts.room import PASSCODE_FILE, ROOM_FILE, RoomInfo
from tests.system.room.netns import Laptop, laptop_namespace

PASSCODE = "tablet-at-the-front-7319"


@pytest.fixture
def laptop() -> Iterator[Laptop]:
    """A participant's laptop: a fresh namespace joined to this host by a veth pair; deleted
    after the test, on failure too."""
    with laptop_namespace() as made:
        yield made


@pytest.fixture
def laptop_chromium(chromium: Callable[..., AbstractContextManager[Any]], laptop: Laptop,
                    tmp_path: Path) -> Callable[..., AbstractContextManager[Any]]:
    """`laptop_chromium()` opens a headless Chromium page running inside the laptop's
    namespace. Built on `chromium`, so the test is marked `browser`."""
    from tests.dashboard.browser import CHROMIUM

    wrapper = laptop.exec_wrapper(CHROMIUM, tmp_path)
    return functools.partial(chromium, executable=str(wrapper))


def write_room(data: Path, address: str, passcode: str = PASSCODE) -> RoomInfo:
    """room.json and the 0600 passcode file, as `up --room` leaves them in `data`."""
    room = RoomInfo(address=address, bootstrap=f"{address}:9094",
                    dashboard_url=f"http://{address}:8501", spark_remote=f"sc://{address}:15003",
                    topic="telemetry", group="telemetry-summariser", version="0.0.0")
    (data / ROOM_FILE).write_text(room.model_dump_json())
    fd = os.open(data / PASSCODE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(passcode + "\n")
    return room
