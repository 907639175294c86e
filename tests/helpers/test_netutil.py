"""free_port: a port the OS offers, never one this process handed out or the environment
promised to a service. The OS is replaced by a scripted socket here: what is tested is what
free_port does with the port it is offered, which a real kernel offers at random."""

from __future__ import annotations

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
    monkeypatch.setattr(netutil, "_handed_out", set())
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
