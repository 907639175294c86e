"""Pure view-model of the room's join card: the snippets a participant copies, and the QR code.

Everything a participant pastes must work verbatim on their own laptop, so every value from
room.json goes through a quoting function of the target language (json.dumps for Python,
shlex.quote for the shell) rather than being spliced in raw: a topic or a group id with a
quote or a space in it must still give a valid program. No Streamlit and no I/O here, apart
from `wheel_path`, which only checks that the file it names exists.
"""

from __future__ import annotations

import json
import shlex
from functools import lru_cache
from io import BytesIO
from pathlib import Path

from backend.contracts.room import RoomInfo

NAME_PLACEHOLDER = "your-name"
TOKEN_PLACEHOLDER = "<ask the presenter>"


def python_consumer(room: RoomInfo) -> str:
    """`join.py`: a plain confluent-kafka member of the room's group.

    It commits as any consumer does (auto-commit, every second so the leaderboard moves
    smoothly) and closes on Ctrl-C, which leaves the group at once instead of after the
    session timeout, so its partitions move to the others while the room watches.
    """
    q = json.dumps
    return f'''\
# join.py: one member of the room's consumer group (needs: pip install confluent-kafka)
from confluent_kafka import Consumer

NAME = {q(NAME_PLACEHOLDER)}  # put your own name here: the dashboard shows it

consumer = Consumer({{
    "bootstrap.servers": {q(room.bootstrap)},
    "group.id": {q(room.group)},
    "client.id": NAME,
    "auto.offset.reset": "earliest",
    "auto.commit.interval.ms": 1000,
}})
consumer.subscribe([{q(room.topic)}])
try:
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            print(msg.error())
            continue
        key = (msg.key() or b"").decode(errors="replace")
        print(f"{{NAME}} key={{key}} partition={{msg.partition()}} offset={{msg.offset()}}")
except KeyboardInterrupt:
    pass
finally:
    consumer.close()  # leaves the group now: the others take its partitions at once
'''


def console_consumer(room: RoomInfo) -> str:
    """The Java console consumer as a member of the same group, named like the others."""
    q = shlex.quote
    return (f"NAME={NAME_PLACEHOLDER}  # your own name: the dashboard shows it\n"
            f"kafka-console-consumer.sh --bootstrap-server {q(room.bootstrap)} "
            f"--topic {q(room.topic)} --group {q(room.group)} "
            f"--property print.key=true --property print.partition=true "
            f'--consumer-property client.id="$NAME"\n')


def replica_commands(room: RoomInfo, token: str | None = None, wheel_ready: bool = True) -> str:
    """Install the presenter's own groupscope and run a replica against the room's engine.

    `token` is the Spark Connect token, given only once the presenter has revealed it in
    their own session; otherwise a placeholder stands in, quoted so that a paste of the
    placeholder fails with an authentication error rather than as a shell redirection.
    `wheel_ready` says whether the wheel room.json names can be downloaded (see wheel_path).
    """
    q = shlex.quote
    lines = [f"NAME={NAME_PLACEHOLDER}  # your own name: the dashboard shows it"]
    if room.wheel and wheel_ready:
        lines.append(f"# download {room.wheel} from this page first (same version as the "
                     f"presenter's, {room.version})")
        lines.append(f"pip install {q(room.wheel)}")
    else:
        lines.append(f"# the presenter has no wheel of groupscope {room.version} to share "
                     f"yet: ask for one")
    lines.append(
        f'groupscope replica --id "$NAME" --bootstrap {q(room.bootstrap)} '
        f"--group {q(room.group)} --topic {q(room.topic)} "
        f"--spark-remote {q(room.spark_remote)} "
        f"--spark-token {q(token if token else TOKEN_PLACEHOLDER)}")
    return "\n".join(lines) + "\n"


def wheel_path(data_dir: Path, room: RoomInfo) -> Path | None:
    """The wheel room.json names, if it is a plain .whl file name present in the data dir.

    A name with a directory part is refused: the download button must never serve anything
    but a wheel from the data dir, whatever the file says.
    """
    name = room.wheel
    if not name or Path(name).name != name or not name.endswith(".whl"):
        return None
    path = Path(data_dir) / name
    return path if path.is_file() else None


@lru_cache(maxsize=8)
def qr_png(text: str, scale: int = 6) -> bytes:
    """A QR code of `text` as PNG bytes (segno writes PNG in pure Python, no Pillow).

    Always a full QR code (make_qr): segno.make picks a Micro QR for short text, which
    phone cameras do not read. Cached: the card redraws on every refresh, the URL rarely
    changes.
    """
    import segno

    buf = BytesIO()
    segno.make_qr(text, error="m").save(buf, kind="png", scale=scale, border=2)
    return buf.getvalue()
