"""The control API's token and endpoint files.

A fresh token per supervisor start, handed to the dashboard and the CLI through files only
the user can read (0600, created with that mode so there is no window where they are wider).
The token is never printed or logged.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

CONTROL_FILE = "control.json"
TOKEN_FILE = "control.token"


class ControlNotFound(RuntimeError):
    """No running supervisor has published an endpoint in this data directory."""


@dataclass(frozen=True)
class ControlEndpoint:
    url: str
    pid: int
    token: str


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


def _write_private(path: Path, text: str) -> None:
    """Write via a 0600 temp file and rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_control_files(data_dir: Path, url: str, token: str, pid: int | None = None) -> None:
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    _write_private(data_dir / TOKEN_FILE, token + "\n")
    _write_private(data_dir / CONTROL_FILE,
                   json.dumps({"url": url, "pid": pid or os.getpid()}) + "\n")


def remove_control_files(data_dir: Path, pid: int | None = None) -> None:
    """Remove the files, but only if they still describe this process (not a newer one)."""
    data_dir = Path(data_dir)
    pid = pid or os.getpid()
    try:
        current = json.loads((data_dir / CONTROL_FILE).read_text())
    except (OSError, ValueError):
        return
    if current.get("pid") == pid:
        (data_dir / CONTROL_FILE).unlink(missing_ok=True)
        (data_dir / TOKEN_FILE).unlink(missing_ok=True)


def read_control_files(data_dir: Path) -> ControlEndpoint:
    data_dir = Path(data_dir)
    try:
        info = json.loads((data_dir / CONTROL_FILE).read_text())
        token = (data_dir / TOKEN_FILE).read_text().strip()
    except FileNotFoundError:
        raise ControlNotFound(
            f"no supervisor endpoint in {data_dir} (is `groupscope backend` running? "
            f"set GROUPSCOPE_DATA or --data-dir to its data directory)") from None
    except (OSError, ValueError) as exc:
        raise ControlNotFound(f"cannot read the supervisor endpoint in {data_dir}: {exc}") from None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        raise ControlNotFound(f"{data_dir / CONTROL_FILE} has no url")
    return ControlEndpoint(url=info["url"], pid=int(info.get("pid") or 0), token=token)
