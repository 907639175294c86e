"""Request validation, token checks and the private control files: pure logic, no server."""

from __future__ import annotations

import json
import os
import stat

import pytest

from backend.supervisor.auth import (
    ControlNotFound,
    read_control_files,
    remove_control_files,
    token_matches,
    write_control_files,
)
from backend.supervisor.models import ReplicaOptions
from backend.supervisor.processes import InvalidRequest, LaunchConfig, validate_options
from backend.supervisor.validation import (
    MAX_BODY_BYTES,
    RequestError,
    only_fields,
    optional_bool,
    optional_choice,
    parse_body,
    require_int,
    require_number,
)


def test_parse_body_accepts_objects_and_empty() -> None:
    assert parse_body(b"") == {}
    assert parse_body(b"  \n") == {}
    assert parse_body(b'{"replicas": 3}') == {"replicas": 3}


@pytest.mark.parametrize("raw, fragment", [
    (b"{", "not valid JSON"),
    (b"replicas=3", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[1, 2]", "not an array"),
    (b"3", "not the number 3"),
    (b'"x"', "not a string"),
    (b"null", "not null"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # > MAX_BODY_BYTES is 413, see below
])
def test_parse_body_refuses_non_objects(raw: bytes, fragment: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_body(raw)
    if len(raw) > MAX_BODY_BYTES:
        assert err.value.status == 413
        return
    assert err.value.status == 400
    assert fragment in str(err.value)


def test_deeply_nested_json_is_a_400_not_a_crash() -> None:
    depth = MAX_BODY_BYTES // 2 - 1
    with pytest.raises(RequestError) as err:
        parse_body(b'{"a":' * (depth // 5) + b"1" + b"}" * (depth // 5))
    assert err.value.status == 400 and "nested too deeply" in str(err.value)
    assert require_int({"n": 10**30}, "n", 0, 10**31) == 10**30
    with pytest.raises(RequestError, match="not the number inf"):
        require_int(parse_body(b'{"n": 1e400}'), "n", 0, 64)


def test_parse_body_refuses_oversized() -> None:
    with pytest.raises(RequestError) as err:
        parse_body(b" " * (MAX_BODY_BYTES + 1))
    assert err.value.status == 413


@pytest.mark.parametrize("value, fragment", [
    (-1, "between 0 and 64, not -1"),
    (10_000, "between 0 and 64, not 10000"),
    ("3", "whole number, not a string"),
    (3.0, "whole number, not the number 3.0"),
    (True, "whole number, not a boolean"),
    (None, "whole number, not null"),
    ([3], "whole number, not an array"),
])
def test_require_int_refuses(value: object, fragment: str) -> None:
    with pytest.raises(RequestError) as err:
        require_int({"replicas": value}, "replicas", 0, 64)
    assert err.value.status == 400
    assert fragment in str(err.value)


def test_require_int_bounds_are_inclusive_and_missing_is_named() -> None:
    assert require_int({"n": 0}, "n", 0, 64) == 0
    assert require_int({"n": 64}, "n", 0, 64) == 64
    with pytest.raises(RequestError, match="missing field 'n'"):
        require_int({}, "n", 0, 64)


def test_require_number() -> None:
    assert require_number({"rate": 5}, "rate", 0.0, 100.0) == 5.0
    assert require_number({"rate": 0.5}, "rate", 0.0, 100.0) == 0.5
    assert require_number({"rate": 0}, "rate", 0.0, 100.0, lo_inclusive=True) == 0.0
    for bad in (0, -1, 101, float("nan"), float("inf"), "5", False):
        with pytest.raises(RequestError):
            require_number({"rate": bad}, "rate", 0.0, 100.0)


def test_only_fields_and_optionals() -> None:
    only_fields({"replicas": 1}, ("replicas",))
    with pytest.raises(RequestError, match=r"unknown field.*replica"):
        only_fields({"replica": 1}, ("replicas",))
    with pytest.raises(RequestError, match="expected no fields"):
        only_fields({"x": 1}, ())
    assert optional_bool({}, "exactly_once") is None
    assert optional_bool({"exactly_once": False}, "exactly_once") is False
    with pytest.raises(RequestError, match="true or false"):
        optional_bool({"exactly_once": "yes"}, "exactly_once")
    assert optional_choice({"p": "classic"}, "p", ("classic", "consumer")) == "classic"
    with pytest.raises(RequestError, match="one of classic, consumer"):
        optional_choice({"p": "eager"}, "p", ("classic", "consumer"))
    with pytest.raises(RequestError, match="must be a string"):
        optional_choice({"p": 1}, "p", ("classic",))


def test_protocol_assignor_combinations() -> None:
    validate_options(ReplicaOptions("classic", "cooperative-sticky", True))
    validate_options(ReplicaOptions("consumer", "uniform", False))
    with pytest.raises(InvalidRequest, match="does not work with the consumer protocol"):
        validate_options(ReplicaOptions("consumer", "roundrobin"))
    with pytest.raises(InvalidRequest, match="unknown protocol"):
        validate_options(ReplicaOptions("eager", "range"))


def test_launch_argv_carries_every_option(tmp_path) -> None:
    cfg = LaunchConfig(group="g", topic="t", bootstrap="127.0.0.1:1", spark_remote="sc://x:2",
                       command=("run-replica",), kafka_config=str(tmp_path / "c.properties"))
    argv = cfg.argv("ada", ReplicaOptions("consumer", "uniform", True))
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


def test_control_files_are_private_and_round_trip(tmp_path) -> None:
    old = os.umask(0o000)  # even a permissive umask must not widen them
    try:
        write_control_files(tmp_path, "http://127.0.0.1:1234", "tok", pid=4242)
    finally:
        os.umask(old)
    for name in ("control.json", "control.token"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
    assert json.loads((tmp_path / "control.json").read_text()) == {
        "url": "http://127.0.0.1:1234", "pid": 4242}
    ep = read_control_files(tmp_path)
    assert (ep.url, ep.pid, ep.token) == ("http://127.0.0.1:1234", 4242, "tok")
    remove_control_files(tmp_path, pid=1)  # someone else's: left alone
    assert (tmp_path / "control.token").exists()
    remove_control_files(tmp_path, pid=4242)
    assert not (tmp_path / "control.token").exists()
    with pytest.raises(ControlNotFound, match="groupscope backend"):
        read_control_files(tmp_path)
