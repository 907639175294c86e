"""Ports and condition waits shared by every process launcher."""

from __future__ import annotations

import ipaddress
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# ports handed out by free_port in this process, and when: a port is not bound until its
# service starts, and may look free again in the meantime. Kept HANDED_OUT_KEEP_S, long past
# any service's start, so a long test run does not use its whole pool up.
_handed_out: dict[int, float] = {}
HANDED_OUT_KEEP_S = 600.0
_handed_out_lock = threading.Lock()
_PROMISED_ENV = re.compile(r"GROUPSCOPE_\w*PORT")
FREE_PORT_TRIES = 100
# Ports are handed out below the kernel's ephemeral range: every outgoing connection's local
# port comes from that range, so a port chosen there can be taken by any client socket in the
# seconds before its server binds it (a test's watch lost its port that way). From LOWEST_PORT
# up to the ephemeral range's start; a process given FREE_SLICE_ENV="i/n" (the test lanes,
# one process each) hands out slice i of n only, so two lanes never choose the same port.
LOWEST_PORT = 20_000
FREE_SLICE_ENV = "GROUPSCOPE_FREE_SLICE"
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


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
    """A port free now, and not one promised elsewhere: never one this process handed out
    before, nor one the environment names for a service (`promised_ports`), and (see
    LOWEST_PORT) none an outgoing connection or another lane can take before it is bound.

    A free port stays unbound until its service starts, and the OS hands out the same port
    again meanwhile: once a stack's Spark took the port just chosen for its Connect server as
    its web UI's, and its Connect server could not start (tests use free ports so that runs
    never collide; this keeps a run's own ports from colliding too)."""
    avoid = promised_ports()
    pool = port_pool()
    for _ in range(FREE_PORT_TRIES):
        port = random.choice(pool) if pool else _any_free(host)
        if pool and not _bindable(host, port):
            continue
        with _handed_out_lock:
            now = time.monotonic()
            if now - _handed_out.get(port, -HANDED_OUT_KEEP_S) >= HANDED_OUT_KEEP_S \
                    and port not in avoid:
                _handed_out[port] = now
                return port
    raise RuntimeError(f"no free port on {host} in {FREE_PORT_TRIES} tries: every one the OS "
                       f"offered was taken or promised; free some ports and try again")


def port_pool(ephemeral_start: int | None = None, free_slice: str | None = None) -> range:
    """The ports this process hands out: LOWEST_PORT up to the ephemeral range's start, the
    slice FREE_SLICE_ENV names; empty (the OS chooses) when there is no room below the
    ephemeral range or it cannot be read."""
    if ephemeral_start is None:
        try:
            ephemeral_start = int(EPHEMERAL_RANGE.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return range(0)
    pool = range(LOWEST_PORT, ephemeral_start)
    if len(pool) < 1000:
        return range(0)
    text = os.environ.get(FREE_SLICE_ENV) if free_slice is None else free_slice
    if text:
        i, n = _slice_of(text)
        size = len(pool) // n
        pool = range(pool.start + i * size, pool.start + (i + 1) * size)
    return pool


def _slice_of(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise ValueError(f"{FREE_SLICE_ENV}={text!r}: expected i/n with 0 <= i < n, e.g. 0/4")
    return i, n


def _any_free(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _bindable(host: str, port: int) -> bool:
    """Free to bind now, for any server (no SO_REUSEADDR: a port in TIME_WAIT is not)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


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
