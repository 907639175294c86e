"""The files a running supervisor publishes, and how any process finds a running stack.

`<data dir>/control.json` (URL, pid, the Kafka cluster) and `control.token` (0600) describe
one supervisor; a per-user list of running supervisors (data directories only, never tokens)
lets a command find the stack from any directory. Only the supervisor writes them
(backend/supervisor/auth.py); the readers are its client and the observer's commands, which
default to the running stack's cluster. It lives beside the process helpers rather than in
the supervisor so the observer can read it without depending on the supervisor: the observer
must stay able to watch any cluster with read rights only (the layers in pyproject.toml).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from backend.paths import cache_dir

CONTROL_FILE = "control.json"
TOKEN_FILE = "control.token"


class ControlNotFound(RuntimeError):
    """No running supervisor has published an endpoint in this data directory."""


@dataclass(frozen=True)
class ControlEndpoint:
    url: str
    pid: int
    token: str = field(repr=False)  # never in a traceback's or a log line's repr
    data_dir: Path
    bootstrap: str | None = None  # the Kafka cluster the supervisor runs against
    kafka_config: str | None = None


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
    folder = running_dir()
    for entry in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            ep = read_control_files(Path(json.loads(entry.read_text())["data_dir"]))
            found.append(_live(ep))
        except (ControlNotFound, OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
    return found


def running_dir() -> Path:
    """The per-user list of running supervisors: one `<pid>.json` naming each data dir."""
    return cache_dir() / "running"


def _live(ep: ControlEndpoint) -> ControlEndpoint:
    if ep.pid and not psutil.pid_exists(ep.pid):
        raise ControlNotFound(f"the supervisor that wrote {ep.data_dir / CONTROL_FILE} (pid "
                              f"{ep.pid}) is no longer running; start `groupscope backend`")
    return ep
