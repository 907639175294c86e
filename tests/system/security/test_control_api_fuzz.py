"""Property-based fuzzing of a real `groupscope backend`'s control API, driven by the OpenAPI
document the app generates.

One supervisor process (no Spark needed: its replica command is the stand-in member, it
starts none, and it runs no fleet). The routes, and well-formed bodies generated from each
route's request schema, come from the app's own OpenAPI document; malformed methods, paths,
headers and bodies are mixed in. Properties: no answer is ever a 5xx; every status an
operation answers is one its OpenAPI entry lists, so a client generated from the document
knows every answer; without the valid token, or with a foreign Host header, nothing changes
(replicas, options, fleet, partitions compared before and after), even for a perfectly valid
request; with the token, a body the schema of `/options` allows is accepted; the socket is
bound to loopback only and a non-loopback address of this machine is refused.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.contracts.control import PROTOCOL_ASSIGNORS, GroupChoiceError, resolve_commit
from backend.supervisor.api import create_app
from tests.supervisor.conftest import REPO, Backend, start_backend, stop_backend

STANDIN = [sys.executable, str(REPO / "tests" / "supervisor" / "standin_member.py")]
EXAMPLES = 150  # per property; keeps the module well under 90 s
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

OPENAPI: dict[str, Any] = create_app(supervisor=None, token="-").openapi()  # type: ignore


def _resolve(schema: Any) -> Any:
    """`schema` with every $ref replaced by the component it names."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _resolve(OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
        return {k: _resolve(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolve(v) for v in schema]
    return schema


def _request_schema(op: dict[str, Any]) -> dict[str, Any]:
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    return _resolve(body.get("schema", {"type": "object", "maxProperties": 0}))


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for the small JSON-schema subset pydantic writes for these bodies.

    By hand because hypothesis-jsonschema no longer works with current Hypothesis; an
    unsupported keyword fails loudly here rather than generating nothing.
    """
    if "anyOf" in schema or "oneOf" in schema:  # a oneOf's `discriminator` is only a hint
        return st.one_of([from_schema(alt) for alt in schema.get("anyOf", schema.get("oneOf"))])
    if "enum" in schema or "const" in schema:
        return st.sampled_from(schema.get("enum") or [schema["const"]])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":  # OpenAPI 3.1: an exclusive bound is the bound itself
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(2 ** 40) - 1) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", 2 ** 40 + 1) - 1)
        return st.integers(int(low), int(high))
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0),
                       max_size=min(schema.get("maxLength", 40), 40))
    if kind == "array":
        return st.lists(from_schema(schema["items"]), min_size=schema.get("minItems", 0),
                        max_size=min(schema.get("maxItems", 5), 5))
    if kind == "number":  # OpenAPI 3.1: exclusiveMinimum is the bound itself
        return st.floats(schema.get("minimum", schema.get("exclusiveMinimum")),
                         schema.get("maximum"), exclude_min="exclusiveMinimum" in schema,
                         allow_nan=False, allow_infinity=False)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in props.items() if k in required},
            optional={k: from_schema(v) for k, v in props.items() if k not in required})
    raise NotImplementedError(f"no strategy for schema {schema}")


def _fields(schema: dict[str, Any]) -> list[str]:
    alternatives = schema.get("anyOf", schema.get("oneOf"))
    if alternatives:
        return [f for alt in alternatives for f in _fields(alt)]
    return list(schema.get("properties", {}))


OPERATIONS = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"), ops)
              for template, ops in OPENAPI["paths"].items()]


def _assert_documented(method: str, path: str, status: int) -> None:
    """`status` is in the responses of the operation that `method` `path` reached, if any
    (a path no route matches, or a method a route does not take, is no operation)."""
    target = unquote(re.split(r"[?#]", path, maxsplit=1)[0])  # what the router matches
    for pattern, ops in OPERATIONS:
        op = ops.get(method.lower())
        if op is not None and pattern.match(target):
            assert str(status) in op["responses"], (
                f"{method} {path} answered {status}, which /openapi.json does not list "
                f"(it lists {sorted(op['responses'])})")
            return


ROUTES = [p.replace("{name}", "r1") for p in OPENAPI["paths"]]
REQUEST_SCHEMAS = {p.replace("{name}", "r1"): _request_schema(ops["post"])
                   for p, ops in OPENAPI["paths"].items() if "post" in ops}
CHANGING = sorted(REQUEST_SCHEMAS)
FIELDS = sorted({f for schema in REQUEST_SCHEMAS.values() for f in _fields(schema)} | {"n"})
valid_requests = st.sampled_from(CHANGING).flatmap(lambda path: st.tuples(
    st.just(path), from_schema(REQUEST_SCHEMAS[path]).map(lambda v: json.dumps(v).encode())))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=3).map(
        lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.just(b'{"n": NaN}'), st.just(b'{"rate": 1e999}'), st.just(b"[" * 5000),
)
odd_paths = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e),
                    max_size=40).map(lambda s: "/" + s)
paths = st.one_of(st.sampled_from(ROUTES), odd_paths,
                  st.sampled_from(ROUTES).map(lambda p: p + "?x=1"),
                  st.text(min_size=1, max_size=12).map(
                      lambda s: "/replicas/" + s.encode("utf-8", "surrogatepass").hex() + "/kill"))
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS",
                           "TRACE", "CONNECT", "BREW"])


def _status_of_interest(b: Backend) -> dict:
    """What a request could change: replicas, options, fleet settings, partitions."""
    s = b.client.status().model_dump()
    fleet = s["fleet"] or {}
    return {"replicas": sorted((r["name"], r["state"]) for r in s["replicas"]),
            "options": s["options"], "partitions": s["partitions"],
            "fleet": {k: fleet.get(k) for k in ("running", "rate", "streams")}}


def _request(b: Backend, method: str, path: str, body: bytes | None,
             headers: dict[str, str]) -> int:
    host, port = b.client.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


@pytest.fixture(scope="module")
def backend(kafka, tmp_path_factory) -> Iterator[Backend]:
    suffix = uuid.uuid4().hex[:8]
    b = start_backend(kafka, tmp_path_factory.mktemp("fuzz"), f"fuzz-{suffix}",
                      f"fuzz-{suffix}", "--replicas", "0", "--no-fleet",
                      "--stop-grace", "5", replica_command=STANDIN)
    try:
        yield b
    finally:
        stop_backend(b)
        log = b.log.read_text(errors="replace") if b.log.exists() else ""
        token = (b.data_dir / "control.token").read_text().strip() \
            if (b.data_dir / "control.token").exists() else None
        assert "Traceback" not in log, log[-3000:]
        assert not token or token not in log


def _commit_agrees(commit: str | None, exactly_once: bool | None) -> bool:
    try:
        resolve_commit(commit, exactly_once)
    except GroupChoiceError:
        return False
    return True


@given(method=methods, path=paths, body=st.none() | bodies,
       auth=st.sampled_from([None, "Bearer ", "Bearer wrong", "Basic Zm9vOmJhcg==", "bearer",
                             "Bearer " + "x" * 64, "Bearer \u00e9"]),
       host=st.sampled_from([None, "127.0.0.1", "evil.example", "localhost:1"]))
@FUZZ
def test_without_a_valid_token_nothing_changes_and_nothing_breaks(
        backend, method, path, body, auth, host):
    before = _status_of_interest(backend)
    headers = {}
    if auth is not None:
        headers["Authorization"] = auth.encode("utf-8").decode("latin-1")
    if host is not None:
        headers["Host"] = host
    status = _request(backend, method, path, body, headers)
    assert status < 500, (method, path, body, status)
    _assert_documented(method, path, status)
    if method == "POST" and path.split("?")[0] in CHANGING:
        assert status in (401, 403, 413, 411), status
    assert _status_of_interest(backend) == before


@given(request=valid_requests, auth=st.sampled_from([None, "Bearer wrong", "Basic Zm9vOmJhcg=="]),
       foreign_host=st.sampled_from([None, "evil.example", "127.0.0.1.evil.example:80"]))
@FUZZ
def test_a_valid_request_without_the_token_or_from_a_foreign_host_changes_nothing(
        backend, request, auth, foreign_host):
    path, body = request
    before = _status_of_interest(backend)
    headers = {"Content-Type": "application/json"}
    if foreign_host is not None:  # a DNS-rebinding page may even hold the right token
        headers["Host"] = foreign_host
        headers["Authorization"] = "Bearer " + (backend.data_dir / "control.token"
                                                ).read_text().strip()
    elif auth is not None:
        headers["Authorization"] = auth
    status = _request(backend, "POST", path, body, headers)
    assert status in (401, 403), (path, body, status)
    _assert_documented("POST", path, status)
    assert _status_of_interest(backend) == before


@given(path=st.sampled_from(CHANGING), body=bodies)
@FUZZ
def test_with_the_token_bad_bodies_get_4xx_never_5xx(backend, path, body):
    token = (backend.data_dir / "control.token").read_text().strip()
    status = _request(backend, "POST", path, body, {"Authorization": f"Bearer {token}",
                                                    "Content-Type": "application/json"})
    assert status < 500, (path, body, status)
    _assert_documented("POST", path, status)


@given(body=from_schema(REQUEST_SCHEMAS["/options"]))
@FUZZ
def test_with_the_token_every_options_body_the_schema_allows_is_accepted(backend, body):
    """The refusals left are those the schema says it cannot know: an assignor sent without
    a protocol is checked against the protocol in force, and exactly_once (the older
    spelling) and a commit mode must agree."""
    token = (backend.data_dir / "control.token").read_text().strip()
    in_force = backend.client.status().options.protocol
    status = _request(backend, "POST", "/options", json.dumps(body).encode(),
                      {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    if body.get("protocol") is None and body.get("assignor") is not None \
            and body["assignor"] not in PROTOCOL_ASSIGNORS[in_force]:
        assert status == 422, (body, in_force, status)
    elif not _commit_agrees(body.get("commit"), body.get("exactly_once")):
        assert status == 422, (body, status)
    else:
        assert status == 200, (body, in_force, status)


def _listening_sockets(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        p = Path(table)
        if not p.exists():
            continue
        for line in p.read_text().splitlines()[1:]:
            cols = line.split()
            addr, hexport = cols[1].split(":")
            if int(hexport, 16) == port and cols[3] == "0A":  # 0A = LISTEN
                found.append(addr)
    return found


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.254.254.254", 9))
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_listens_on_loopback_only(backend):
    port = int(backend.client.url.rsplit(":", 1)[1])
    bound = _listening_sockets(port)
    assert bound, f"nothing listening on {port}"
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
    assert set(bound) <= loopback, bound
    other = _non_loopback_address()
    if other is None:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    with pytest.raises(OSError), socket.create_connection((other, port), timeout=3):
        pass
