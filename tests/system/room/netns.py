"""A participant's laptop for room tests: a Linux network namespace joined to this host by a
veth pair, so a process inside it (a browser, a replica) reaches this host from a real
non-loopback address, the way a laptop on the workshop LAN does.

    with laptop_namespace() as laptop:
        laptop.run(["ip", "-br", "addr"])          # any command, inside the namespace
        url = f"http://{laptop.host_address}:{port}"  # this host, as the laptop sees it

Needs root and iproute2 (`ip`). Names carry the creating pid and a random suffix, so parallel
runs never collide; teardown kills whatever still runs inside and deletes the namespace (which
deletes the veth pair with it), on failure too; and each new namespace first deletes those a
killed run left behind (creator gone, nothing running inside).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.proc import run, spawn

PREFIX = "gs-"  # every namespace this module makes: gs-<creator pid>-<suffix>
POOL = ipaddress.ip_network("10.213.0.0/16")  # where the /30s come from, unless one is given
IP_TIMEOUT_S = 15.0


def ip_command() -> str:
    """The iproute2 binary; a clear error when it (or root) is missing."""
    found = shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if os.access(p, os.X_OK)), None)
    if found is None:
        raise RuntimeError("network namespace tests need iproute2: apt-get install -y iproute2")
    if os.geteuid() != 0:
        raise RuntimeError("network namespace tests need root (ip netns add)")
    return found


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[Any]:
    done = run([ip_command(), *args], timeout=IP_TIMEOUT_S, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


@dataclass(frozen=True)
class Laptop:
    """One namespace and its link to the host: the host end keeps `host_address`, the
    namespace end `laptop_address`, both in one /`prefix_len` subnet."""

    name: str
    host_if: str
    laptop_if: str
    host_address: str
    laptop_address: str
    prefix_len: int

    def argv(self, cmd: Sequence[str]) -> list[str]:
        """`cmd` as run inside the namespace."""
        return [ip_command(), "netns", "exec", self.name, *map(str, cmd)]

    def run(self, cmd: Sequence[str], timeout: float = 60.0,
            **popen_args: Any) -> subprocess.CompletedProcess[Any]:
        """Run `cmd` inside the namespace to the end (backend.proc.run: it dies with us)."""
        return run(self.argv(cmd), timeout=timeout, **popen_args)

    def spawn(self, cmd: Sequence[str], **popen_args: Any) -> subprocess.Popen[Any]:
        """Start `cmd` inside the namespace (backend.proc.spawn: it dies with us); teardown
        SIGKILLs it if it still runs."""
        return spawn(self.argv(cmd), **popen_args)

    def pids(self) -> list[int]:
        """Processes running inside the namespace now."""
        done = _ip("netns", "pids", self.name, check=False)
        return [int(p) for p in done.stdout.split() if p.isdigit()]

    def exec_wrapper(self, program: str, directory: Path) -> Path:
        """A script that execs `program` inside the namespace with the arguments it gets, for
        tools that start a program by path themselves (Playwright's `executable_path`)."""
        path = Path(directory) / f"{Path(program).name}-in-{self.name}"
        path.write_text(f"#!/bin/sh\nexec {ip_command()} netns exec {self.name} {program} \"$@\"\n")
        path.chmod(0o755)
        return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    done = _ip("netns", "list", check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def sweep_leftovers() -> list[str]:
    """Delete namespaces of this module whose creator is gone and in which nothing runs (a
    run killed before its teardown); returns their names."""
    removed = []
    for name in _namespaces():
        parts = name.split("-")
        if not name.startswith(PREFIX) or len(parts) != 3 or not parts[1].isdigit():
            continue
        if _pid_alive(int(parts[1])) or _ip("netns", "pids", name, check=False).stdout.strip():
            continue
        if _ip("netns", "del", name, check=False).returncode == 0:
            removed.append(name)
    return removed


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 subnet this host has an address or a route in."""
    used: list[ipaddress.IPv4Network] = []
    for entry in json.loads(_ip("-j", "-4", "addr").stdout or "[]"):
        for info in entry.get("addr_info", []):
            used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}",
                                             strict=False))
    for route in json.loads(_ip("-j", "-4", "route").stdout or "[]"):
        dst = route.get("dst", "default")
        if dst != "default":
            used.append(ipaddress.ip_network(dst, strict=False))
    return used


def free_subnet(pool: ipaddress.IPv4Network = POOL) -> ipaddress.IPv4Network:
    """A random /30 of `pool` that overlaps nothing this host has an address or route in."""
    used = _used_networks()
    candidates = list(pool.subnets(new_prefix=30))
    for net in random.sample(candidates, min(len(candidates), 256)):
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError(f"no free /30 left in {pool}")


@contextmanager
def laptop_namespace(subnet: str | ipaddress.IPv4Network | None = None) -> Iterator[Laptop]:
    """Create a namespace and veth pair (host end: first address of `subnet`, laptop end:
    second; default a free /30 of POOL), with `lo` and both ends up; yield the Laptop; always
    kill what runs inside and delete both."""
    ip_command()
    sweep_leftovers()
    net = ipaddress.ip_network(subnet) if subnet is not None else free_subnet()
    if not isinstance(net, ipaddress.IPv4Network) or net.num_addresses < 4:
        raise ValueError(f"need an IPv4 subnet with two usable addresses, got {net}")
    host_addr, laptop_addr = list(net.hosts())[:2]
    suffix = secrets.token_hex(3)
    laptop = Laptop(name=f"{PREFIX}{os.getpid()}-{suffix}", host_if=f"gsh{suffix}",
                    laptop_if=f"gsl{suffix}", host_address=str(host_addr),
                    laptop_address=str(laptop_addr), prefix_len=net.prefixlen)
    try:
        _ip("netns", "add", laptop.name)
        _ip("link", "add", laptop.host_if, "type", "veth", "peer", "name", laptop.laptop_if)
        _ip("link", "set", laptop.laptop_if, "netns", laptop.name)
        _ip("addr", "add", f"{host_addr}/{net.prefixlen}", "dev", laptop.host_if)
        _ip("link", "set", laptop.host_if, "up")
        _ip("-n", laptop.name, "addr", "add", f"{laptop_addr}/{net.prefixlen}",
            "dev", laptop.laptop_if)
        _ip("-n", laptop.name, "link", "set", laptop.laptop_if, "up")
        _ip("-n", laptop.name, "link", "set", "lo", "up")
        yield laptop
    finally:
        _teardown(laptop)


def _teardown(laptop: Laptop) -> None:
    """Kill what runs inside, delete the namespace and the host end; never raises."""
    with contextlib.suppress(Exception):
        for pid in laptop.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        _ip("netns", "del", laptop.name, check=False)
    with contextlib.suppress(Exception):  # gone with its peer, unless the move never happened
        _ip("link", "del", laptop.host_if, check=False)
