"""Helpers for the alert tests: synthetic overview rows, and a real HTTP receiver.

The engine is pure and the sinks speak plain HTTP, so most of these need no broker and run in
a few seconds; the storm test (test_storm_live.py) drives a real group on the broker.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from backend.contracts.overview import GroupRow, Overview


def row(group: str = "g", **kw: Any) -> GroupRow:
    """A described, healthy, Stable group with no lag, but for what `kw` says."""
    values: dict[str, Any] = dict(state="Stable", protocol="classic", members=1,
                                  lag_messages=0, max_lag_seconds=0.0, described_ms=0)
    values.update(kw)
    return GroupRow(group=group, **values)


def overview(t_s: float, *rows: GroupRow, error: str | None = None) -> Overview:
    """An overview taken `t_s` seconds after the epoch (the engine's only clock)."""
    return Overview(taken_ms=round(t_s * 1000), cluster="test-cluster",
                    rows=tuple(sorted(rows, key=lambda r: r.group)), error=error)


@dataclass
class Receiver:
    """What a webhook receiver got; `script` is the statuses to answer, then 200."""

    url: str
    script: list[int] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hold: threading.Event | None = None  # when set by a test, answers wait for it
    arrived: int = 0  # requests whose body was read (before any hold)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [body for _, body in self.requests]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A real HTTP server on a loopback port the OS picks (port 0: no race for a port)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a proxy in the environment must not catch it

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with rec.lock:
                rec.arrived += 1
            if rec.hold is not None:
                rec.hold.wait(10)
            with rec.lock:
                rec.requests.append((self.path, json.loads(body)))
                status = rec.script.pop(0) if rec.script else 200
            with contextlib.suppress(OSError):  # a client that gave up (close() timed out)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    rec = Receiver(url=f"http://127.0.0.1:{server.server_port}/services/T0/B0/s3cr3t-token")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        if rec.hold is not None:
            rec.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
