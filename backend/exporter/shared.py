"""The one overview watcher a process serves from, when its outputs must be always on.

`groupscope exporter` and `groupscope watch --metrics-port/--alerts` create their watcher
before anything else and register it here; the dashboard's Groups page then reads that same
watcher instead of starting a second one against the cluster (one admin client per cluster).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.observer.overview import OverviewWatcher

_lock = threading.Lock()
_watcher: OverviewWatcher | None = None


def process_watcher() -> OverviewWatcher | None:
    """The always-on watcher of this process, if one was registered."""
    return _watcher


def register_process_watcher(watcher: OverviewWatcher | None) -> None:
    global _watcher
    with _lock:
        _watcher = watcher
