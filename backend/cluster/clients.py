"""Admin clients as every long-lived groupscope process makes them: quiet, and guarded.

librdkafka's own log lines are dropped (errors arrive through error_cb or exceptions, and are
worded by `error_text`), and a client is replaced, not reused, after a failed group request.

librdkafka 2.16 aborts the whole process (`rd_kafka_enq_once_del_source_return: Assertion
eonce->refcnt > 0`) when a coordinator-bound admin request (describe group, offset fetch) meets
a broker connection that is not up - exactly what repeated describes during a broker restart
produce. A metadata request is not coordinator bound, so it is the safe probe: after a failure
the client is dropped, and no group request goes out until a fresh client's metadata request
answers - the group request then goes out on that client, whose connection is already up.
Every long-lived process that describes groups (observer, supervisor) uses this, so a broker
restart cannot take it down - nor, through PDEATHSIG, its replicas.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from backend.cluster.properties import KafkaConfigError
from backend.cluster.settings import ClusterUnreachable, KafkaSettings

CONNECT_TIMEOUT_S = 2.0


def quiet_logger(name: str = "groupscope.librdkafka") -> logging.Logger:
    """A logger that drops librdkafka's connection chatter instead of printing it to stderr."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def quiet_admin(settings: KafkaSettings, **overrides: Any) -> AdminClient:
    """The one way groupscope makes an AdminClient: quiet, and with the settings librdkafka
    refuses at creation (a key `ssl.key.password` does not decrypt, a file it cannot read)
    raised as a one-line KafkaConfigError without secrets, worded as `check_reachable` words
    them, so a long-lived reader (observer, overview) fails the way the CLI tools do instead
    of with a raw client exception that a page would print."""
    try:
        return AdminClient(settings.client_config(logger=quiet_logger(), **overrides))
    except KafkaException as exc:
        raise KafkaConfigError(settings.setup_error(exc)) from None


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
    after one that went wrong. `make` is `quiet_admin` with the caller's overrides, so
    settings the client refuses raise KafkaConfigError from the constructor."""

    def __init__(self, make: Callable[[], AdminClient]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._suspect = False
        self._client: AdminClient | None = make()

    def failed(self) -> None:
        """Drop the client now: one whose group request failed is never used again, not even
        for the probe: such a client is what librdkafka 2.16 aborted on."""
        with self._lock:
            self._suspect = True
            self._client = None
            gc.collect()

    @property
    def client(self) -> AdminClient:
        """The current client; raises ClusterUnreachable while none is known to be safe."""
        self.ready()
        client = self._client
        if client is None:
            raise ClusterUnreachable("cluster unreachable: client closed")
        return client

    def ready(self) -> None:
        """Return when a group request is safe; raise ClusterUnreachable while it is not."""
        if not self._suspect:
            return
        with self._lock:
            if not self._suspect:  # another thread reconnected meanwhile
                return
            fresh = self._make()
            try:
                fresh.list_topics(timeout=CONNECT_TIMEOUT_S)  # metadata: not coordinator bound
            except Exception as exc:
                del fresh
                gc.collect()
                raise ClusterUnreachable(f"cluster unreachable: {error_text(exc)}") from None
            self._client = fresh
            del fresh
            self._suspect = False

    def close(self) -> None:
        """Destroy the client now, while Python is fully alive: a librdkafka handle with Python
        callbacks that is only collected at interpreter exit can crash the process."""
        self._client = None
        gc.collect()
