"""free_port: a port the OS offers, never one this process handed out or the environment
promised to a service. The OS is replaced by a scripted socket here: what is tested is what
free_port does with the port it is offered, which a real kernel offers at random."""

from __future__ import annotations

import itertools

import pytest

from backend import netutil


class _Offers:
    """Plays socket.socket for free_port: each bind(0) is offered the next scripted port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = iter(ports)

    def __call__(self, *_args: object) -> _Offers:
        return self

    def __enter__(self) -> _Offers:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def bind(self, _address: tuple[str, int]) -> None:
        self.port = next(self.ports)

    def getsockname(self) -> tuple[str, int]:
        return "127.0.0.1", self.port


@pytest.fixture
def offers(monkeypatch):
    monkeypatch.setattr(netutil, "_handed_out", {})
    monkeypatch.setattr(netutil, "port_pool", lambda: range(0))  # the OS's offers alone
    for key in list(netutil.os.environ):
        if key.startswith("GROUPSCOPE_") and key.endswith("PORT"):
            monkeypatch.delenv(key)

    def script(ports: list[int]) -> None:
        monkeypatch.setattr(netutil.socket, "socket", _Offers(ports))
    return script


def test_a_port_offered_twice_is_handed_out_once(offers):
    offers([41000, 41000, 41001])
    assert [netutil.free_port(), netutil.free_port()] == [41000, 41001]


def test_a_port_the_environment_promised_to_a_service_is_not_handed_out(offers, monkeypatch):
    monkeypatch.setenv("GROUPSCOPE_SPARK_PORT", "41000")
    monkeypatch.setenv("GROUPSCOPE_ROOM_KAFKA_PORT", "41001")
    monkeypatch.setenv("GROUPSCOPE_REPORTS", "41002")  # not a port
    offers([41000, 41001, 41002])
    assert netutil.promised_ports() == {41000, 41001}
    assert netutil.free_port() == 41002


def test_no_free_port_says_so_instead_of_looping(offers, monkeypatch):
    monkeypatch.setenv("GROUPSCOPE_WEB_PORT", "41000")
    offers([41000] * netutil.FREE_PORT_TRIES)
    with pytest.raises(RuntimeError, match=r"no free port on 127\.0\.0\.1"):
        netutil.free_port()


def test_real_free_ports_are_distinct_and_bindable():
    ports = [netutil.free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    for port in ports[:5]:
        netutil.ensure_port_free("127.0.0.1", port, "test")


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.10", False),
    ("watch.example.com", False),
])
def test_only_addresses_that_reach_this_machine_alone_are_loopback(address, loopback) -> None:
    assert netutil.is_loopback(address) is loopback


def test_free_ports_are_below_the_ephemeral_range_and_lanes_never_share_one():
    whole = netutil.port_pool(ephemeral_start=32768, free_slice="")
    assert whole == range(netutil.LOWEST_PORT, 32768)  # no outgoing connection takes these
    slices = [netutil.port_pool(ephemeral_start=32768, free_slice=f"{i}/4") for i in range(4)]
    assert all(len(s) > 1000 for s in slices)
    assert all(a.stop <= b.start for a, b in itertools.pairwise(slices))
    assert slices[0].start == netutil.LOWEST_PORT and slices[-1].stop <= 32768
    # no room below the ephemeral range: the OS chooses, as before
    assert netutil.port_pool(ephemeral_start=netutil.LOWEST_PORT + 10, free_slice="") == range(0)
    with pytest.raises(ValueError, match="GROUPSCOPE_FREE_SLICE='4/4': expected i/n"):
        netutil.port_pool(ephemeral_start=32768, free_slice="4/4")


def test_a_free_port_comes_from_this_processs_slice(monkeypatch):
    mine = netutil.port_pool(ephemeral_start=32768, free_slice="2/4")
    monkeypatch.setattr(netutil, "port_pool", lambda: mine)
    assert all(netutil.free_port() in mine for _ in range(5))


def test_a_port_handed_out_long_ago_may_be_handed_out_again(offers, monkeypatch):
    offers([41000, 41000, 41001, 41000])
    assert netutil.free_port() == 41000
    assert netutil.free_port() == 41001  # 41000 was offered again, too soon
    clock = netutil.time.monotonic() + netutil.HANDED_OUT_KEEP_S
    monkeypatch.setattr(netutil.time, "monotonic", lambda: clock)
    assert netutil.free_port() == 41000
