"""The control plane's contract without a server: request models, one-line refusals, group
choices, the route table against the generated OpenAPI, tokens and the private control files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.routing import Route

from backend.contracts.control import (
    ALL_ASSIGNORS,
    MAX_RATE,
    MAX_REPLICAS,
    PROTOCOL_ASSIGNORS,
    CapacityRequest,
    KeepProtocolOptions,
    NoFields,
    OptionsRequest,
    RateRequest,
    ReplicaOptions,
    ScaleRequest,
    options_request,
    resolve_assignor,
)
from backend.control_files import (
    ControlNotFound,
    find_control_files,
    read_control_files,
    running_supervisors,
)
from backend.pool.processes import InvalidRequest, LaunchConfig, validate_options
from backend.supervisor.api import _validation_line, create_app
from backend.supervisor.auth import remove_control_files, token_matches, write_control_files


def _validate(model: Any, raw: bytes) -> Any:
    """`raw` as the route taking `model` (a model class or a union of them) reads it."""
    return TypeAdapter(model).validate_json(raw)


def _refusal(model: Any, raw: bytes) -> str:
    """The one line the API would answer for `raw` sent to a route taking `model`."""
    with pytest.raises(ValidationError) as err:
        _validate(model, raw)
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
    assert _validate(OptionsRequest, b"{}") == KeepProtocolOptions()
    assert _validate(OptionsRequest, b'{"protocol": null}') == KeepProtocolOptions()
    assert _refusal(OptionsRequest, b'{"protocol": "eager"}') == \
        "protocol: Input should be 'classic' or 'consumer', not 'eager'"
    assert _refusal(OptionsRequest, b'{"exactly_once": "yes"}') == \
        "exactly_once: Input should be a valid boolean, not 'yes'"
    assert _refusal(OptionsRequest, b'{"protocol": "classic", "x": 1}') == "unknown field 'x'"
    assert "unknown field 'x'" in _refusal(NoFields, b'{"x": 1}')


def test_a_body_that_leaves_fields_out_keeps_their_meaning() -> None:
    """Left out: the protocol in force (its assignor checked by the server), or, after a
    protocol switch, that protocol's default assignor; and the other options as they are."""
    kept = _validate(OptionsRequest, b'{"assignor": "roundrobin", "static": true}')
    assert (kept.protocol, kept.assignor, kept.exactly_once, kept.static) == (
        None, "roundrobin", None, True)
    for assignor in ALL_ASSIGNORS:
        assert _validate(OptionsRequest, json.dumps({"assignor": assignor}).encode()
                         ).assignor == assignor
    switch = _validate(OptionsRequest, b'{"protocol": "consumer"}')
    assert (switch.protocol, switch.assignor, switch.exactly_once) == ("consumer", None, None)


def test_uniform_with_the_classic_protocol_is_refused_by_the_model() -> None:
    assert _refusal(OptionsRequest, b'{"protocol": "classic", "assignor": "uniform"}') == (
        "assignor 'uniform' does not work with the classic protocol; choose one of "
        + ", ".join(PROTOCOL_ASSIGNORS["classic"]))
    for protocol, assignors in PROTOCOL_ASSIGNORS.items():
        for assignor in assignors:
            body = _validate(OptionsRequest, json.dumps(
                {"protocol": protocol, "assignor": assignor}).encode())
            assert (body.protocol, body.assignor) == (protocol, assignor)
        for other in set(ALL_ASSIGNORS) - set(assignors):
            assert "does not work with" in _refusal(OptionsRequest, json.dumps(
                {"protocol": protocol, "assignor": other}).encode())


def test_the_openapi_lists_each_protocols_assignors() -> None:
    """The protocol -> assignor rule is in /openapi.json: one branch per protocol, picked by
    `protocol`, whose assignor choices are that protocol's and no other."""
    doc = create_app(supervisor=None, token="t").openapi()  # type: ignore[arg-type]
    schemas = doc["components"]["schemas"]
    body = doc["paths"]["/options"]["post"]["requestBody"]["content"]["application/json"][
        "schema"]
    named = next(alt for alt in body["oneOf"] if "discriminator" in alt)
    assert named["discriminator"]["propertyName"] == "protocol"
    mapping = named["discriminator"]["mapping"]
    assert set(mapping) == set(PROTOCOL_ASSIGNORS)
    for protocol, ref in mapping.items():
        branch = schemas[ref.rsplit("/", 1)[1]]
        assert branch["properties"]["protocol"]["const"] == protocol
        assert "protocol" in branch["required"]
        choices = branch["properties"]["assignor"]["anyOf"][0]["enum"]
        assert tuple(choices) == PROTOCOL_ASSIGNORS[protocol]


def test_options_request_builds_each_branch_unchecked() -> None:
    """What the client sends: only the fields given; a choice that cannot work goes as it is,
    for the server to refuse in its own words."""
    assert options_request(None, "range", True).model_dump(exclude_none=True) == {
        "assignor": "range", "exactly_once": True}
    assert options_request("consumer", static=False).model_dump(exclude_none=True) == {
        "protocol": "consumer", "static": False}
    assert options_request("classic", "uniform").model_dump(exclude_none=True) == {
        "protocol": "classic", "assignor": "uniform"}


