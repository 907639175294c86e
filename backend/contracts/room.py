"""The workshop room, as `groupscope up --room` publishes it to the rest of the stack.

`up --room` writes `<data dir>/room.json` (what anyone in the room may see: addresses, topic,
group) and, beside it, the two secrets with mode 0600: the Spark Connect token and the
presenter passcode. The dashboard reads the public part for its join card; the secrets are
read only where they are needed and are never shown on a page unless the presenter reveals
the Spark token.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

ROOM_FILE = "room.json"
SPARK_TOKEN_FILE = "room.spark-token"
PASSCODE_FILE = "room.passcode"
ENV_ROOM_ADDRESS = "GROUPSCOPE_ROOM_ADDRESS"  # set for every process `up --room` starts
# set by `watch --address <not loopback> --no-auth`: every page says it is open to everyone
ENV_OPEN_TO_ALL = "GROUPSCOPE_OPEN_TO_ALL"
PASSCODE_TRIES = 5  # wrong passcodes from one address before it is locked out
PASSCODE_LOCKOUT_S = 300.0


class RoomInfo(BaseModel):
    """What a participant's laptop needs to join: every address is the room address."""

    model_config = ConfigDict(frozen=True)

    address: str  # the presenter machine's address on the room network
    bootstrap: str  # Kafka, as a participant reaches it
    dashboard_url: str
    spark_remote: str  # sc://address:port; the token is separate
    topic: str
    group: str
    version: str  # groupscope's version, for the wheel participants install
    wheel: str | None = None  # file name of that wheel in the data dir, when built


def read_room(data_dir: Path) -> RoomInfo | None:
    """The room the stack in `data_dir` runs, or None when it runs without --room."""
    try:
        return RoomInfo.model_validate_json((Path(data_dir) / ROOM_FILE).read_text())
    except (OSError, ValueError):
        return None


def read_secret(data_dir: Path, name: str) -> str | None:
    """One of the room's 0600 secrets (SPARK_TOKEN_FILE, PASSCODE_FILE), or None."""
    try:
        return (Path(data_dir) / name).read_text().strip() or None
    except OSError:
        return None
