"""The control API: a FastAPI app on 127.0.0.1, served by uvicorn in a background thread.

Reads (GET) are open to local callers; every call that changes something needs
`Authorization: Bearer <token>`. Bodies are the pydantic models of `backend.contracts.control`,
so validation, `/openapi.json` and the client's types are one thing. A request is fully
validated before anything is touched, so a refusal (4xx with `{"error": "..."}`) never leaves
a half-done change behind. The order of the checks is the security story: body size and Host
header first (middleware), then the route, then the token (a dependency, which FastAPI runs
before it validates the body), then the body, then the action. A JSON body is parsed before
the token is looked at, so one that is not JSON is refused (422) even without a token; it
reaches nothing either way.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from backend.contracts.control import (
    BROKER_ACTIONS,
    MAX_BODY_BYTES,
    UNION_BRANCHES,
    BrokerAnswer,
    BrokersAnswer,
    CapacityAnswer,
    CapacityRequest,
    Done,
    FleetAnswer,
    LabAnswer,
    LabEventRequest,
    LabStartRequest,
    NoFields,
    OptionsAnswer,
    OptionsRequest,
    PartitionsAnswer,
    PartitionsRequest,
    RateRequest,
    Refusal,
    ReplayAnswer,
    ReplayPreview,
    ReplayRequest,
    ReplicaAnswer,
    ScaleAnswer,
    ScaleRequest,
    Status,
    StreamsRequest,
)
from backend.netutil import wait_until
from backend.pool.names import NAME_RE
from backend.pool.processes import PoolError, UnknownReplica
from backend.supervisor.auth import token_matches
from backend.supervisor.service import DependencyError, SupervisorService

log = logging.getLogger("groupscope.supervisor.api")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "")
# module level: FastAPI resolves handler annotations from the module's globals
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(
    scheme_name="bearer",
    auto_error=False, description="the token in <data dir>/control.token"))]
AUTH_HINT = "missing Authorization: Bearer <token> (the token is in <data dir>/control.token)"


def _refusal(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={
        "Cache-Control": "no-store", **(headers or {})})


def _documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    reasons = {
        401: "no token: send Authorization: Bearer <token>",
        403: "wrong token, or a Host header that is not loopback",
        404: "no such replica or broker",
        409: "not possible in the current state (e.g. already at the replica limit)",
        411: "chunked body: send a Content-Length",
        413: f"request body over {MAX_BODY_BYTES} bytes",
        422: "the body is not JSON, or it or one of its fields is invalid",
        503: "Kafka or the simulator failed while doing a valid request",
    }
    return {c: {"model": Refusal, "description": reasons[c] + "; nothing changed"}
            for c in codes}


READ = _documented(403, 503)
CHANGE = _documented(401, 403, 409, 411, 413, 422, 503)
CHANGE_NAMED = _documented(401, 403, 404, 409, 411, 413, 422, 503)
# an assignor without a protocol is checked against the protocol in force, which the body's
# schema cannot know; nor can it say that exactly_once and commit must agree
OPTIONS = {**CHANGE, 422: {**CHANGE[422], "description": (
    "the body is not JSON, or it or one of its fields is invalid, or it names an assignor "
    "but no protocol and the protocol in force does not take that assignor, or it gives "
    "exactly_once (the older spelling) and a commit mode that disagree; nothing changed")}}


def _validation_line(exc: RequestValidationError) -> str:
    """Pydantic's first complaint as one line: which field, what is wrong, what was sent.

    The union a body may be (e.g. one branch per protocol) names its branches in the error's
    location; a caller knows fields, not branches, so those are left out."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())
                     if p != "body" and p not in UNION_BRANCHES) or "body"
    if err.get("type") == "json_invalid":
        return f"request body is not valid JSON: {err.get('ctx', {}).get('error', '')}".strip()
    if err.get("type") == "union_tag_invalid":  # the field that picks the branch
        ctx = err.get("ctx", {})
        where = ctx.get("discriminator", where).strip("'")
        choices = ctx.get("expected_tags", "")
        head, _, last = choices.rpartition(", ")
        given = err.get("input")
        err = {**err, "msg": f"Input should be {f'{head} or {last}' if head else last}",
               "input": given.get(where) if isinstance(given, dict) else given}
    if err.get("type") == "value_error":  # a model's own check: its message says it all
        return str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if err.get("type") == "missing":
        return f"missing field {where!r}"
    if err.get("type") == "extra_forbidden":
        return f"unknown field {where!r}"
    given = err.get("input")
    shown = repr(given) if isinstance(given, str | int | float | bool) or given is None else \
        type(given).__name__
    return f"{where}: {err.get('msg', 'invalid')}, not {shown}"


