"""`groupscope up --room`: the stack opened to a workshop room's LAN, and only that.

Which address is the room's, whether it is really this machine's, the two per-room secrets
(Spark Connect token, presenter passcode) in 0600 files, and the wheel of this very version
that participants install from the dashboard (so the room needs no package index). What the
room looks like to the rest of the stack is `backend.contracts.room`.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from backend.cli_common import UserError
from backend.contracts.room import (
    PASSCODE_FILE,
    ROOM_FILE,
    SPARK_TOKEN_FILE,
    RoomInfo,
)
from backend.paths import write_private
from backend.proc import run
from backend.stack.procfile import REPO_ROOT

WHEEL_TIMEOUT_S = 180.0


def default_room_address() -> str:
    """The primary IPv4 address of the interface of the default route (no packet is sent:
    a UDP socket only asks the kernel which source address it would use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere for real
            address = probe.getsockname()[0]
        except OSError:
            address = ""
    if not address or address.startswith("127.") or address == "0.0.0.0":
        raise UserError("this machine has no default route to pick a room address from; "
                        "pass --room-address with its address on the room's network")
    return address


def check_room_address(address: str) -> str:
    """`address` when it is a non-loopback IPv4 address of one of this machine's interfaces;
    otherwise a one-line error that lists the ones it could be."""
    try:
        parsed = ipaddress.IPv4Address(address)
    except ValueError:
        raise UserError(f"--room-address {address!r} is not an IPv4 address") from None
    if parsed.is_loopback or parsed.is_unspecified:
        raise UserError(f"--room-address {address} is not reachable from other machines; "
                        f"choose one of {', '.join(local_addresses()) or '(none found)'}")
    if address not in local_addresses():
        raise UserError(f"--room-address {address} is not an address of this machine; "
                        f"choose one of {', '.join(local_addresses()) or '(none found)'}")
    return address


def local_addresses() -> list[str]:
    """Every non-loopback IPv4 address of this machine's interfaces."""
    found = []
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == socket.AF_INET and not addr.address.startswith("127."):
                found.append(addr.address)
    return sorted(set(found))


def open_room(data_dir: Path, address: str, *, kafka_port: int, spark_port: int,
              web_port: int, topic: str, group: str, wheel: bool = True,
              say=print) -> tuple[RoomInfo, str]:
    """Write the room's files into `data_dir`: fresh secrets (0600) and room.json; build the
    wheel. Returns the room and the passcode, which the caller shows the presenter once."""
    from importlib.metadata import version

    data_dir.mkdir(parents=True, exist_ok=True)
    write_private(data_dir / SPARK_TOKEN_FILE, secrets.token_urlsafe(24) + "\n")
    passcode = "-".join(secrets.token_hex(2) for _ in range(3))
    write_private(data_dir / PASSCODE_FILE, passcode + "\n")
    wheel_name = build_wheel(data_dir, say) if wheel else None
    room = RoomInfo(address=address, bootstrap=f"{address}:{kafka_port}",
                    dashboard_url=f"http://{address}:{web_port}",
                    spark_remote=f"sc://{address}:{spark_port}", topic=topic, group=group,
                    version=version("groupscope"), wheel=wheel_name)
    (data_dir / ROOM_FILE).write_text(room.model_dump_json(indent=2) + "\n")
    return room, passcode


def close_room(data_dir: Path) -> None:
    """Forget the room: its secrets are per room, never reused by the next `up`."""
    for name in (ROOM_FILE, SPARK_TOKEN_FILE, PASSCODE_FILE):
        (data_dir / name).unlink(missing_ok=True)


def build_wheel(data_dir: Path, say=print) -> str | None:
    """A wheel of the checkout this runs from, in `data_dir`; None (with the reason said) when
    it cannot be built, since the room still works without the download."""
    out = data_dir / "wheels"
    out.mkdir(exist_ok=True)
    say("building the groupscope wheel participants can download (once per up) ...")
    try:
        done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(REPO_ROOT)],
                   timeout=WHEEL_TIMEOUT_S, capture_output=True, text=True,
                   env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"no wheel for the room ({exc}); participants need another way to install")
        return None
    wheels = sorted(out.glob("groupscope-*.whl"), key=lambda p: p.stat().st_mtime)
    if done.returncode != 0 or not wheels:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel made"]
        say(f"no wheel for the room ({reason[0]}); participants need another way to install")
        return None
    newest = wheels[-1]
    target = data_dir / newest.name
    newest.replace(target)
    return target.name
