"""Which cluster, group and topic a page shows, and whether it may change anything.

The `web` process reads the environment (`groupscope up` / `groupscope watch` set it); the
Watch page can point one browser session elsewhere through st.session_state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from backend.contracts import DEFAULT_GROUP, INPUT_TOPIC
from backend.contracts.room import ENV_OPEN_TO_ALL
from dashboard.checks import ClusterTarget

ENV_GROUP = "GROUPSCOPE_GROUP"
ENV_TOPIC = "GROUPSCOPE_TOPIC"
ENV_READONLY = "GROUPSCOPE_READONLY"  # set by `groupscope watch`: every control hidden
# set by `groupscope watch --allow-offset-writes`: the Offsets page, for this machine only
ENV_OFFSET_WRITES = "GROUPSCOPE_OFFSET_WRITES"
WATCH_KEY = "gs_watch"


@dataclass(frozen=True)
class ViewContext:
    target: ClusterTarget
    group: str
    topic: str | None
    read_only: bool = False  # controls hidden (watch mode)
    watching: bool = False  # another cluster chosen on the Watch page

    @property
    def label(self) -> str:
        return f"{self.group} on {self.target.bootstrap or 'configured cluster'}"


def read_only_env() -> bool:
    return os.environ.get(ENV_READONLY, "").lower() in ("1", "true", "yes")


def offset_writes_env() -> bool:
    """Offset writes allowed: only in watch mode, and only when asked for."""
    return read_only_env() and os.environ.get(ENV_OFFSET_WRITES, "") == "1"


def open_to_all_env() -> bool:
    """`watch --no-auth` beyond loopback: whoever reaches the page sees every group."""
    return os.environ.get(ENV_OPEN_TO_ALL, "") == "1"


def env_context() -> ViewContext:
    return ViewContext(ClusterTarget.from_env(), os.environ.get(ENV_GROUP) or DEFAULT_GROUP,
                       os.environ.get(ENV_TOPIC) or INPUT_TOPIC, read_only=read_only_env())


def current_context(session_state: object | None = None) -> ViewContext:
    """The Watch page's choice for this browser session, else the environment's."""
    chosen = getattr(session_state, "get", lambda _k, _d=None: None)(WATCH_KEY)
    if isinstance(chosen, ViewContext):
        return chosen
    return env_context()
