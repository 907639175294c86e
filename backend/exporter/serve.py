"""The always-on overview of one process: watcher, /metrics and alerts, started and stopped
together.

`groupscope exporter` and `groupscope watch --metrics-port/--alerts` both call `always_on`,
so the order that keeps their promises is written once: every check that can fail on the
user's input (the alerts file, the metrics port) runs before anything starts, the watcher is
registered as the process's watcher (the dashboard's Groups page then reads that same one),
and shutdown fits in the stop budget however stuck the cluster is.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from backend.alerts import AlertService, load_alerts
from backend.cli_common import UserError
from backend.exporter.access import MetricsAccess, load_access
from backend.exporter.exposition import CycleExposition
from backend.exporter.health import HEALTH_PATH, health
from backend.exporter.metrics import OverviewCollector
from backend.exporter.options import DEFAULT_ADDRESS, DEFAULT_INTERVAL_S, DEFAULT_MAX_GROUPS
from backend.exporter.shared import process_watcher, register_process_watcher
from backend.history.cli import Recording, recorder
from backend.history.recorder import HistoryRecorder
from backend.kafka.settings import KafkaSettings
from backend.netutil import PortBusyError
from backend.observer.overview import OverviewWatcher
from backend.proc import STOP_BUDGET_S

log = logging.getLogger("groupscope.exporter")

# of the stop budget: the watcher may be inside an admin request with a 15 s timeout, and
# webhooks may be slow; neither may hold the process past STOP_WITHIN_S
WATCHER_STOP_S = STOP_BUDGET_S * 0.4
ALERTS_STOP_S = STOP_BUDGET_S * 0.2
HISTORY_STOP_S = STOP_BUDGET_S * 0.1  # the last cycle's write, then the lease released
HANDSHAKE_S = 10.0  # a scraper's TLS handshake, at most


@dataclass(frozen=True)
class AlwaysOn:
    watcher: OverviewWatcher
    collector: OverviewCollector
    metrics_url: str | None  # None when no metrics port was asked for
    alerts: AlertService | None
    metrics_everywhere: bool = False  # served on every interface, not just the URL's
    history: HistoryRecorder | None = None
    metrics_access: MetricsAccess | None = None  # None: /metrics open to whoever reaches it

    def describe(self) -> str:
        """What is on, in one line safe to print (no secret, no webhook URL)."""
        parts = []
        if self.history is not None and self.history.path is not None:
            parts.append(f"memory in {self.history.path}")
        if self.metrics_url:
            parts.append(f"metrics at {self.metrics_url}"
                         + (" (and on every interface)" if self.metrics_everywhere else "")
                         + (f", asking {self.metrics_access.describe()}"
                            if self.metrics_access else ""))
        if self.alerts is not None:
            parts.append(self.alerts.describe())
        return "; ".join(parts)


@contextmanager
def always_on(settings: KafkaSettings | Callable[[], KafkaSettings], *,
              metrics_port: int | None = None, metrics_address: str = DEFAULT_ADDRESS,
              alerts_file: str | None = None, per_partition: bool = False,
              max_groups: int = DEFAULT_MAX_GROUPS,
              interval: float = DEFAULT_INTERVAL_S,
              history: Recording | None = None, role: str = "exporter",
              metrics_access: str | None = None,
              include: Callable[[str], bool] | None = None) -> Iterator[AlwaysOn]:
    """Run the overview watcher with its metrics server and alert service for the block.

    Raises a one-line error (UserError, PortBusyError, ClusterUnreachable) before starting
    anything when the alerts file is unusable, the cluster cannot be resolved or the port
    cannot be had. `settings` may be a resolver (a reachability check, say): it is called
    after the alerts file is read, so a typo there is reported before a slow cluster check.
    Whatever was set up is undone in reverse order, on an error or an interrupt at any step
    too; each stop is bounded (see `_bounded`). `history` keeps the memory (`role` names this
    process as its writer); None keeps the rebalance counters in memory only. `include`
    picks the groups watched (`options.group_filter`); None: every group.
    """
    with contextlib.ExitStack() as undo:
        if metrics_access and metrics_port is None:
            raise UserError("--metrics-access protects /metrics, which is off: give "
                            "--metrics-port too")
        access = load_access(metrics_access) if metrics_access else None
        alerts = _load_alerts(alerts_file) if alerts_file else None
        if alerts is not None:
            undo.callback(_bounded, lambda: alerts.close(timeout=ALERTS_STOP_S),
                          ALERTS_STOP_S + 0.5, "alerts")
        if callable(settings):
            settings = settings()
        memory = recorder(history or Recording(None), role).start()
        undo.callback(_bounded, lambda: memory.close(timeout=HISTORY_STOP_S),
                      HISTORY_STOP_S + 0.5, "memory")
        watcher = OverviewWatcher(settings, interval=interval, history=memory, include=include)
        undo.callback(_bounded, lambda: watcher.stop(timeout=WATCHER_STOP_S), WATCHER_STOP_S,
                      "overview watcher")
        collector = OverviewCollector(watcher.latest, per_partition=per_partition,
                                      max_groups=max_groups, cluster=settings.bootstrap,
                                      counters=memory.counters)
        url = None
        if metrics_port is not None:
            exposition = CycleExposition(collector)
            undo.callback(exposition.close)
            server = _serve_metrics(
                exposition, metrics_address, metrics_port, access,
                lambda: health(watcher.latest(), int(time.time() * 1000), interval))
            undo.callback(_close_server, server)
            url = _url(metrics_address, server.server_port, access is not None and access.tls)
            watcher.add_listener(exposition.observe)
        watcher.add_listener(collector.observe)
        if alerts is not None:
            watcher.add_listener(alerts)
        register_process_watcher(watcher)
        undo.callback(_unregister, watcher)
        watcher.start()
        yield AlwaysOn(watcher, collector, url, alerts,
                       metrics_everywhere=metrics_address in _WILDCARDS, history=memory,
                       metrics_access=access)


def _close_server(server: WSGIServer) -> None:
    server.shutdown()  # returns once serve_forever's loop has ended (within its 0.5 s poll)
    server.server_close()


def _unregister(watcher: OverviewWatcher) -> None:
    if process_watcher() is watcher:
        register_process_watcher(None)


def _load_alerts(path: str) -> AlertService:
    try:
        return load_alerts(path)
    except UserError:
        raise
    except OSError as exc:
        raise UserError(f"--alerts {path}: {exc.strerror or exc}") from None


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No line per scrape on stderr (prometheus_client's own server is as quiet)."""


