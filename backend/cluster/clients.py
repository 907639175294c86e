"""Admin clients as every long-lived groupscope process makes them: quiet, and guarded.

librdkafka's own log lines are dropped (errors arrive through error_cb or exceptions, and are
worded by `error_text`), and a client is replaced, not reused, after a failed group request.

librdkafka 2.16 aborts the whole process (`rd_kafka_enq_once_del_source_return: Assertion
eonce->refcnt > 0`) when a coordinator-bound admin request (describe group, offset fetch) meets
a broker connection that is not up - exactly what repeated describes during a broker restart
produce. A metadata request is not coordinator bound, so it is the safe probe: after a failure,
no group request goes out until metadata answers, and then it goes out on a fresh client whose
connection is already up. Every long-lived process that describes groups (observer, supervisor)
uses this, so a broker restart cannot take it down - nor, through PDEATHSIG, its replicas.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient

from backend.cluster.settings import ClusterUnreachable, KafkaSettings

PROBE_TIMEOUT_S = 2.0
CONNECT_TIMEOUT_S = 5.0


def quiet_logger(name: str = "groupscope.librdkafka") -> logging.Logger:
    """A logger that drops librdkafka's connection chatter instead of printing it to stderr."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def quiet_admin(settings: KafkaSettings, **overrides: Any) -> AdminClient:
    return AdminClient(settings.client_config(logger=quiet_logger(), **overrides))


def error_text(exc: BaseException) -> str:
    """The first line of a client error, with librdkafka's error name when it has one."""
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    text = getattr(err, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class GuardedAdmin:
    """Holds the current client; callers say `ready()` before a group request and `failed()`
    after one that went wrong."""

    def __init__(self, make: Callable[[], AdminClient]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._suspect = False
        self.client: AdminClient = make()

    def failed(self) -> None:
        self._suspect = True

    def ready(self) -> None:
        """Return when a group request is safe; raise ClusterUnreachable while it is not."""
        if not self._suspect:
            return
        with self._lock:
            if not self._suspect:  # another thread reconnected meanwhile
                return
            try:
                self.client.list_topics(timeout=PROBE_TIMEOUT_S)
            except Exception as exc:
                raise ClusterUnreachable(f"cluster unreachable: {error_text(exc)}") from None
            fresh = self._make()
            try:
                fresh.list_topics(timeout=CONNECT_TIMEOUT_S)
            except Exception as exc:
                del fresh
                gc.collect()
                raise ClusterUnreachable(f"cluster unreachable: {error_text(exc)}") from None
            self.client = fresh  # the old client's last reference goes here
            del fresh
            gc.collect()
            self._suspect = False

    def close(self) -> None:
        """Destroy the client now, while Python is fully alive: a librdkafka handle with Python
        callbacks that is only collected at interpreter exit can crash the process."""
        self.client = None  # type: ignore[assignment]
        gc.collect()
