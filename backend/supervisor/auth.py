"""The control API's token and endpoint files.

A fresh token per supervisor start, handed to the dashboard and the CLI through files only
the user can read (0600, created with that mode so there is no window where they are wider).
The token is never printed or logged. A per-user list of running supervisors (data
directories only, never tokens) lets `groupscope ctl` find the stack from any directory.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import psutil

from backend.paths import write_private

CONTROL_FILE = "control.json"
TOKEN_FILE = "control.token"


class ControlNotFound(RuntimeError):
    """No running supervisor has published an endpoint in this data directory."""


@dataclass(frozen=True)
class ControlEndpoint:
    url: str
    pid: int
    token: str
    data_dir: Path
    bootstrap: str | None = None  # the Kafka cluster the supervisor runs against
    kafka_config: str | None = None


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
    running = _running_dir()
    running.mkdir(parents=True, exist_ok=True)
    write_private(running / f"{pid}.json", json.dumps({"data_dir": str(data_dir)}) + "\n")


def remove_control_files(data_dir: Path, pid: int | None = None) -> None:
    """Remove the files, but only if they still describe this process (not a newer one)."""
    data_dir = Path(data_dir)
    pid = pid or os.getpid()
    (_running_dir() / f"{pid}.json").unlink(missing_ok=True)
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
    return ControlEndpoint(url=info["url"], pid=int(info.get("pid") or 0), token=token,
                           data_dir=data_dir, bootstrap=info.get("bootstrap"),
                           kafka_config=info.get("kafka_config"))


def find_control_files(data_dir: Path | None = None) -> ControlEndpoint:
    """The endpoint of a live supervisor: in `data_dir` when given (or GROUPSCOPE_DATA), else
    in ./.groupscope, else the only one running for this user; several running is an error
    that lists their data directories."""
    explicit = data_dir or (Path(os.environ["GROUPSCOPE_DATA"])
                            if os.environ.get("GROUPSCOPE_DATA") else None)
    if explicit is not None:
        return _live(read_control_files(explicit))
    local = Path.cwd() / ".groupscope"
    local_error: ControlNotFound | None = None
    if (local / CONTROL_FILE).exists():
        try:
            return _live(read_control_files(local))
        except ControlNotFound as exc:  # stale: another one may run elsewhere
            local_error = exc
    found = running_supervisors()
    if len(found) == 1:
        return found[0]
    if not found:
        if local_error is not None:
            raise local_error
        raise ControlNotFound("no running supervisor found (start one with `groupscope up` "
                              "or `groupscope backend`, or pass --data-dir)")
    dirs = ", ".join(str(ep.data_dir) for ep in found)
    raise ControlNotFound(f"{len(found)} supervisors are running ({dirs}); choose one with "
                          f"--data-dir or GROUPSCOPE_DATA")


def running_supervisors() -> list[ControlEndpoint]:
    """Every supervisor of this user whose process is alive; stale entries are dropped."""
    found = []
    folder = _running_dir()
    for entry in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            ep = read_control_files(Path(json.loads(entry.read_text())["data_dir"]))
            found.append(_live(ep))
        except (ControlNotFound, OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
    return found


def _live(ep: ControlEndpoint) -> ControlEndpoint:
    if ep.pid and not psutil.pid_exists(ep.pid):
        raise ControlNotFound(f"the supervisor that wrote {ep.data_dir / CONTROL_FILE} (pid "
                              f"{ep.pid}) is no longer running; start `groupscope backend`")
    return ep


def _running_dir() -> Path:
    from backend.paths import cache_dir

    return cache_dir() / "running"
