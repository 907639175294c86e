"""The laptop namespace itself: a real second network stack that reaches this host from its own
address, and that leaves nothing behind however its test ends."""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from backend.netutil import wait_until
from backend.proc import run, spawn
from tests.system.room.netns import Laptop, _ip, _namespaces, laptop_namespace, sweep_leftovers

CONNECT = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)" \
          ".sendall(b'hello from the laptop')"


def _gone(laptop: Laptop) -> bool:
    links = _ip("-br", "link", check=False).stdout.split()
    return laptop.name not in _namespaces() and laptop.host_if not in links


def test_the_laptop_reaches_this_host_from_its_own_address(laptop: Laptop) -> None:
    shown = laptop.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    assert f"{laptop.laptop_address}/{laptop.prefix_len}" in shown and "lo " in shown
    with socket.create_server((laptop.host_address, 0)) as server:
        server.settimeout(15)
        port = server.getsockname()[1]
        got: dict[str, object] = {}

        def accept() -> None:
            conn, peer = server.accept()
            with conn:
                got["peer"], got["data"] = peer[0], conn.recv(100)

        thread = threading.Thread(target=accept)
        thread.start()
        done = laptop.run([sys.executable, "-c", CONNECT, laptop.host_address, str(port)],
                          timeout=30, capture_output=True, text=True)
        thread.join(20)
    assert done.returncode == 0, done.stderr
    assert got == {"peer": laptop.laptop_address, "data": b"hello from the laptop"}


def test_the_laptop_cannot_reach_this_hosts_loopback(laptop: Laptop) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        done = laptop.run([sys.executable, "-c", CONNECT, "127.0.0.1", str(port)], timeout=30,
                          capture_output=True, text=True)
    assert done.returncode != 0 and "Connection refused" in done.stderr


def test_teardown_kills_what_runs_inside_and_deletes_everything_on_failure() -> None:
    with pytest.raises(RuntimeError, match="the test failed"), laptop_namespace() as laptop:
        sleeper = laptop.spawn(["sleep", "600"])
        wait_until(lambda: laptop.pids() == [sleeper.pid], 10, what="sleep in the namespace")
        raise RuntimeError("the test failed")
    assert sleeper.wait(10) == -9
    assert _gone(laptop)


def test_a_namespace_left_by_a_killed_run_is_swept() -> None:
    dead = spawn(["true"])
    dead.wait()
    name = f"gs-{dead.pid}-dead00"
    _ip("netns", "add", name)
    try:
        busy = f"gs-{dead.pid}-busy00"  # something still runs in it: not ours to delete
        _ip("netns", "add", busy)
        sleeper = spawn(["ip", "netns", "exec", busy, "sleep", "600"])
        try:
            # `ip netns exec` enters the namespace after it starts: until then nothing runs
            # in it, and the sweep would rightly take it
            wait_until(lambda: _ip("netns", "pids", busy, check=False).stdout.strip(), 30,
                       what=f"sleep running inside {busy}")
            swept = sweep_leftovers()
            assert name in swept and busy not in swept
            assert name not in _namespaces() and busy in _namespaces()
        finally:
            sleeper.kill()
            sleeper.wait()
            _ip("netns", "del", busy, check=False)
    finally:
        _ip("netns", "del", name, check=False)


def test_two_laptops_get_different_names_and_subnets() -> None:
    with laptop_namespace() as one, laptop_namespace() as two:
        assert one.name != two.name and one.host_if != two.host_if
        assert one.host_address != two.host_address
        assert run(one.argv(["true"]), timeout=10).returncode == 0
    assert _gone(one) and _gone(two)


def test_a_subnet_can_be_chosen() -> None:
    with laptop_namespace("10.213.255.248/30") as laptop:
        assert (laptop.host_address, laptop.laptop_address) == ("10.213.255.249",
                                                                "10.213.255.250")
    with pytest.raises(ValueError), laptop_namespace("10.213.255.248/31"):
        pass