def test_a_commit_mode_is_one_of_the_table_and_exactly_once_its_older_spelling() -> None:
    from backend.contracts import COMMIT_MODES
    from backend.contracts.control import resolve_commit

    for mode in COMMIT_MODES:
        body = _validate(OptionsRequest, json.dumps({"commit": mode}).encode())
        assert body.commit_mode == mode
        opts = ReplicaOptions(commit=mode)
        assert opts.exactly_once == (mode == "transactional")
        # what the server answers parses back to the same options
        assert ReplicaOptions.model_validate_json(opts.model_dump_json()) == opts
    assert _validate(OptionsRequest, b'{"exactly_once": true}').commit_mode == "transactional"
    assert _validate(OptionsRequest, b'{"exactly_once": false}').commit_mode == "after-summary"
    assert _validate(OptionsRequest, b"{}").commit_mode is None  # keeps the mode in force
    assert "Input should be 'after-summary', 'transactional', 'auto' or 'before-processing'" \
        in _refusal(OptionsRequest, b'{"commit": "sometimes"}')
    assert _refusal(OptionsRequest, b'{"exactly_once": false, "commit": "auto"}') == (
        "exactly-once off means commit after-summary, not auto: give one of them")
    assert ReplicaOptions(exactly_once=True).commit == "transactional"
    assert resolve_commit(None, None) is None
    with pytest.raises(ValueError, match="unknown commit mode 'x'; choose one of after-summary"):
        resolve_commit("x", None)
    assert validate_options("classic", None, commit="auto").commit == "auto"
    with pytest.raises(InvalidRequest, match="means commit transactional, not auto"):
        validate_options("classic", None, True, commit="auto")


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
                 "--assignor uniform", "--commit transactional", "--bootstrap 127.0.0.1:1",
                 "--spark-remote sc://x:2", f"--kafka-config {tmp_path / 'c.properties'}"):
        assert part in joined
    assert "--commit" not in cfg.argv("ada", ReplicaOptions())  # the replica's own default
    assert "--commit auto" in " ".join(cfg.argv("ada", ReplicaOptions(commit="auto")))


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
    assert _validate(OptionsRequest, b'{"static": true}').static is True
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


class _OptionsStub:
    """Just enough supervisor for the /options and /scale routes: records what reached it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str | None, bool | None, bool | None,
                               str | None]] = []

    def set_options(self, protocol: str | None, assignor: str | None,
                    exactly_once: bool | None, static: bool | None = None,
                    commit: str | None = None) -> ReplicaOptions:
        self.asked.append((protocol, assignor, exactly_once, static, commit))
        chosen = protocol or "classic"
        return ReplicaOptions(protocol=chosen, assignor=resolve_assignor(chosen, assignor),
                              commit=commit or "after-summary")

    def scale(self, n: int) -> dict[str, list[str]]:
        self.asked.append((None, None, None, None, None))
        return {"started": [], "stopping": []}


def test_options_over_http_take_every_pair_and_refuse_the_rest_with_422() -> None:
    from backend.supervisor.api import ControlServer
    from backend.supervisor.client import ControlClient, ControlError

    stub = _OptionsStub()
    server = ControlServer(stub, "tok")  # type: ignore[arg-type]
    server.start_background()
    try:
        client = ControlClient(server.url, "tok", timeout=10)
        pairs = [(p, a) for p, assignors in PROTOCOL_ASSIGNORS.items() for a in assignors]
        for protocol, assignor in pairs:
            assert client.set_options(protocol, assignor).assignor == assignor
        assert client.set_options(exactly_once=True).exactly_once  # the older spelling
        assert client.set_options(commit="before-processing").commit == "before-processing"
        with pytest.raises(ControlError, match="'uniform' does not work with the classic") \
                as err:
            client.set_options("classic", "uniform")
        assert err.value.status == 422
        with pytest.raises(ControlError, match="exactly-once on means commit transactional, "
                                               "not auto: give one of them") as err:
            client.set_options(exactly_once=True, commit="auto")
        assert err.value.status == 422
        assert stub.asked == [(p, a, None, None, None) for p, a in pairs] + [
            (None, None, None, None, "transactional"),
            (None, None, None, None, "before-processing")]
    finally:
        server.stop()


@pytest.mark.parametrize("raw, why", [
    (b"\x80\x81{}", "it is not UTF-8 text"),
    (b"[" * 5000, "it is nested too deeply"),
    (b'{"replicas": 1', "Expecting"),
])
def test_a_body_that_is_not_json_is_refused_with_422(raw: bytes, why: str) -> None:
    """Like every other invalid body, whatever json.loads stumbled on: one status, one line."""
    from backend.supervisor.api import ControlServer
    from backend.supervisor.client import ControlClient, ControlError

    stub = _OptionsStub()
    server = ControlServer(stub, "tok")  # type: ignore[arg-type]
    server.start_background()
    try:
        client = ControlClient(server.url, "tok", timeout=10)
        for path in ("/scale", "/options"):
            with pytest.raises(ControlError, match="request body is not valid JSON") as err:
                client.request("POST", path, raw=raw)
            assert err.value.status == 422 and why in str(err.value)
        assert stub.asked == []
    finally:
        server.stop()