def create_app(supervisor: SupervisorService, token: str) -> FastAPI:
    """The app for one supervisor; `token` is the only credential that changes anything."""
    app = FastAPI(
        title="groupscope supervisor", version="1", docs_url=None, redoc_url=None,
        description="Start, kill, stop and scale replicas; drive the fleet simulator and the "
                    "topic. Calls that change something need the bearer token from "
                    "<data dir>/control.token.")

    def authorised(creds: Credentials) -> None:
        if creds is None:
            raise HTTPException(401, AUTH_HINT,
                                headers={"WWW-Authenticate": 'Bearer realm="groupscope"'})
        if not token_matches(f"{creds.scheme} {creds.credentials}", token):
            raise HTTPException(403, "wrong token")

    @app.middleware("http")
    async def guard(request: Request,
                    call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Body size and Host header, before any route or body is looked at."""
        if request.headers.get("transfer-encoding"):
            return _refusal(411, "send the body with a Content-Length, not chunked",
                            {"Connection": "close"})
        length = request.headers.get("content-length") or "0"
        if not length.isdigit():
            return _refusal(400, "Content-Length is not a number", {"Connection": "close"})
        if int(length) > MAX_BODY_BYTES:
            return _refusal(413, f"request body over {MAX_BODY_BYTES} bytes",
                            {"Connection": "close"})
        if _host_name(request.headers.get("host") or "") not in LOOPBACK_NAMES:
            # a web page cannot reach us through DNS rebinding
            return _refusal(403, "requests must be addressed to 127.0.0.1 or localhost")
        response = await call_next(request)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.exception_handler(HTTPException)
    async def http_refusal(request: Request, exc: HTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404:
            message = f"no such endpoint {request.url.path}; see /openapi.json"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        elif exc.status_code == 400:
            # FastAPI's answer to a body json.loads could not read: invalid like any other
            return _refusal(422, f"request body is not valid JSON: {_unreadable(exc)}")
        return _refusal(exc.status_code, message, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _refusal(422, _validation_line(exc))

    @app.exception_handler(PoolError)
    async def refused(request: Request, exc: PoolError) -> JSONResponse:
        return _refusal(exc.status, str(exc))

    @app.exception_handler(DependencyError)
    async def unavailable(request: Request, exc: DependencyError) -> JSONResponse:
        return _refusal(503, str(exc))

    def replica_name(name: str) -> str:
        if not NAME_RE.match(name):
            raise UnknownReplica(f"no replica named {name!r}")
        return name

    # Handlers are plain `def`: FastAPI runs them in a worker thread, so a slow Kafka call
    # never blocks the event loop that answers /health.

    @app.get("/health", responses=READ, summary="liveness")
    def health() -> Done:
        return Done()

    @app.get("/status", responses=READ, summary="replicas, external members, options, fleet")
    def status() -> Status:
        try:
            return supervisor.status()
        except PoolError:
            raise
        except Exception as exc:  # a broken dependency, not the caller's fault
            log.exception("GET /status failed")
            raise DependencyError(f"status unavailable: {exc}") from None

    changes = {"dependencies": [Depends(authorised)]}

    @app.post("/replicas", responses=CHANGE, summary="start one replica under the next free "
              "name", **changes)
    def start(body: NoFields | None = None) -> ReplicaAnswer:
        return ReplicaAnswer(replica=supervisor.start_replica())

    @app.post("/replicas/{name}/kill", responses=CHANGE_NAMED, summary="SIGKILL: a crash",
              **changes)
    def kill(name: str, body: NoFields | None = None) -> ReplicaAnswer:
        return ReplicaAnswer(replica=supervisor.kill(replica_name(name)))

    @app.post("/replicas/{name}/stop", responses=CHANGE_NAMED,
              summary="SIGTERM: graceful leave", **changes)
    def stop(name: str, body: NoFields | None = None) -> ReplicaAnswer:
        return ReplicaAnswer(replica=supervisor.stop(replica_name(name)))

    @app.post("/replicas/{name}/restart", responses=CHANGE_NAMED,
              summary="graceful stop, then start again", **changes)
    def restart(name: str, body: NoFields | None = None) -> ReplicaAnswer:
        return ReplicaAnswer(replica=supervisor.restart(replica_name(name)))

    @app.post("/scale", responses=CHANGE, summary="start new replicas or stop the newest "
              "until N run", **changes)
    def scale(body: ScaleRequest) -> ScaleAnswer:
        return ScaleAnswer(**supervisor.scale(body.replicas))

    # the share group's replicas (KIP-932) beside the consumer group's, on the same topic
    @app.post("/share/replicas", responses=CHANGE, summary="start one share-group replica "
              "under the next free name", **changes)
    def share_start(body: NoFields | None = None) -> ReplicaAnswer:
        return ReplicaAnswer(replica=supervisor.share_action("start"))

    def share_route(action: str, summary: str) -> None:
        def act(name: str, body: NoFields | None = None) -> ReplicaAnswer:
            return ReplicaAnswer(replica=supervisor.share_action(action, replica_name(name)))

        app.post(f"/share/replicas/{{name}}/{action}", responses=CHANGE_NAMED,
                 summary=summary, name=f"share_{action}", **changes)(act)

    for action, summary in (("kill", "SIGKILL a share replica: its records come back after "
                                     "the lock time"),
                            ("stop", "SIGTERM: it leaves, releasing what it holds"),
                            ("restart", "graceful stop, then start again")):
        share_route(action, summary)

    @app.post("/share/scale", responses=CHANGE, summary="start new share replicas or stop "
              "the newest until N run", **changes)
    def share_scale(body: ScaleRequest) -> ScaleAnswer:
        return ScaleAnswer(**supervisor.share_scale(body.replicas))

    # the Lab page's groups: one protocol each, one event to all of them at once
    @app.post("/lab/start", responses=CHANGE, summary="start the lab: a group a protocol, "
              "on a topic of its own", **changes)
    def lab_start(body: LabStartRequest) -> LabAnswer:
        return LabAnswer(lab=supervisor.lab_start(body))

    @app.post("/lab/event", responses=CHANGE, summary="apply one event to every lab group "
              "at the same instant", **changes)
    def lab_event(body: LabEventRequest) -> LabAnswer:
        return LabAnswer(lab=supervisor.lab_event(body.event))

    @app.post("/lab/stop", responses=CHANGE, summary="stop the lab's replicas and cars",
              **changes)
    def lab_stop(body: NoFields | None = None) -> Done:
        supervisor.lab_stop()
        return Done()

    @app.post("/replay/preview", responses=CHANGE, summary="what moving the group's "
              "committed offsets to a target would replay or skip, per partition and per "
              "car; changes nothing", **changes)
    def replay_preview(body: ReplayRequest) -> ReplayPreview:
        return supervisor.replay_preview(body)

    @app.post("/replay", responses=CHANGE, summary="stop the replicas, move the group's "
              "committed offsets to a target, start them again", **changes)
    def replay(body: ReplayRequest) -> ReplayAnswer:
        return supervisor.replay(body)

    @app.post("/options", responses=OPTIONS, summary="protocol / assignor / commit mode / "
              "static membership for new replicas", **changes)
    def options(body: OptionsRequest) -> OptionsAnswer:
        return OptionsAnswer(options=supervisor.set_options(
            body.protocol, body.assignor, None, body.static, body.commit_mode))

    @app.post("/capacity", responses=CHANGE, summary="messages/s each replica takes at most "
              "(null: no cap); running replicas restart with it", **changes)
    def capacity(body: CapacityRequest) -> CapacityAnswer:
        options, restarting = supervisor.set_capacity(body.max_rate)
        return CapacityAnswer(options=options, restarting=tuple(restarting))

    @app.post("/fleet/start", responses=CHANGE, summary="start the simulator", **changes)
    def fleet_start(body: NoFields | None = None) -> FleetAnswer:
        return FleetAnswer(fleet=supervisor.fleet_start())

    @app.post("/fleet/stop", responses=CHANGE, summary="stop the simulator", **changes)
    def fleet_stop(body: NoFields | None = None) -> FleetAnswer:
        return FleetAnswer(fleet=supervisor.fleet_stop())

    @app.post("/fleet/rate", responses=CHANGE, summary="messages per second", **changes)
    def fleet_rate(body: RateRequest) -> FleetAnswer:
        return FleetAnswer(fleet=supervisor.set_rate(body.rate))

    @app.post("/fleet/streams", responses=CHANGE, summary="number of simulated streams",
              **changes)
    def fleet_streams(body: StreamsRequest) -> FleetAnswer:
        return FleetAnswer(fleet=supervisor.set_streams(body.streams))

    @app.post("/partitions", responses=CHANGE, summary="grow the input topic; lists streams "
              "that move", **changes)
    def partitions(body: PartitionsRequest) -> PartitionsAnswer:
        change = supervisor.add_partitions(body.partitions)
        return PartitionsAnswer(**change.model_dump())

    @app.get("/brokers", responses=_documented(403, 409, 503),
             summary="the nodes of the Kafka cluster this stack runs, and its quorum leader")
    def brokers() -> BrokersAnswer:
        return supervisor.brokers()

    def broker_route(action: str) -> None:
        def act(node_id: int, body: NoFields | None = None) -> BrokerAnswer:
            return BrokerAnswer(broker=supervisor.broker_action(node_id, action))

        summary = {"kill": "SIGKILL one Kafka node: a crash",
                   "stop": "SIGTERM one Kafka node: a controlled shutdown",
                   "start": "start a stopped Kafka node again"}[action]
        app.post(f"/brokers/{{node_id}}/{action}", responses=CHANGE_NAMED, summary=summary,
                 operation_id=f"broker_{action}", **changes)(act)

    for action in BROKER_ACTIONS:
        broker_route(action)

    describe_itself(app)
    return app


def describe_itself(app: FastAPI) -> None:
    """Add `/openapi.json` to the document it serves, so every route is described."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        doc = generate()
        doc["paths"].setdefault(app.openapi_url or "/openapi.json", {"get": {
            "summary": "this document", "operationId": "openapi",
            "responses": {"200": {"description": "the OpenAPI document", "content": {
                "application/json": {"schema": {
                    "type": "object", "required": ["openapi", "info", "paths"],
                    "properties": {"openapi": {"type": "string"}, "info": {"type": "object"},
                                   "paths": {"type": "object"}}}}}},
                **{str(code): answer for code, answer in _openapi_refusals(READ).items()}},
        }})
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _openapi_refusals(codes: dict[int | str, dict[str, Any]]) -> dict[int | str, Any]:
    return {code: {"description": answer["description"], "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Refusal"}}}} for code, answer in codes.items()}


def _unreadable(exc: Exception) -> str:
    """Why json.loads failed on a body, from the error FastAPI raised its 400 from."""
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(cause, RecursionError):
        return "it is nested too deeply"
    return "it could not be read"


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0]


class ControlServer:
    """The app on a loopback socket, served by uvicorn on a background thread."""

    def __init__(self, supervisor: SupervisorService, token: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError("the control API listens on the loopback interface only")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError:
            self._socket.close()
            raise
        self._socket.listen(64)
        self._server = uvicorn.Server(uvicorn.Config(
            create_app(supervisor, token), log_level="warning", access_log=False,
            lifespan="off", timeout_graceful_shutdown=3, server_header=False))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start_background(self, timeout: float = 10.0) -> None:
        """Serve on a daemon thread; return once uvicorn accepts connections."""
        self._thread = threading.Thread(target=self._server.run, name="control-api",
                                        kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        wait_until(lambda: self._server.started or not self._thread.is_alive(), timeout,
                   interval=0.02, what="the control API to start")
        if not self._server.started:
            raise OSError("the control API did not start; see the log above")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=5)
        self._socket.close()
