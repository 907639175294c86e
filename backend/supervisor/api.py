"""The control API: JSON over HTTP on 127.0.0.1, described at /openapi.json.

Reads (GET) are open to local callers; every call that changes something needs
`Authorization: Bearer <token>`. A request is fully validated before anything is touched, so
a refusal (4xx with `{"error": "..."}`) never leaves a half-done change behind. The stdlib
ThreadingHTTPServer is enough for one dashboard and a CLI, and adds no dependency.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from backend.supervisor.auth import token_matches
from backend.supervisor.models import (
    PROTOCOL_ASSIGNORS,
    PartitionChange,
    ReplicaInfo,
    ReplicaOptions,
    Status,
)
from backend.supervisor.names import NAME_RE
from backend.supervisor.processes import PoolError
from backend.supervisor.validation import (
    MAX_BODY_BYTES,
    MAX_PARTITIONS,
    MAX_RATE,
    MAX_STREAMS,
    RequestError,
    only_fields,
    optional_bool,
    optional_choice,
    parse_body,
    require_int,
    require_number,
)

log = logging.getLogger("groupscope.supervisor.api")

ALL_ASSIGNORS = tuple(dict.fromkeys(a for v in PROTOCOL_ASSIGNORS.values() for a in v))


class Supervisor(Protocol):
    """What the API drives; `service.SupervisorService` implements it."""

    max_replicas: int

    def status(self) -> Status: ...
    def start_replica(self) -> ReplicaInfo: ...
    def kill(self, name: str) -> ReplicaInfo: ...
    def stop(self, name: str) -> ReplicaInfo: ...
    def restart(self, name: str) -> ReplicaInfo: ...
    def scale(self, n: int) -> dict[str, list[str]]: ...
    def set_options(self, protocol: str | None, assignor: str | None,
                    exactly_once: bool | None) -> ReplicaOptions: ...
    def fleet_start(self) -> dict[str, Any]: ...
    def fleet_stop(self) -> dict[str, Any]: ...
    def set_rate(self, rate: float) -> dict[str, Any]: ...
    def set_streams(self, streams: int) -> dict[str, Any]: ...
    def add_partitions(self, partitions: int) -> PartitionChange: ...


class DependencyError(Exception):
    """Kafka or another dependency failed while doing a valid request (503)."""


Handler = Callable[[Supervisor, dict[str, Any], dict[str, str]], Any]


def _replica_action(action: str) -> Handler:
    def run(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
        only_fields(body, ())
        return {"replica": getattr(sv, action)(params["name"]).to_dict()}
    return run


def _start(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ())
    return {"replica": sv.start_replica().to_dict()}


def _scale(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ("replicas",))
    n = require_int(body, "replicas", 0, sv.max_replicas)
    return sv.scale(n)


def _options(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ("protocol", "assignor", "exactly_once"))
    protocol = optional_choice(body, "protocol", tuple(PROTOCOL_ASSIGNORS))
    assignor = optional_choice(body, "assignor", ALL_ASSIGNORS)
    exactly_once = optional_bool(body, "exactly_once")
    return {"options": sv.set_options(protocol, assignor, exactly_once).to_dict()}


def _fleet_start(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ())
    return {"fleet": sv.fleet_start()}


def _fleet_stop(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ())
    return {"fleet": sv.fleet_stop()}


def _rate(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ("rate",))
    return {"fleet": sv.set_rate(require_number(body, "rate", 0.0, MAX_RATE))}


def _streams(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ("streams",))
    return {"fleet": sv.set_streams(require_int(body, "streams", 1, MAX_STREAMS))}


def _partitions(sv: Supervisor, body: dict[str, Any], params: dict[str, str]) -> Any:
    only_fields(body, ("partitions",))
    return sv.add_partitions(require_int(body, "partitions", 1, MAX_PARTITIONS)).to_dict()


_NAME = r"(?P<name>[^/]+)"
POST_ROUTES: list[tuple[re.Pattern[str], Handler]] = [
    (re.compile(r"^/replicas$"), _start),
    (re.compile(rf"^/replicas/{_NAME}/kill$"), _replica_action("kill")),
    (re.compile(rf"^/replicas/{_NAME}/stop$"), _replica_action("stop")),
    (re.compile(rf"^/replicas/{_NAME}/restart$"), _replica_action("restart")),
    (re.compile(r"^/scale$"), _scale),
    (re.compile(r"^/options$"), _options),
    (re.compile(r"^/fleet/start$"), _fleet_start),
    (re.compile(r"^/fleet/stop$"), _fleet_stop),
    (re.compile(r"^/fleet/rate$"), _rate),
    (re.compile(r"^/fleet/streams$"), _streams),
    (re.compile(r"^/partitions$"), _partitions),
]
GET_PATHS = ("/health", "/status", "/openapi.json")


def _match_post(path: str) -> tuple[Handler, dict[str, str]] | None:
    for pattern, handler in POST_ROUTES:
        m = pattern.match(path)
        if m:
            return handler, m.groupdict()
    return None


class ControlServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, supervisor: Supervisor, token: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the control API listens on the loopback interface only")
        super().__init__((host, port), _RequestHandler)
        self.supervisor = supervisor
        self.token = token
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start_background(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="control-api",
                                        kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread:
            self._thread.join(timeout=5)


class _RequestHandler(BaseHTTPRequestHandler):
    server: ControlServer
    server_version = "groupscope-supervisor"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet; never logs headers
        log.debug("%s " + format, self.address_string(), *args)

    # ---- responses -------------------------------------------------------------------------

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": message}, headers)

    def _host_ok(self) -> bool:
        """Refuse foreign Host headers: a web page cannot reach us through DNS rebinding."""
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
        return name in ("127.0.0.1", "localhost", "[::1]", "")

    # ---- methods ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self._host_ok():
            return self._error(403, "requests must be addressed to 127.0.0.1 or localhost")
        try:
            if path == "/health":
                return self._send(200, {"ok": True})
            if path == "/openapi.json":
                return self._send(200, openapi_document())
            if path == "/status":
                return self._send(200, self.server.supervisor.status().to_dict())
        except Exception as exc:  # a broken dependency, not the caller's fault
            log.exception("GET %s failed", path)
            return self._error(503, f"status unavailable: {exc}")
        if _match_post(path):
            return self._error(405, f"{path} takes POST", {"Allow": "POST"})
        return self._error(404, f"no such endpoint {path}; see /openapi.json")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        # read the body first so the connection stays usable whatever we answer
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return self._error(411, "send the body with a Content-Length, not chunked")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            return self._error(400, "Content-Length is not a number")
        if length < 0 or length > MAX_BODY_BYTES:
            self._drain(length)
            self.close_connection = True
            return self._error(413, f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length else b""
        if not self._host_ok():
            return self._error(403, "requests must be addressed to 127.0.0.1 or localhost")
        route = _match_post(path)
        if route is None:
            if path in GET_PATHS:
                return self._error(405, f"{path} takes GET", {"Allow": "GET"})
            return self._error(404, f"no such endpoint {path}; see /openapi.json")
        auth = self.headers.get("Authorization")
        if not auth:
            return self._error(401, "missing Authorization: Bearer <token> (the token is in "
                                    "<data dir>/control.token)",
                               {"WWW-Authenticate": 'Bearer realm="groupscope"'})
        if not token_matches(auth, self.server.token):
            return self._error(403, "wrong token")
        handler, params = route
        if "name" in params and not NAME_RE.match(params["name"]):
            return self._error(404, f"no replica named {params['name']!r}")
        try:
            body = parse_body(raw)
            result = handler(self.server.supervisor, body, params)
        except RequestError as exc:
            return self._error(exc.status, str(exc))
        except PoolError as exc:
            return self._error(exc.status, str(exc))
        except DependencyError as exc:
            return self._error(503, str(exc))
        except Exception as exc:
            log.exception("POST %s failed", path)
            return self._error(500, f"internal error: {exc}")
        return self._send(200, {"ok": True, **(result or {})})

    def _drain(self, length: int, limit: int = 1 << 20) -> None:
        """Read (and drop) a refused body, so the client sees our answer, not a reset."""
        left = min(max(length, 0), limit)
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)

    def _not_allowed(self) -> None:
        self.close_connection = True  # any body it sent is unread
        if self.command == "HEAD":  # a HEAD answer carries no body
            self.send_response(405)
            self.send_header("Allow", "GET, POST")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._error(405, f"method {self.command} not allowed; use GET or POST",
                    {"Allow": "GET, POST"})

    def __getattr__(self, name: str) -> Any:
        """Every other method (HEAD, OPTIONS, TRACE, made-up ones) is a 405, never a 501:
        http.server answers 501 for a method without a do_ handler."""
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)


# ---- OpenAPI ------------------------------------------------------------------------------

def _body(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props,
                              "additionalProperties": False}
    if required:
        schema["required"] = required
    return {"required": bool(required),
            "content": {"application/json": {"schema": schema}}}


def _op(summary: str, body: dict[str, Any] | None = None, mutating: bool = True,
        name_param: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {
            "200": {"description": "done", "content": {"application/json": {"schema": {
                "type": "object"}}}},
            "400": {"$ref": "#/components/responses/Error"},
        },
    }
    if mutating:
        op["security"] = [{"bearer": []}]
        op["responses"].update({"401": {"$ref": "#/components/responses/Error"},
                                "403": {"$ref": "#/components/responses/Error"},
                                "409": {"$ref": "#/components/responses/Error"}})
    else:
        op["security"] = []
    if name_param:
        op["parameters"] = [{"name": "name", "in": "path", "required": True,
                             "schema": {"type": "string", "pattern": NAME_RE.pattern}}]
        op["responses"]["404"] = {"$ref": "#/components/responses/Error"}
    if body:
        op["requestBody"] = body
    return op


def openapi_document() -> dict[str, Any]:
    from backend.supervisor.processes import DEFAULT_MAX_REPLICAS

    return {
        "openapi": "3.1.0",
        "info": {"title": "groupscope supervisor", "version": "1",
                 "description": "Start, kill, stop and scale replicas; drive the fleet "
                                "simulator and the topic. Mutating calls need the bearer "
                                "token from <data dir>/control.token."},
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {"description": "refused; nothing changed",
                                    "content": {"application/json": {"schema": {
                                        "type": "object", "required": ["error"],
                                        "properties": {"error": {"type": "string"}}}}}}},
        },
        "paths": {
            "/health": {"get": _op("liveness", mutating=False)},
            "/status": {"get": _op("replicas, external members, options, fleet",
                                   mutating=False)},
            "/openapi.json": {"get": _op("this document", mutating=False)},
            "/replicas": {"post": _op("start one replica under the next free name")},
            "/replicas/{name}/kill": {"post": _op("SIGKILL: a crash", name_param=True)},
            "/replicas/{name}/stop": {"post": _op("SIGTERM: graceful leave", name_param=True)},
            "/replicas/{name}/restart": {"post": _op("graceful stop, then start again",
                                                     name_param=True)},
            "/scale": {"post": _op("start new replicas or stop the newest until N run", _body(
                {"replicas": {"type": "integer", "minimum": 0,
                              "maximum": DEFAULT_MAX_REPLICAS}}, ["replicas"]))},
            "/options": {"post": _op("protocol / assignor / exactly-once for new replicas",
                                     _body({"protocol": {"enum": list(PROTOCOL_ASSIGNORS)},
                                            "assignor": {"enum": list(ALL_ASSIGNORS)},
                                            "exactly_once": {"type": "boolean"}}))},
            "/fleet/start": {"post": _op("start the simulator")},
            "/fleet/stop": {"post": _op("stop the simulator")},
            "/fleet/rate": {"post": _op("messages per second", _body(
                {"rate": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_RATE}},
                ["rate"]))},
            "/fleet/streams": {"post": _op("number of simulated streams (cars)", _body(
                {"streams": {"type": "integer", "minimum": 1, "maximum": MAX_STREAMS}},
                ["streams"]))},
            "/partitions": {"post": _op("grow the input topic; lists streams that move", _body(
                {"partitions": {"type": "integer", "minimum": 1, "maximum": MAX_PARTITIONS}},
                ["partitions"]))},
        },
    }


