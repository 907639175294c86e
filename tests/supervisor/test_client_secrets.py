"""The control token never appears in a repr: pytest prints a failed test's locals, and a
log line may format a client or an endpoint."""

from __future__ import annotations

from pathlib import Path

from backend.control_files import ControlEndpoint
from backend.supervisor.client import ControlClient

TOKEN = "tok-3f9a-never-shown"


def test_a_client_and_an_endpoint_keep_their_token_out_of_repr() -> None:
    client = ControlClient("http://127.0.0.1:1", TOKEN)
    endpoint = ControlEndpoint("http://127.0.0.1:1", 1, TOKEN, Path("."))
    assert client.token == endpoint.token == TOKEN
    for shown in (repr(client), str(client), repr(endpoint), f"{endpoint}"):
        assert TOKEN not in shown, shown
