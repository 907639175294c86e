"""The control plane's contract without a server: request models, one-line refusals, group
choices, the route table against the generated OpenAPI, tokens and the private control files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.routing import Route

from backend.contracts.control import (
    MAX_RATE,
    MAX_REPLICAS,
    CapacityRequest,
    NoFields,
    OptionsRequest,
    RateRequest,
    ReplicaOptions,
    ScaleRequest,
    resolve_assignor,
)
from backend.supervisor.api import _validation_line, create_app
from backend.control_files import (
    ControlNotFound,
    find_control_files,
    read_control_files,
    running_supervisors,
)
from backend.supervisor.auth import remove_control_files, token_matches, write_control_files
from backend.supervisor.processes import InvalidRequest, LaunchConfig, validate_options


def _refusal(model: type, raw: bytes) -> str:
    """The one line the API would answer for `raw` sent to a route taking `model`."""
    with pytest.raises(ValidationError) as err:
        model.model_validate_json(raw)
    errors = [{**e, "loc": ("body", *e["loc"])} for e in err.value.errors()]
    return _validation_line(RequestValidationError(errors))


@pytest.mark.parametrize("raw, fragment", [
    (b'{"replicas": -1}', "replicas: Input should be greater than or equal to 0, not -1"),
    (b'{"replicas": 10000}', f"less than or equal to {MAX_REPLICAS}, not 10000"),
    (b'{"replicas": "5"}', "valid integer, not '5'"),
    (b'{"replicas": 2.5}', "valid integer, not 2.5"),
    (b'{"replicas": true}', "valid integer, not True"),
    (b'{"replicas": null}', "valid integer, not None"),
    (b'{"replicas": [3]}', "valid integer, not list"),
    (b"{}", "missing field 'replicas'"),
    (b'{"replicas": 1, "force": true}', "unknown field 'force'"),
    (b'{"replicas": 1', "not valid JSON"),
])
def test_scale_request_refusals_are_one_line(raw: bytes, fragment: str) -> None:
    line = _refusal(ScaleRequest, raw)
    assert fragment in line and "\n" not in line


def test_scale_bounds_are_inclusive() -> None:
    assert ScaleRequest.model_validate_json(b'{"replicas": 0}').replicas == 0
    assert ScaleRequest.model_validate_json(
        f'{{"replicas": {MAX_REPLICAS}}}'.encode()).replicas == MAX_REPLICAS


def test_rate_takes_numbers_above_zero_and_finite() -> None:
    assert RateRequest.model_validate_json(b'{"rate": 5}').rate == 5.0
    assert RateRequest.model_validate_json(b'{"rate": 0.5}').rate == 0.5
    for bad in (b"0", b"-1", str(MAX_RATE * 2).encode(), b'"5"', b"false", b"1e999",
                b"NaN"):
        with pytest.raises(ValidationError):
            RateRequest.model_validate_json(b'{"rate": ' + bad + b"}")


def test_options_and_empty_bodies() -> None:
    assert OptionsRequest.model_validate_json(b"{}") == OptionsRequest()
    assert "classic" in _refusal(OptionsRequest, b'{"protocol": "eager"}')
    assert "valid boolean" in _refusal(OptionsRequest, b'{"exactly_once": "yes"}')
    assert "unknown field 'x'" in _refusal(NoFields, b'{"x": 1}')


def test_protocol_assignor_combinations() -> None:
    assert resolve_assignor("classic") == "range"
    assert resolve_assignor("consumer") == "uniform"
    assert validate_options("classic", "cooperative-sticky", True).exactly_once
    with pytest.raises(InvalidRequest, match="does not work with the consumer protocol"):
        validate_options("consumer", "roundrobin")
    with pytest.raises(InvalidRequest, match="unknown protocol"):
        validate_options("eager", "range")
    with pytest.raises(ValidationError):
        ReplicaOptions(protocol="consumer", assignor="roundrobin")


def test_every_route_is_in_the_openapi_and_the_reverse() -> None:
    """Derived from the app's own route table, so a new route cannot go undescribed."""
    app = create_app(supervisor=None, token="t")  # type: ignore[arg-type]
    doc = app.openapi()
    routes = {(r.path, m.lower()) for r in app.routes if isinstance(r, Route)
              for m in r.methods if m != "HEAD"}
    described = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert routes == described
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            ok = op["responses"]["200"]["content"]["application/json"]["schema"]
            assert ok.get("$ref") or ok.get("properties"), (path, method, ok)
            codes = set(op["responses"])
            if method == "post":
                assert {"401", "403", "409", "413", "422", "503"} <= codes, (path, codes)
                assert op.get("security"), path
            if "{name}" in path:
                assert "404" in codes, path
            for code, answer in op["responses"].items():
                if code != "200":
                    assert answer["content"]["application/json"]["schema"]["$ref"].endswith(
                        "/Refusal"), (path, code)


