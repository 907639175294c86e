"""The control API's token, and publishing its endpoint files.

A fresh token per supervisor start, handed to the dashboard and the CLI through files only
the user can read (0600, created with that mode so there is no window where they are wider).
The token is never printed or logged. A per-user list of running supervisors (data
directories only, never tokens) lets `groupscope ctl` find the stack from any directory.
Only the supervisor writes those files, here; their layout and how readers find them are in
backend/control_files.py, which readers that must not import the supervisor share.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path

from backend.control_files import CONTROL_FILE, TOKEN_FILE, running_dir
from backend.paths import write_private


def generate_token() -> str:
    return secrets.token_urlsafe(32)


def token_matches(header: str | None, token: str) -> bool:
    """True if `header` is exactly `Bearer <token>`; compared in constant time."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def write_control_files(data_dir: Path, url: str, token: str, pid: int | None = None,
                        bootstrap: str | None = None, kafka_config: str | None = None) -> None:
    """Publish the endpoint in `data_dir`, and the data directory in the per-user list of
    running supervisors, so `ctl` and `snapshot` find it from any directory."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pid = pid or os.getpid()
    write_private(data_dir / TOKEN_FILE, token + "\n")
    write_private(data_dir / CONTROL_FILE, json.dumps(
        {"url": url, "pid": pid, "bootstrap": bootstrap,
         "kafka_config": str(Path(kafka_config).resolve()) if kafka_config else None}) + "\n")
    running = running_dir()
    running.mkdir(parents=True, exist_ok=True)
    write_private(running / f"{pid}.json", json.dumps({"data_dir": str(data_dir)}) + "\n")


def remove_control_files(data_dir: Path, pid: int | None = None) -> None:
    """Remove the files, but only if they still describe this process (not a newer one)."""
    data_dir = Path(data_dir)
    pid = pid or os.getpid()
    (running_dir() / f"{pid}.json").unlink(missing_ok=True)
    try:
        current = json.loads((data_dir / CONTROL_FILE).read_text())
    except (OSError, ValueError):
        return
    if current.get("pid") == pid:
        (data_dir / CONTROL_FILE).unlink(missing_ok=True)
        (data_dir / TOKEN_FILE).unlink(missing_ok=True)
