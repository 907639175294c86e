"""Ports and condition waits shared by every process launcher."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# ports handed out by free_port in this process: a port is not bound until its service starts,
# and the OS may hand the same free port out again in the meantime
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()
_PROMISED_ENV = re.compile(r"GROUPSCOPE_\w*PORT")
FREE_PORT_TRIES = 100


class PortBusyError(RuntimeError):
    """A port we were told to listen on is already taken."""

    def __init__(self, host: str, port: int, what: str) -> None:
        super().__init__(
            f"port {port} on {host} is already in use, so the {what} cannot listen there; "
            f"stop whatever holds it or choose another port"
        )
        self.port = port


def is_loopback(address: str) -> bool:
    """Whether a listen address reaches this machine only (`localhost`, 127.0.0.0/8, ::1)."""
    if address.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def promised_ports() -> set[int]:
    """Ports the environment gives groupscope's services (GROUPSCOPE_*_PORT): chosen by a
    parent, bound by a sibling that may not have started yet."""
    out = set()
    for key, value in os.environ.items():
        if _PROMISED_ENV.fullmatch(key) and value.isdigit():
            out.add(int(value))
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now, and not one promised elsewhere: never one this process
    handed out before, nor one the environment names for a service (`promised_ports`).

    A free port stays unbound until its service starts, and the OS hands out the same port
    again meanwhile: once a stack's Spark took the port just chosen for its Connect server as
    its web UI's, and its Connect server could not start (tests use free ports so that runs
    never collide; this keeps a run's own ports from colliding too)."""
    avoid = promised_ports()
    for _ in range(FREE_PORT_TRIES):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        with _handed_out_lock:
            if port not in _handed_out and port not in avoid:
                _handed_out.add(port)
                return port
    raise RuntimeError(f"no free port on {host} in {FREE_PORT_TRIES} tries: every one the OS "
                       f"offered was taken or promised; free some ports and try again")


def ensure_port_free(host: str, port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise PortBusyError(host, port, what) from exc


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    interval: float = 0.1,
    what: str = "condition",
    abort: Callable[[], object] | None = None,
) -> T:
    """Poll `check` until it returns something truthy; raise TimeoutError naming `what`.

    The one readiness wait of the project (services, the stack, tests, benchmarks): a real
    probe repeated, never a fixed sleep. `check` may raise while the thing is not up yet;
    that counts as "not yet". `abort` runs before every try and raises to give up at once,
    e.g. when the process being waited for has exited, so a dead child fails fast instead of
    after the whole timeout.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        if abort is not None:
            abort()
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the check may fail until the thing is up
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)