def test_launch_argv_carries_every_option(tmp_path) -> None:
    cfg = LaunchConfig(group="g", topic="t", bootstrap="127.0.0.1:1", spark_remote="sc://x:2",
                       command=("run-replica",), kafka_config=str(tmp_path / "c.properties"))
    argv = cfg.argv("ada", validate_options("consumer", "uniform", True))
    assert argv[0] == "run-replica"
    joined = " ".join(argv)
    for part in ("--id ada", "--group g", "--topic t", "--protocol consumer",
                 "--assignor uniform", "--exactly-once", "--bootstrap 127.0.0.1:1",
                 "--spark-remote sc://x:2", f"--kafka-config {tmp_path / 'c.properties'}"):
        assert part in joined
    assert "--exactly-once" not in cfg.argv("ada", ReplicaOptions())


def test_token_matches_only_exact_bearer() -> None:
    token = "s3cret-token"
    assert token_matches(f"Bearer {token}", token)
    assert token_matches(f"bearer {token}", token)
    for header in (None, "", token, f"Basic {token}", f"Bearer {token}x", "Bearer ",
                   f"Bearer {token[:-1]}"):
        assert not token_matches(header, token), header


def test_control_files_are_private_and_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GROUPSCOPE_CACHE", str(tmp_path / "cache"))
    old = os.umask(0o000)  # even a permissive umask must not widen them
    try:
        write_control_files(tmp_path, "http://127.0.0.1:1234", "tok", pid=4242)
    finally:
        os.umask(old)
    for name in ("control.json", "control.token"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
    assert json.loads((tmp_path / "control.json").read_text()) == {
        "url": "http://127.0.0.1:1234", "pid": 4242, "bootstrap": None, "kafka_config": None}
    ep = read_control_files(tmp_path)
    assert (ep.url, ep.pid, ep.token) == ("http://127.0.0.1:1234", 4242, "tok")
    remove_control_files(tmp_path, pid=1)  # someone else's: left alone
    assert (tmp_path / "control.token").exists()
    remove_control_files(tmp_path, pid=4242)
    assert not (tmp_path / "control.token").exists()
    with pytest.raises(ControlNotFound, match="groupscope backend"):
        read_control_files(tmp_path)


def test_ctl_finds_the_running_supervisor_from_any_directory(tmp_path: Path,
                                                             monkeypatch) -> None:
    monkeypatch.setenv("GROUPSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GROUPSCOPE_DATA", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ControlNotFound, match="no running supervisor"):
        find_control_files()
    stack = tmp_path / "stack"
    write_control_files(stack, "http://127.0.0.1:1", "tok", pid=os.getpid(),
                        bootstrap="127.0.0.1:9", kafka_config=None)
    found = find_control_files()
    assert (found.url, found.data_dir, found.bootstrap) == (
        "http://127.0.0.1:1", stack.resolve(), "127.0.0.1:9")
    assert not (elsewhere / ".groupscope").exists()  # looking created nothing here
    # a second one running: ambiguous, and the error names both
    write_control_files(tmp_path / "other", "http://127.0.0.1:2", "tok", pid=os.getppid())
    with pytest.raises(ControlNotFound, match="2 supervisors are running") as err:
        find_control_files()
    assert str(stack.resolve()) in str(err.value)
    assert find_control_files(stack).url == "http://127.0.0.1:1"
    # one that died is forgotten
    dead = _dead_pid()
    write_control_files(tmp_path / "dead", "http://127.0.0.1:3", "tok", pid=dead)
    assert {ep.pid for ep in running_supervisors()} == {os.getpid(), os.getppid()}
    assert not (tmp_path / "cache" / "running" / f"{dead}.json").exists()


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("raw, fragment", [
    (b"{}", "missing field 'max_rate'"),
    (b'{"max_rate": 0}', "greater than 0, not 0"),
    (b'{"max_rate": -5}', "greater than 0, not -5"),
    (f'{{"max_rate": {MAX_RATE * 2}}}'.encode(), f"less than or equal to {MAX_RATE:g}"),
    (b'{"max_rate": "50"}', "valid number, not '50'"),
    (b'{"max_rate": true}', "valid number, not True"),
    (b'{"max_rate": 50, "replicas": 2}', "unknown field 'replicas'"),
])
def test_capacity_refusals_are_one_line(raw: bytes, fragment: str) -> None:
    line = _refusal(CapacityRequest, raw)
    assert fragment in line and "\n" not in line


def test_capacity_takes_a_rate_or_null_for_off() -> None:
    assert CapacityRequest.model_validate_json(b'{"max_rate": 50}').max_rate == 50.0
    assert CapacityRequest.model_validate_json(b'{"max_rate": 0.5}').max_rate == 0.5
    assert CapacityRequest.model_validate_json(b'{"max_rate": null}').max_rate is None
    assert OptionsRequest.model_validate_json(b'{"static": true}').static is True
    assert "valid boolean" in _refusal(OptionsRequest, b'{"static": "yes"}')
    with pytest.raises(InvalidRequest, match="greater than 0"):
        validate_options("classic", None, max_rate=0)


def test_launch_argv_carries_static_and_the_cap() -> None:
    cfg = LaunchConfig(group="g", topic="t", bootstrap="127.0.0.1:1", command=("run",))
    argv = cfg.argv("ada", validate_options("classic", None, static=True, max_rate=50))
    assert argv[argv.index("--max-rate") + 1] == "50.0" and "--static" in argv
    plain = cfg.argv("ada", ReplicaOptions())
    assert "--static" not in plain and "--max-rate" not in plain


class _CapacityStub:
    """Just enough supervisor for the /capacity route: records what reached it."""

    def __init__(self) -> None:
        self.asked: list[float | None] = []

    def set_capacity(self, max_rate: float | None) -> tuple[ReplicaOptions, list[str]]:
        self.asked.append(max_rate)
        return ReplicaOptions(max_rate=max_rate), ["ada", "bruno"]


def test_client_and_route_carry_a_cap_and_off_over_http() -> None:
    from backend.supervisor.api import ControlServer
    from backend.supervisor.client import ControlClient, ControlError

    stub = _CapacityStub()
    server = ControlServer(stub, "tok")  # type: ignore[arg-type]
    server.start_background()
    try:
        client = ControlClient(server.url, "tok", timeout=10)
        answer = client.set_capacity(50)
        assert answer.options.max_rate == 50.0 and answer.restarting == ("ada", "bruno")
        assert client.set_capacity(None).options.max_rate is None  # null travels as null
        with pytest.raises(ControlError, match="missing field 'max_rate'") as err:
            client.request("POST", "/capacity", raw=b"{}")
        assert err.value.status == 422
        with pytest.raises(ControlError) as err:
            ControlClient(server.url, None, timeout=10).set_capacity(5)
        assert err.value.status == 401
        assert stub.asked == [50.0, None]  # refusals reached nothing
    finally:
        server.stop()
