"""The alert service: rules, engine and sinks behind one callable for the overview watcher.

`groupscope exporter --alerts FILE` and `watch --alerts FILE` call `load_alerts(path)` at
start (a bad file stops them with one line, before any watching) and register the service as
a listener: the watcher calls `service(overview)` from its own thread after each cycle. The
call never raises into the watcher; `close()` at exit gives webhooks a moment to deliver.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from backend.alerts.engine import AlertEngine, Transition
from backend.alerts.rules import AlertRules, WebhookSinkConfig, read_rules
from backend.alerts.sinks import LogSink, Sink, WebhookSink
from backend.contracts.overview import Overview

log = logging.getLogger("groupscope.alerts")


class AlertService:
    def __init__(self, rules: AlertRules, sinks: Sequence[Sink] | None = None,
                 engine: AlertEngine | None = None) -> None:
        self.rules = rules
        self.engine = engine or AlertEngine(rules.rules)
        self.sinks: list[Sink] = list(sinks) if sinks is not None else build_sinks(rules)
        self._lock = threading.Lock()  # one observe at a time, should two watchers share it
        self._warned_cap = False

    def __call__(self, overview: Overview) -> list[Transition]:
        """Evaluate one overview and hand its transitions to every sink; never raises."""
        with self._lock:
            try:
                transitions = self.engine.observe(overview)
            except Exception as exc:  # a bug here must not stop the watcher
                log.error("alerts: evaluating the overview failed (%s: %s)",
                          type(exc).__name__, exc)
                return []
            if self.engine.untracked and not self._warned_cap:
                self._warned_cap = True
                log.warning("alerts: %d groups beyond the first %d are not evaluated",
                            self.engine.untracked, self.engine.max_groups)
        for t in transitions:
            for sink in self.sinks:
                try:
                    sink.send(t)
                except Exception as exc:
                    log.error("alerts: %s failed (%s)", sink.name, type(exc).__name__)
        return transitions

    def close(self, timeout: float = 5.0) -> None:
        """Flush every sink within `timeout` seconds in all."""
        deadline = time.monotonic() + timeout
        for sink in self.sinks:
            sink.close(max(0.0, deadline - time.monotonic()))

    def describe(self) -> str:
        """One line for the command's start-up output: never a URL."""
        return (f"alerts: {len(self.rules.rules)} rule(s) from {self.rules.source}, "
                f"to {', '.join(s.name for s in self.sinks)}")


def build_sinks(rules: AlertRules) -> list[Sink]:
    sinks: list[Sink] = []
    for i, cfg in enumerate(rules.sinks, start=1):
        if isinstance(cfg, WebhookSinkConfig):
            assert cfg.url is not None  # read_rules resolved url_env
            sinks.append(WebhookSink(cfg.url.get_secret_value(), f"webhook sink #{i}"))
        else:
            sinks.append(LogSink())
    return sinks


def load_alerts(path: str | Path, environ: Mapping[str, str] | None = None) -> AlertService:
    """The service for an alerts file; `AlertRulesError` (a `UserError`, one line) if unusable."""
    return AlertService(read_rules(path, environ))
