"""The typed client of the control API, shared by the dashboard and `groupscope ctl`.

It speaks the models of `backend.contracts.control`, the same ones the server validates
with, so a field renamed there is renamed here. The transport is stdlib urllib: one short
request at a time needs no HTTP library. Every refusal becomes a ControlError carrying the
HTTP status and the server's one-line message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import partialmethod
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from backend.contracts.control import (
    NODE_REQUEST_TIMEOUT_S,
    REPLAY_TIMEOUT_S,
    BrokerAnswer,
    BrokerNode,
    BrokersAnswer,
    CapacityAnswer,
    CapacityRequest,
    FleetAnswer,
    FleetState,
    LabAnswer,
    LabEventRequest,
    LabStartRequest,
    LabState,
    OptionsAnswer,
    PartitionChange,
    PartitionsAnswer,
    PartitionsRequest,
    RateRequest,
    ReplayAnswer,
    ReplayPreview,
    ReplayRequest,
    ReplicaAnswer,
    ReplicaInfo,
    ReplicaOptions,
    ScaleAnswer,
    ScaleRequest,
    Status,
    StreamsRequest,
    options_request,
)
from backend.control_files import ControlNotFound, find_control_files
from backend.errors import one_line

M = TypeVar("M", bound=BaseModel)


class ControlError(RuntimeError):
    """The API refused a call (status 4xx/5xx) or could not be reached (status 0)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ControlClient:
    url: str
    # kept out of repr: a traceback (pytest prints locals) or a log line must not show it
    token: str | None = field(default=None, repr=False)
    timeout: float = 30.0

    @classmethod
    def discover(cls, data_dir: Path | None = None, timeout: float = 30.0) -> ControlClient:
        """The running supervisor's endpoint and token, from `data_dir` or, without one, from
        wherever `find_control_files` finds a live supervisor."""
        try:
            ep = find_control_files(data_dir)
        except ControlNotFound as exc:
            raise ControlError(str(exc)) from None
        return cls(url=ep.url, token=ep.token, timeout=timeout)

    # ---- transport -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: BaseModel | None = None,
                raw: bytes | None = None, auth: bool = True,
                timeout: float | None = None) -> dict[str, Any]:
        """One call; the answer's JSON object. `raw` sends bytes as they are (tests, and a
        body whose null means something); `timeout` overrides the client's for a call known
        to take long."""
        data = raw
        if data is None and body is not None:
            data = body.model_dump_json(exclude_none=True).encode()
        if method == "POST" and data is None:
            data = b""
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error") or exc.reason
            except (ValueError, AttributeError):
                message = str(exc.reason)
            raise ControlError(str(message), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControlError(f"supervisor at {self.url} not reachable: {reason}") from None

    def _call(self, answer: type[M], method: str, path: str, body: BaseModel | None = None,
              auth: bool = True, raw: bytes | None = None, timeout: float | None = None) -> M:
        data = self.request(method, path, body, raw=raw, auth=auth, timeout=timeout)
        try:
            return answer.model_validate(data)
        except ValidationError as exc:
            raise ControlError(f"the supervisor at {self.url} answered {path} with an "
                               f"unexpected body: {one_line(exc)}") from None

    # ---- calls -----------------------------------------------------------------------------

    def health(self) -> bool:
        return bool(self.request("GET", "/health", auth=False).get("ok"))

    def status(self) -> Status:
        return self._call(Status, "GET", "/status")

    def openapi(self) -> dict[str, Any]:
        return self.request("GET", "/openapi.json", auth=False)

    def start(self) -> ReplicaInfo:
        return self._call(ReplicaAnswer, "POST", "/replicas").replica

    def _replica(self, action: str, name: str, group: str = "") -> ReplicaInfo:
        """`group` "/share": the share group's replica of that name."""
        path = f"{group}/replicas/{quote(name, safe='')}/{action}"
        return self._call(ReplicaAnswer, "POST", path).replica

    # kill: SIGKILL (its partitions move after the session timeout); stop: SIGTERM (it leaves
    # the group at once); restart: start a stopped or killed replica again under its name
    kill = partialmethod(_replica, "kill")
    stop = partialmethod(_replica, "stop")
    restart = partialmethod(_replica, "restart")

    # the share group's replicas: the same verbs under /share
    def share_start(self) -> ReplicaInfo:
        return self._call(ReplicaAnswer, "POST", "/share/replicas").replica

    share_kill = partialmethod(_replica, "kill", group="/share")
    share_stop = partialmethod(_replica, "stop", group="/share")
    share_restart = partialmethod(_replica, "restart", group="/share")

    def share_scale(self, replicas: int) -> ScaleAnswer:
        return self._call(ScaleAnswer, "POST", "/share/scale",
                          ScaleRequest.model_construct(replicas=replicas))

    def brokers(self) -> BrokersAnswer:
        """The nodes of the Kafka cluster the stack runs (refused, 409, when it runs none)."""
        return self._call(BrokersAnswer, "GET", "/brokers")

    def _broker(self, action: str, node_id: int) -> BrokerNode:
        """A node's start waits until it answers (seconds, a minute at most)."""
        return self._call(BrokerAnswer, "POST", f"/brokers/{int(node_id)}/{action}",
                          timeout=max(self.timeout, NODE_REQUEST_TIMEOUT_S + 5)).broker

    # kill: SIGKILL (leaders move after the node's session timeout); stop: a controlled
    # shutdown (leaders move first); start: it catches up, then rejoins the ISRs
    broker_kill = partialmethod(_broker, "kill")
    broker_stop = partialmethod(_broker, "stop")
    broker_start = partialmethod(_broker, "start")

    def scale(self, replicas: int) -> ScaleAnswer:
        return self._call(ScaleAnswer, "POST", "/scale",
                          ScaleRequest.model_construct(replicas=replicas))

    def replay_preview(self, to: str, at: str | None = None, offset: int | None = None,
                       partitions: list[int] | None = None, by: str = "ctl") -> ReplayPreview:
        """What moving the group's committed offsets to `to` would replay or skip, per
        partition and per car (it reads the records between: give it time)."""
        body = ReplayRequest.model_construct(to=to, at=at, offset=offset,
                                             partitions=partitions, by=by)
        return self._call(ReplayPreview, "POST", "/replay/preview", body,
                          timeout=max(self.timeout, REPLAY_TIMEOUT_S))

    def replay(self, to: str, at: str | None = None, offset: int | None = None,
               partitions: list[int] | None = None, by: str = "ctl") -> ReplayAnswer:
        """Stop the replicas, move the offsets, start them again (tens of seconds)."""
        body = ReplayRequest.model_construct(to=to, at=at, offset=offset,
                                             partitions=partitions, by=by)
        return self._call(ReplayAnswer, "POST", "/replay", body,
                          timeout=max(self.timeout, REPLAY_TIMEOUT_S))

    def set_options(self, protocol: str | None = None, assignor: str | None = None,
                    exactly_once: bool | None = None, static: bool | None = None,
                    commit: str | None = None) -> ReplicaOptions:
        body = options_request(protocol, assignor, exactly_once, static, commit)
        return self._call(OptionsAnswer, "POST", "/options", body).options

    def set_capacity(self, max_rate: float | None) -> CapacityAnswer:
        """Messages/s each replica takes at most; None turns the cap off. Running replicas
        restart with it (`restarting` in the answer)."""
        body = CapacityRequest.model_construct(max_rate=max_rate)
        # sent with its null: `{"max_rate": null}` is "off", an empty body is refused
        return self._call(CapacityAnswer, "POST", "/capacity",
                          raw=body.model_dump_json().encode())

    def fleet_start(self) -> FleetState:
        return self._call(FleetAnswer, "POST", "/fleet/start").fleet

    def fleet_stop(self) -> FleetState:
        return self._call(FleetAnswer, "POST", "/fleet/stop").fleet

    def set_rate(self, rate: float) -> FleetState:
        return self._call(FleetAnswer, "POST", "/fleet/rate",
                          RateRequest.model_construct(rate=rate)).fleet

    def set_streams(self, streams: int) -> FleetState:
        return self._call(FleetAnswer, "POST", "/fleet/streams",
                          StreamsRequest.model_construct(streams=streams)).fleet

    def lab_start(self, protocols: list[str], replicas: int | None = None,
                  partitions: int | None = None) -> LabState:
        fields = {k: v for k, v in (("replicas", replicas), ("partitions", partitions))
                  if v is not None}
        return self._call(LabAnswer, "POST", "/lab/start",
                          LabStartRequest(protocols=protocols, **fields)).lab

    def lab_event(self, event: str) -> LabState:
        return self._call(LabAnswer, "POST", "/lab/event", LabEventRequest(event=event)).lab

    def lab_stop(self) -> None:
        self.request("POST", "/lab/stop", timeout=max(self.timeout, 30.0))

    def add_partitions(self, partitions: int) -> PartitionChange:
        answer = self._call(PartitionsAnswer, "POST", "/partitions",
                            PartitionsRequest.model_construct(partitions=partitions))
        return PartitionChange.model_validate(answer.model_dump())
