"""The demo's memory: the backend watches the demo's groups for the memory, and tells it what
it did to their replicas, so an episode says "killed by the presenter".

A replica pool's events (`ReplicaPool._note`) become the memory's `Action`s here, the one
place that knows what each event means: a kill, a stop or a start, made by a control
request (the presenter), by the start-up (`up`), or a replica crashing on its own.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from backend.contracts.history import ENV_RESTARTED_BY_UP, HISTORY_FILE, Action
from backend.contracts.overview import Overview
from backend.history.cli import Recording, recorder
from backend.history.recorder import HistoryRecorder
from backend.kafka.settings import KafkaSettings
from backend.observer.overview import OverviewWatcher

log = logging.getLogger("groupscope.supervisor")

# The backend's watcher cycle: every QUIET_INTERVAL_S while nothing happens (the demo at rest
# pays for each cycle: bench/README.md, "The memory"), every BUSY_INTERVAL_S from a
# supervisor action or a rebalance seen until BUSY_FOR_S after the last: a crashed replica's
# dead time is measured to about a busy cycle.
QUIET_INTERVAL_S = 5.0
BUSY_INTERVAL_S = 1.0
BUSY_FOR_S = 60.0


def replica_action(group: str, event: dict[str, Any], by: str) -> Action | None:
    """The memory's word for a pool event; None for the events that are not one (an exit
    the supervisor asked for, a forced kill after a stop's grace)."""
    kind, via = event.get("action"), event.get("via")
    if kind == "start" and via == "restart":
        return None  # the restart's own second half: its "restart" says it all
    if kind == "exit":
        if event.get("state") != "crashed":
            return None
        return Action(int(event["ts"] * 1000), group, event["replica"], "crash",
                      exit_code=event.get("returncode"), by="supervisor")
    word = {"kill": "kill", "restart": "restart",
            "stop": "scale-down" if via == "scale" else "stop",
            "start": "restart" if by == "up-restart"
            else "scale-up" if via == "scale" and by != "up" else "start"}.get(str(kind))
    if word is None:
        return None
    return Action(int(event["ts"] * 1000), group, event["replica"], word, by=by)


class DemoMemory:
    """The backend's recorder and the watcher that feeds it, started and stopped together."""

    def __init__(self, settings: KafkaSettings, data_dir: Path, groups: frozenset[str]) -> None:
        """`groups`: the demo's own (its consumer and share groups), the only ones it reads:
        the cluster may be anyone's, with thousands of groups of others."""
        self.recorder: HistoryRecorder = recorder(Recording(Path(data_dir) / HISTORY_FILE),
                                                  "backend").start()
        self.watcher = OverviewWatcher(settings, interval=BUSY_INTERVAL_S,
                                       history=self.recorder, lag_seconds=False,
                                       include=groups.__contains__)
        self.watcher.add_listener(self._pace)
        self._busy_until = time.monotonic() + BUSY_FOR_S  # the start-up is busy
        self.watcher.start()
        self.booting = True  # replicas started now are the start-up's, not the presenter's
        # a backend `up` started again: its start-up restarts the demo's replicas
        self.boot = "up-restart" if os.environ.get(ENV_RESTARTED_BY_UP) else "up"

    def note(self, group: str, event: dict[str, Any]) -> None:
        action = replica_action(group, event, self.boot if self.booting else "presenter")
        if action is not None:
            self.recorder.record_action(action)
            self._busy(wake=True)

    def _busy(self, wake: bool = False) -> None:
        self._busy_until = time.monotonic() + BUSY_FOR_S
        self.watcher.interval = BUSY_INTERVAL_S
        if wake:
            self.watcher.wake()

    def _pace(self, overview: Overview) -> None:
        """After each cycle: busy while a group rebalances, quiet once nothing has for a
        while (a listener: it runs on the watcher's thread)."""
        if any(r.rebalancing for r in overview.rows):
            self._busy()
        elif time.monotonic() > self._busy_until:
            self.watcher.interval = QUIET_INTERVAL_S

    def close(self, timeout: float = 3.0) -> None:
        began = time.monotonic()
        self.watcher.stop(timeout=timeout / 2)
        self.recorder.close(timeout=max(0.5, timeout - (time.monotonic() - began)))
