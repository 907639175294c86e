"""The engine's executors and what each has run, read through Spark's own monitoring API.

Spark Connect has no call that lists executors, but every driver serves its application's
state as JSON on its web UI (`/api/v1/applications/<id>/allexecutors`: the REST API of the
Spark UI). So the list comes from there: the driver itself (`local[*]`: the one JVM that runs
every task) and, on a cluster, one entry per executor with its cores and task counts.

Where that UI is: the embedded engine knows its own port (`SparkConnectServer.ui_url`); any
other client asks the engine once through Spark Connect (`spark.ui.port`, on the host of the
Connect URL) or is told (GROUPSCOPE_SPARK_UI, for a cluster whose driver UI sits elsewhere,
behind a proxy say). Plain urllib: nothing here loads pyspark or starts a JVM.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlparse

from backend.errors import one_line
from backend.netutil import port_open
from backend.spark.session import DEFAULT_PORT, EngineUnavailable, connect, spark_remote

ENV_UI = "GROUPSCOPE_SPARK_UI"  # the driver's web UI, when the Connect host's is not it
DEFAULT_UI_PORT = 4040  # Spark's, when the engine does not say
DRIVER_ID = "driver"
REST_TIMEOUT_S = 5.0  # a driver busy on a loaded 2-core machine took over 2 s to answer


@dataclass(frozen=True)
class ExecutorInfo:
    """One row of Spark's executor list (its field names in brackets)."""

    id: str  # "driver" or the executor id ("0", "1", ...)  [id]
    host_port: str  # [hostPort]
    active: bool  # False once removed: worker lost, killed, idle  [isActive]
    cores: int  # task slots; 0 for a cluster's driver, which runs none  [totalCores]
    active_tasks: int  # [activeTasks]
    completed_tasks: int  # [completedTasks]
    failed_tasks: int  # [failedTasks]
    remove_reason: str | None = None  # [removeReason]

    @property
    def is_driver(self) -> bool:
        return self.id == DRIVER_ID

    @property
    def state(self) -> str:
        return "active" if self.active else "dead"

    @classmethod
    def from_json(cls, item: dict) -> ExecutorInfo:
        return cls(str(item["id"]), str(item.get("hostPort", "")), bool(item.get("isActive")),
                   int(item.get("totalCores", 0)), int(item.get("activeTasks", 0)),
                   int(item.get("completedTasks", 0)), int(item.get("failedTasks", 0)),
                   item.get("removeReason") or None)


def _get_json(url: str, timeout: float) -> object:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def executors_at(ui_url: str, timeout: float = REST_TIMEOUT_S) -> list[ExecutorInfo]:
    """Every executor the driver at `ui_url` knows, removed ones included, driver first.

    A driver's UI serves one application, so the first listed is this engine's."""
    base = ui_url.rstrip("/") + "/api/v1/applications"
    try:
        apps = _get_json(base, timeout)
        if not isinstance(apps, list) or not apps:
            raise EngineUnavailable(f"the Spark UI at {ui_url} lists no application")
        items = _get_json(f"{base}/{apps[0]['id']}/allexecutors", timeout)
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise EngineUnavailable(f"the Spark UI at {ui_url} did not list executors: "
                                f"{one_line(exc)}") from None
    found = [ExecutorInfo.from_json(item) for item in items if isinstance(item, dict)]
    return sorted(found, key=_order)


def _order(e: ExecutorInfo) -> tuple[int, int, str]:
    """Driver first, then executors by number (Spark's ids are decimal strings)."""
    if e.is_driver:
        return (0, 0, "")
    return (1, int(e.id), "") if e.id.isdigit() else (2, 0, e.id)


def discover_ui(remote: str | None = None, token: str | None = None) -> str:
    """The driver UI of the engine at `remote`: GROUPSCOPE_SPARK_UI if set, else asked of the
    engine through Spark Connect (one session, closed again). One line if it has none."""
    explicit = os.environ.get(ENV_UI)
    if explicit:
        return explicit
    url = spark_remote(remote)
    parsed = urlparse(url.replace("sc://", "http://", 1))
    host = parsed.hostname or "127.0.0.1"
    if not port_open(host, parsed.port or DEFAULT_PORT, timeout=REST_TIMEOUT_S):
        # (the Connect client would retry for minutes)
        raise EngineUnavailable(f"nothing is listening at {url}")
    session = connect(url, token, retries=2, max_backoff_ms=1000)  # asked every few seconds
    try:
        enabled = str(session.conf.get("spark.ui.enabled", "true"))
        ui_port = str(session.conf.get("spark.ui.port", str(DEFAULT_UI_PORT)))
    except Exception as exc:
        raise EngineUnavailable(f"the engine at {url} did not say where its web UI is: "
                                f"{one_line(exc)}") from None
    finally:
        with contextlib.suppress(Exception):  # only a question was asked; a failed close
            session.stop()  # changes nothing
    if enabled.lower() == "false":
        raise EngineUnavailable(f"the engine at {url} runs without its web UI "
                                f"(spark.ui.enabled=false), which is where executors are listed")
    return f"http://{host}:{ui_port}"


class ExecutorsProbe:
    """What a poller calls: the executors of the engine at `remote`, its UI found once and
    found again after a failure (the engine restarted on another UI port, say)."""

    def __init__(self, remote: str | None = None, token: str | None = None,
                 ui_url: str | None = None) -> None:
        self.remote = remote
        self.token = token
        self._ui = ui_url
        self._fixed = ui_url is not None

    def __call__(self) -> list[ExecutorInfo]:
        if self._ui is None:
            self._ui = discover_ui(self.remote, self.token)
        try:
            return executors_at(self._ui)
        except EngineUnavailable:
            if not self._fixed:
                self._ui = None
            raise