def _serve(exposition: CycleExposition, registry: CollectorRegistry, address: str, port: int,
           access: MetricsAccess | None, health: Callable[[], tuple[int, str]]) -> WSGIServer:
    """/metrics (`exposition`'s, prometheus_client's app over `registry` for what that
    does not serve; behind `access`'s credentials and TLS when given) and
    `/healthz` (never behind credentials: a probe carries none), on a threading WSGI server
    of its own on a daemon thread: prometheus_client's start_http_server serves one app and
    takes no credentials."""

    tls = access.ssl_context() if access is not None and access.tls else None
    metrics = exposition.wsgi_app(fallback=make_wsgi_app(registry))
    if access is not None:
        metrics = access.guard(metrics)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HEALTH_PATH:
            return metrics(environ, start_response)
        code, line = health()
        start_response(f"{code} {HTTPStatus(code).phrase}",
                       [("Content-Type", "text/plain; charset=utf-8")])
        return [line.encode() + b"\n"]

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in address else socket.AF_INET

        def finish_request(self, request: Any, client_address: Any) -> None:
            """The TLS handshake in the request's own thread, bounded: a client that connects
            and says nothing must not hold up the accept loop, and every other scraper."""
            if tls is None:
                return super().finish_request(request, client_address)
            request.settimeout(HANDSHAKE_S)
            try:
                wrapped = tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return None  # plain HTTP, a wrong client, or too slow: nothing is served
            try:
                return super().finish_request(wrapped, client_address)
            finally:
                wrapped.close()

    server = make_server(address, port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True).start()
    return server


def _serve_metrics(exposition: CycleExposition, address: str, port: int,
                   access: MetricsAccess | None, health: Callable[[], tuple[int, str]]
                   ) -> WSGIServer:
    """/metrics of this registry only (the collector and the process's CPU, memory and file
    descriptors) and /healthz; behind TLS and credentials when `access` asks for them."""
    registry = CollectorRegistry()
    registry.register(exposition.collector)
    ProcessCollector(registry=registry)
    try:
        return _serve(exposition, registry, address, port, access, health)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortBusyError(address, port, "metrics server") from None
        reason = exc.strerror or str(exc)
        raise UserError(f"cannot serve metrics on {address} port {port}: {reason}; "
                        f"check --metrics-address / --address") from None


_WILDCARDS = ("0.0.0.0", "::", "")


def _url(address: str, port: int, tls: bool = False) -> str:
    host = "localhost" if address in ("127.0.0.1", "::1", *_WILDCARDS) else address
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}/metrics"


def _bounded(stop: Callable[[], object], seconds: float, what: str) -> None:
    """Run `stop` for at most `seconds`: a watcher waiting on an unanswered admin request
    holds its cycle lock until librdkafka times out, longer than the process may take to
    exit. Past the bound the daemon thread is left to die with the process."""
    def run() -> None:
        try:
            stop()
        except Exception as exc:  # shutting down: report, never mask the exit
            log.warning("stopping the %s failed: %s", what, exc)

    thread = threading.Thread(target=run, name=f"stop-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        log.warning("the %s did not stop within %.0fs; exiting anyway", what, seconds)
